"""The ``visibility_report`` asset, its job and the sensor that launches it after a sync, in real Dagster."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from dagster import AssetKey, DefaultSensorStatus, ExecuteInProcessResult, build_sensor_context, materialize

from assets.visibility_report import REPORT_FILE, REPORT_JOB, visibility_report
from pipelines.definitions import defs
from pipelines.jobs import SYNC_JOB
from pipelines.report_sensor import report_after_sync
from resources.warehouse.resource import WarehouseResource
from tests.report.conftest import Synced

ROOT = Path(__file__).resolve().parents[2]
MD_IMAGE = re.compile(r"^!\[visibility report\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)$")


def report_metadata(result: ExecuteInProcessResult) -> dict[str, Any]:
    events = [
        e for e in result.get_asset_materialization_events() if e.asset_key == AssetKey("visibility_report")
    ]
    assert len(events) == 1
    return dict(events[0].materialization.metadata)


def test_materializing_the_report_shows_the_image_in_the_ui_and_writes_the_png(synced: Synced) -> None:
    result = materialize(
        [visibility_report], instance=synced.instance, resources={"warehouse": synced.warehouse}
    )
    assert result.success
    metadata = report_metadata(result)
    embedded = MD_IMAGE.match(metadata["report"].value)
    assert embedded, metadata["report"].value[:80]
    assert base64.b64decode(embedded.group(1)).startswith(b"\x89PNG\r\n\x1a\n")
    path = Path(metadata["path"].value)
    assert path == (synced.db.parent / "reports" / REPORT_FILE).resolve()  # next to the DuckDB file
    assert path.read_bytes().startswith(b"\x89PNG") and path.stat().st_size == metadata["png_bytes"].value
    assert metadata["brands"].value == 3
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_an_empty_warehouse_fails_the_report_saying_to_run_a_sync(tmp_path: Path, synced: Synced) -> None:
    empty = WarehouseResource(url=f"duckdb:///{tmp_path / 'empty.duckdb'}", schema_name="visibility")
    result = materialize(
        [visibility_report], instance=synced.instance, resources={"warehouse": empty}, raise_on_error=False
    )
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.error
    assert "run `visibility-sync run` first" in failure.message
    assert not (tmp_path / "empty.duckdb").exists()  # reading created nothing


def test_a_successful_sync_run_launches_one_report_run(synced: Synced) -> None:
    assert report_after_sync.default_status == DefaultSensorStatus.RUNNING
    tick = report_after_sync.evaluate_tick(
        build_sensor_context(instance=synced.instance, cursor=synced.cursor_before_sync)
    )
    requests = tick.run_requests or []
    assert len(requests) == 1
    assert requests[0].run_key == f"after-{synced.sync_run_id}"
    assert synced.instance.get_run_by_id(synced.sync_run_id).job_name == SYNC_JOB

    # the requested run, as the daemon launches it: the report job of the code location
    job = defs.resolve_job_def(REPORT_JOB)
    report = job.execute_in_process(
        instance=synced.instance, tags=dict(requests[0].tags), resources={"warehouse": synced.warehouse}
    )
    assert report.success
    assert MD_IMAGE.match(report_metadata(report)["report"].value)

    # the next tick sees the report run succeed: not a sync, so nothing more is requested
    again = report_after_sync.evaluate_tick(
        build_sensor_context(instance=synced.instance, cursor=tick.cursor)
    )
    assert not again.run_requests


def test_the_sync_job_and_the_cli_never_load_the_report_or_matplotlib() -> None:
    assert AssetKey("visibility_report") not in defs.resolve_job_def(SYNC_JOB).asset_layer.selected_asset_keys
    assert defs.resolve_job_def(REPORT_JOB).asset_layer.selected_asset_keys == {AssetKey("visibility_report")}
    code = (
        "import sys, pipelines.cli, pipelines.definitions; "
        "pipelines.cli.build_parser(); "
        "assert 'matplotlib' not in sys.modules, 'matplotlib loaded'"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
