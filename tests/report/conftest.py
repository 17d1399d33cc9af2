"""One real sync shared by the report tests: the ``visibility_sync`` job, run in process against the
sandbox into a DuckDB file and recorded in a persistent Dagster instance (so the sensor sees its run)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, Definitions, build_sensor_context, instance_for_test

from pipelines.jobs import DEFAULT_EXECUTOR, SYNC_JOB, all_jobs
from pipelines.report_sensor import report_after_sync
from pipelines.resources import session_per_run
from pipelines.schedules import range_tags
from pipelines.syncs import all_assets
from resources.api.endpoints import ENGINES_WITH_ALL
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.resource import WarehouseResource
from sandbox.testing import SandboxHandle
from sync.progress import NO_PROGRESS
from tests.fixtures_sandbox import SANDBOX_TODAY

SCHEMA = "visibility"
SYNCED_DAYS = 6
LAST_DAY = SANDBOX_TODAY - dt.timedelta(days=1)
FIRST_DAY = LAST_DAY - dt.timedelta(days=SYNCED_DAYS - 1)
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass(frozen=True)
class Synced:
    db: Path
    instance: DagsterInstance
    sync_run_id: str
    #: the report sensor's cursor from a tick evaluated before the sync ran
    cursor_before_sync: str | None

    @property
    def warehouse(self) -> WarehouseResource:
        return WarehouseResource(url=f"duckdb:///{self.db}", schema_name=SCHEMA)

    def query(self, sql: str) -> list[tuple]:
        with duckdb.connect(str(self.db), read_only=True) as con:
            con.execute(f"SET schema = '{SCHEMA}'")
            return con.execute(sql).fetchall()


def sync_definitions_for(sandbox: SandboxHandle, db: Path) -> Definitions:
    """The syncs' assets and jobs against ``sandbox``, landing in the DuckDB file ``db``."""
    return Definitions(
        assets=all_assets,
        jobs=all_jobs,
        executor=DEFAULT_EXECUTOR,
        resources={
            "api": VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"]),
            "warehouse": WarehouseResource(url=f"duckdb:///{db}", schema_name=SCHEMA),
            "progress": NO_PROGRESS,
            "sync_session": session_per_run(),
        },
    )


@pytest.fixture(scope="package")
def synced(sandbox: SandboxHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synced]:
    root = tmp_path_factory.mktemp("report")
    db = root / "warehouse" / "visibility.duckdb"
    (root / "dagster").mkdir()
    with instance_for_test(temp_dir=str(root / "dagster")) as instance:
        before = report_after_sync.evaluate_tick(build_sensor_context(instance=instance))
        definitions = sync_definitions_for(sandbox, db)
        result = definitions.resolve_job_def(SYNC_JOB).execute_in_process(
            instance=instance, tags=range_tags(FIRST_DAY, LAST_DAY, ENGINES_WITH_ALL), run_config=QUIET
        )
        assert result.success
        yield Synced(db=db, instance=instance, sync_run_id=result.run_id, cursor_before_sync=before.cursor)
