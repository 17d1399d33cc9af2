"""The code location loads: every asset, job, schedule, sensor and check, with pools and schemas."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path

import pytest
from dagster import AssetKey, BackfillPolicy, Definitions, build_schedule_context

from pipelines.definitions import all_assets, defs
from pipelines.jobs import DAILY_JOB, SNAPSHOT_JOB, SYNC_JOB
from pipelines.schedules import daily_sync_schedule, sync_window
from pipelines.sync_now import SYNC_NOW_JOB, SYNC_NOW_SENSOR
from settings import load_settings
from sync.catalog import ALL_TABLES, DAILY

ROOT = Path(__file__).resolve().parents[2]
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
#: the catalog's date x engine tables: a new entry is expected here with no list to keep
DAILY_TABLES = {entry.spec.name for entry in DAILY}


def test_the_definitions_load_with_every_table_job_and_schedule() -> None:
    Definitions.validate_loadable(defs)
    keys = {spec.key for spec in defs.resolve_all_asset_specs()}
    assert {AssetKey(name) for name in ALL_TABLES} <= keys
    jobs = {job.name for job in defs.resolve_all_job_defs()}
    assert {SYNC_JOB, SNAPSHOT_JOB, DAILY_JOB, SYNC_NOW_JOB} <= jobs
    assert {s.name for s in defs.schedules or []} == {"daily_sync"}
    sensors = {s.name for s in defs.sensors or []}
    assert {"visibility_report_after_sync", SYNC_NOW_SENSOR} <= sensors  # and the sensors module's
    assert defs.asset_checks


def test_the_code_location_launches_the_report_after_each_sync() -> None:
    from dagster import DefaultSensorStatus

    from assets.visibility_report import REPORT_JOB

    sensor = defs.resolve_sensor_def("visibility_report_after_sync")  # fails if left out of the defs
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    assert sensor.job_name == REPORT_JOB and defs.resolve_job_def(REPORT_JOB).name == REPORT_JOB


def test_every_asset_shows_its_column_schema_with_descriptions() -> None:
    specs = [spec for asset in all_assets for spec in asset.specs]
    assert {s.key.path[-1] for s in specs} == set(ALL_TABLES) - {"audit_reports"}
    for asset_spec in specs:
        schema = asset_spec.metadata["dagster/column_schema"]
        spec = ALL_TABLES[asset_spec.key.path[-1]]
        assert [c.name for c in schema.columns] == [c.name for c in spec.columns]
        assert all(c.description for c in schema.columns)


def test_a_sync_is_two_subsettable_steps_in_the_api_pool() -> None:
    assert sorted(asset.node_def.name for asset in all_assets) == ["sync_daily", "sync_snapshots"]
    for asset in all_assets:
        assert asset.op.pool == "visibility_api"
        assert asset.can_subset


def test_every_daily_table_shares_one_partitions_definition_so_the_group_takes_a_date_range() -> None:
    partitioned = {spec.key.path[-1]: spec for spec in defs.resolve_all_asset_specs() if spec.partitions_def}
    assert set(partitioned) == DAILY_TABLES
    assert len({spec.partitions_def for spec in partitioned.values()}) == 1
    assert {spec.group_name for spec in partitioned.values()} == {"visibility_daily"}


def test_the_sync_job_holds_every_table_the_schedule_and_the_cli_land() -> None:
    job = defs.resolve_job_def(SYNC_JOB)
    landed = {key.path[-1] for key in job.asset_layer.selected_asset_keys}
    assert landed == set(ALL_TABLES) - {"audit_reports"}


def test_partitioned_assets_backfill_in_a_single_run() -> None:
    partitioned = [a for a in all_assets if a.partitions_def is not None]
    assert {k.path[-1] for a in partitioned for k in a.keys} == DAILY_TABLES
    assert all(a.backfill_policy == BackfillPolicy.single_run() for a in partitioned)


def test_the_sync_window_is_yesterday_and_the_lookback_days() -> None:
    today = dt.date(2026, 5, 10)
    assert sync_window(today, 3, dt.date(2026, 1, 1)) == (dt.date(2026, 5, 6), dt.date(2026, 5, 9))
    assert sync_window(today, 3, dt.date(2026, 5, 8)) == (dt.date(2026, 5, 8), dt.date(2026, 5, 9))
    assert sync_window(today, 0, dt.date(2026, 5, 10)) is None


def test_the_daily_schedule_requests_one_range_run_over_the_lookback_and_every_engine() -> None:
    daily_sync = daily_sync_schedule(load_settings({"VISIBILITY_LOOKBACK_DAYS": "2"}))
    when = dt.datetime.now(dt.UTC).replace(hour=3, minute=0, second=0, microsecond=0) - dt.timedelta(days=5)
    request = daily_sync(build_schedule_context(scheduled_execution_time=when))
    newest = when.date() - dt.timedelta(days=1)
    assert request.tags[RANGE_START] == f"{newest - dt.timedelta(days=2)}|chatgpt"
    assert request.tags[RANGE_END] == f"{newest}|all"


@pytest.mark.skipif(
    shutil.which("dagster", path=str(ROOT / ".venv/bin")) is None, reason="dagster CLI absent"
)
def test_dagster_definitions_validate_accepts_the_workspace() -> None:
    result = subprocess.run(
        [str(ROOT / ".venv/bin/dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": str(ROOT / ".venv/bin"), "HOME": str(ROOT), "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_projects_dagster_yaml_frees_slots_of_dead_runs(tmp_path: Path) -> None:
    """A killed run must not hold its pool slot forever (the default launcher has no health checks)."""

    from dagster import DagsterInstance

    project_yaml = Path(__file__).resolve().parents[2] / "dagster.yaml"
    shutil.copy(project_yaml, tmp_path / "dagster.yaml")
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert 0 < instance.run_monitoring_max_runtime_seconds <= 24 * 3600
        assert instance.run_monitoring_enabled
        assert instance.run_retries_enabled
        assert not instance.run_retries_retry_on_asset_or_op_failure


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("duckdb:///data/visibility.duckdb", "duckdb"),
        ("postgresql://loader:pw@db.internal:5432/analytics", "postgres"),
        ("postgres://db.internal/analytics", "postgres"),
        ("bigquery://my-project/visibility", "bigquery"),
    ],
)
def test_each_landed_table_shows_the_kind_of_the_configured_warehouse(url: str, kind: str) -> None:
    from pipelines.definitions import build_definitions
    from resources.warehouse.urls import WAREHOUSE_KINDS, warehouse_kind

    assert warehouse_kind(url) == kind
    definitions = build_definitions(load_settings({"VISIBILITY_WAREHOUSE": url}))
    specs = {spec.key.path[-1]: spec for spec in definitions.resolve_all_asset_specs()}
    for table in ALL_TABLES:  # the sync's tables and audit_reports
        expected = {kind} if table == "audit_reports" else {kind, "python"}  # the sync's steps are Python
        assert specs[table].kinds == expected
        assert {f"dagster/kind/{other}" for other in WAREHOUSE_KINDS - {kind}}.isdisjoint(specs[table].tags)


def test_an_unknown_warehouse_url_has_no_kind_and_names_the_setting() -> None:
    from resources.warehouse.contract import WarehouseConfigError
    from resources.warehouse.urls import warehouse_kind

    with pytest.raises(WarehouseConfigError, match="VISIBILITY_WAREHOUSE") as caught:
        warehouse_kind("mysql://user:secret@host/db")
    assert "secret" not in str(caught.value)
