"""``sync_now``: a window of days and engines from the launchpad, checked by its op, run by its sensor."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from dagster import (
    DagsterInstance,
    DagsterInvalidConfigError,
    DefaultSensorStatus,
    ExecuteInProcessResult,
    RunRequest,
    build_sensor_context,
    instance_for_test,
    validate_run_config,
)

from assets.partitions import DAILY_PARTITIONS, parse_partition_keys, requested_cells
from pipelines.definitions import build_definitions
from pipelines.jobs import DAILY_JOB, SYNC_JOB
from pipelines.schedules import sync_window
from pipelines.sync_now import SYNC_NOW_JOB, SYNC_NOW_SENSOR, SYNC_NOW_TAG
from resources.api.endpoints import ENGINES_WITH_ALL
from sandbox.testing import SandboxHandle
from settings import load_settings
from tests.doc_blocks import blocks
from tests.fixtures_sandbox import SANDBOX_TODAY
from tests.report.conftest import sync_definitions_for
from tests.sync.conftest import SCHEMA

SETTINGS = load_settings({"VISIBILITY_START_DATE": "2026-09-01", "VISIBILITY_LOOKBACK_DAYS": "2"})
DEFS = build_definitions(SETTINGS)
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


class Launchpad:
    """``sync_now`` runs in a real instance, and the sensor's ticks as the daemon evaluates them
    (reading the instance's run events from its cursor)."""

    def __init__(self, instance: DagsterInstance) -> None:
        self.instance = instance
        self.sensor = DEFS.resolve_sensor_def(SYNC_NOW_SENSOR)
        self.cursor: str | None = None
        self.tick()  # the first tick starts the cursor (before any run, as a running sensor's would)

    def sync_now(self, **config: Any) -> ExecuteInProcessResult:
        return self.launch(config)

    def launch(self, run_config: dict[str, Any]) -> ExecuteInProcessResult:
        return DEFS.resolve_job_def(SYNC_NOW_JOB).execute_in_process(
            instance=self.instance, run_config=run_config, raise_on_error=False
        )

    def tick(self) -> list[RunRequest]:
        context = build_sensor_context(
            instance=self.instance, repository_def=DEFS.get_repository_def(), cursor=self.cursor
        )
        result = self.sensor.evaluate_tick(context)
        self.cursor = result.cursor
        return list(result.run_requests or [])

    def requested(self) -> list[RunRequest]:
        """What the next tick asks for; the tick after it asks for nothing more."""
        requests = self.tick()
        assert self.tick() == []
        return requests


@pytest.fixture
def launchpad(tmp_path: Path) -> Iterator[Launchpad]:
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        yield Launchpad(instance)


def cells(request: RunRequest) -> set[tuple[dt.date, str]]:
    """The date x engine cells a requested run's tags select, as the sync step reads them."""
    return requested_cells(request.tags, DAILY_PARTITIONS)


def test_sync_now_and_its_sensor_are_in_the_code_location_and_the_sensor_runs_by_default() -> None:
    sensor = DEFS.resolve_sensor_def(SYNC_NOW_SENSOR)
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    assert {job.name for job in sensor.jobs} == {SYNC_JOB, DAILY_JOB}
    assert DEFS.resolve_job_def(SYNC_NOW_JOB).partitions_def is None


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"engines": []}, "engines (none) unknown"),
        ({"end_date": "2026-13-01"}, "end_date must be a date"),
        ({"end_date": "2999-01-01"}, "end_date 2999-01-01 is after yesterday"),
        ({"end_date": "2026-08-01"}, "end_date 2026-08-01 is before the first partition"),
        ({"days": 0}, "days must be from 1 to 366, got 0"),
        ({"days": 367}, "days must be from 1 to 366, got 367"),
    ],
)
def test_a_bad_window_is_refused_at_launch_with_its_field_on_the_first_line_and_no_run_is_created(
    launchpad: Launchpad, config: dict[str, Any], field: str
) -> None:
    with pytest.raises(DagsterInvalidConfigError) as refused:  # the launch's check, in the code location
        validate_run_config(DEFS.resolve_job_def(SYNC_NOW_JOB), config)
    assert str(refused.value).splitlines()[0].startswith(f"sync_now {field}")

    with pytest.raises(DagsterInvalidConfigError, match=f"^sync_now {re.escape(field)}"):
        launchpad.sync_now(**config)
    assert launchpad.instance.get_runs() == []  # no run was created, so no step ran
    assert launchpad.tick() == []


def test_an_unknown_engine_is_refused_before_launch_naming_the_field_and_the_value(
    launchpad: Launchpad,
) -> None:
    run_config = {"engines": ["chatgpt", "chatgtp"]}
    job = DEFS.resolve_job_def(SYNC_NOW_JOB)

    with pytest.raises(DagsterInvalidConfigError) as refused:  # the launchpad's own validation
        validate_run_config(job, run_config)
    assert "root:engines[1] not in enum type Engine got chatgtp" in str(refused.value)
    with pytest.raises(DagsterInvalidConfigError):
        launchpad.launch(run_config)
    assert launchpad.instance.get_runs() == []  # no run was created, so no step ran


def test_the_default_window_is_the_schedules_every_engine_in_one_sync_run(launchpad: Launchpad) -> None:
    result = launchpad.sync_now()
    assert result.success

    [request] = launchpad.requested()
    today = dt.datetime.now(dt.UTC).date()
    first, last = sync_window(today, SETTINGS.lookback_days, SETTINGS.start_date) or (None, None)
    assert request.job_name == SYNC_JOB
    assert request.tags[SYNC_NOW_TAG] == result.run_id
    assert cells(request) == {
        (first + dt.timedelta(days=d), engine) for d in range(3) for engine in ENGINES_WITH_ALL
    }
    assert last == first + dt.timedelta(days=2)


def test_a_split_engine_subset_asks_for_one_run_per_span_selecting_exactly_the_windows_cells(
    launchpad: Launchpad,
) -> None:
    result = launchpad.sync_now(days=2, end_date="2026-10-20", engines=["claude", "chatgpt", "all"])
    assert result.success

    requests = launchpad.requested()
    assert [r.job_name for r in requests] == [SYNC_JOB, DAILY_JOB]
    assert cells(requests[0]) == {(dt.date(2026, 10, d), e) for d in (19, 20) for e in ("chatgpt", "claude")}
    assert cells(requests[1]) == {(dt.date(2026, 10, d), "all") for d in (19, 20)}
    assert len({r.run_key for r in requests}) == 2


def test_the_documented_launchpad_config_asks_for_its_window(launchpad: Launchpad) -> None:
    [block] = [b for b in blocks("docs/OPERATIONS.md") if b.language == "yaml" and "engines:" in b.text]
    documented = yaml.safe_load(block.text)
    assert launchpad.launch(documented).success

    requests = launchpad.requested()
    assert [r.job_name for r in requests] == [SYNC_JOB, DAILY_JOB]
    days = {dt.date(2026, 11, 20) - dt.timedelta(days=d) for d in range(7)}
    assert cells(requests[0]) | cells(requests[1]) == {
        (day, e) for day in days for e in ("chatgpt", "claude", "all")
    }


def test_the_requested_runs_land_exactly_the_windows_cells(
    sandbox: SandboxHandle, tmp_path: Path, launchpad: Launchpad
) -> None:
    end = SANDBOX_TODAY - dt.timedelta(days=2)
    result = launchpad.sync_now(days=2, end_date=end.isoformat(), engines=["gemini", "all"])
    assert result.success
    db = tmp_path / "w.duckdb"
    definitions = sync_definitions_for(sandbox, db)

    materialized: set[tuple[dt.date, str]] = set()
    for request in launchpad.requested():
        run = definitions.resolve_job_def(request.job_name).execute_in_process(
            instance=launchpad.instance, tags=request.tags, run_config=QUIET
        )
        assert run.success
        keys = [
            e.partition for e in run.get_asset_materialization_events() if e.asset_key.path == ["answers"]
        ]
        materialized |= parse_partition_keys([k for k in keys if k is not None])

    window = {(end - dt.timedelta(days=d), e) for d in (0, 1) for e in ("gemini", "all")}
    assert materialized == window
    with duckdb.connect(str(db), read_only=True) as con:
        landed = set(con.execute(f"SELECT DISTINCT checked_on, engine FROM {SCHEMA}.answers").fetchall())
    assert landed and landed <= window
