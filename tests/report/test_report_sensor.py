"""The report sensor for real: runs of any job that landed daily tables refresh the report; the runs
of a backfill refresh it once, after the backfill has ended."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import (
    DagsterInstance,
    Definitions,
    SensorResult,
    build_sensor_context,
    instance_for_test,
)

# no public API records a backfill and sets its status (only the GraphQL launch, which also runs it),
# nor says which statuses are terminal (assets/dagster_tags.py keeps its own set of their values)
from dagster._core.execution.backfill import (
    BULK_ACTION_TERMINAL_STATUSES,
    BulkActionStatus,
    PartitionBackfill,
)

from assets.dagster_tags import BACKFILL_ENDED_STATUSES, BACKFILL_ID_TAG
from pipelines.definitions import defs
from pipelines.jobs import DAILY_JOB, SNAPSHOT_JOB
from pipelines.report_sensor import SENSOR_NAME, report_after_sync
from pipelines.schedules import range_tags
from sandbox.testing import SandboxHandle
from tests.fixtures_sandbox import SANDBOX_TODAY
from tests.report.conftest import sync_definitions_for

DAY = SANDBOX_TODAY - dt.timedelta(days=2)
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


class Runs:
    def __init__(self, instance: DagsterInstance, definitions: Definitions) -> None:
        self.instance, self.definitions = instance, definitions

    def run(self, job: str, tags: dict[str, str]) -> str:
        result = self.definitions.resolve_job_def(job).execute_in_process(
            instance=self.instance, tags=tags, run_config=QUIET
        )
        assert result.success
        return result.run_id

    def tick(self, cursor: str | None) -> SensorResult:
        evaluated = report_after_sync.evaluate_tick(
            build_sensor_context(instance=self.instance, cursor=cursor)
        )
        return evaluated


@pytest.fixture
def runs(sandbox: SandboxHandle, tmp_path: Path) -> Iterator[Runs]:
    (tmp_path / "dagster").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        definitions = sync_definitions_for(sandbox, tmp_path / "w.duckdb")
        yield Runs(instance, definitions)


def test_the_sensor_waits_for_the_statuses_dagster_calls_terminal_by_their_public_values() -> None:
    assert {status.value for status in BULK_ACTION_TERMINAL_STATUSES} == BACKFILL_ENDED_STATUSES
    assert {status.value for status in BulkActionStatus} > BACKFILL_ENDED_STATUSES


def test_the_report_sensor_is_in_the_code_location_and_running_by_default() -> None:
    sensor = defs.resolve_sensor_def(SENSOR_NAME)
    assert sensor is report_after_sync
    assert sensor.job_name == "visibility_report"


def test_any_job_that_landed_daily_tables_refreshes_the_report_and_a_snapshot_run_does_not(
    runs: Runs,
) -> None:
    start = runs.tick(None).cursor  # the first tick watches from now on
    daily = runs.run(DAILY_JOB, range_tags(DAY, DAY, ("chatgpt", "claude")))
    runs.run(SNAPSHOT_JOB, {})

    tick = runs.tick(start)

    assert [r.run_key for r in tick.run_requests or []] == [f"after-{daily}"]
    assert not (runs.tick(tick.cursor).run_requests or [])


def test_the_runs_of_a_backfill_refresh_the_report_once_after_its_end(runs: Runs) -> None:
    start = runs.tick(None).cursor
    backfill = PartitionBackfill(
        backfill_id="bf1",
        status=BulkActionStatus.REQUESTED,
        from_failure=False,
        tags={},
        backfill_timestamp=time.time(),
    )
    runs.instance.add_backfill(backfill)
    for engine in ("chatgpt", "claude"):
        runs.run(DAILY_JOB, {**range_tags(DAY, DAY, (engine,)), BACKFILL_ID_TAG: "bf1"})

    waiting = runs.tick(start)
    assert not (waiting.run_requests or [])
    assert "bf1" in str(waiting.cursor)

    runs.instance.update_backfill(backfill.with_status(BulkActionStatus.COMPLETED_SUCCESS))
    ended = runs.tick(waiting.cursor)
    assert [r.run_key for r in ended.run_requests or []] == ["after-backfill-bf1"]
    assert not (runs.tick(ended.cursor).run_requests or [])
