"""The Dagster instance of a command run without ``DAGSTER_HOME``: Dagster's ephemeral one (in-memory
storages, thrown away at exit), with an event log that costs the command less per event.

Each event stored cost the command about 4 ms of CPU, and a sync of ten days over every engine
stores some 500 (one materialization per partition landed). Three differences from Dagster's
in-memory event log make that about half:

* a ranged run records one planned materialization per asset instead of one per partition. Dagster's
  own switch for that (``DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS``) stays off for recorded
  runs, since a failed run then does not mark its partitions failed in the UI (docs/OPERATIONS.md);
  nothing reads a thrown-away run's partitions;
* one SQLite connection, kept, instead of a new one (and its two ``PRAGMA``\\ s) for every statement;
  Dagster's lock already lets one thread at a time use the database;
* no look at the asset table's columns before every asset event: this database was created by this
  storage, with Dagster's current schema (Dagster checks for databases older than its columns).

Built as ``dagster._core.instance.factory.create_ephemeral_instance`` builds Dagster's (pinned
version: ``tests/pipelines/test_throwaway_instance.py`` fails if that changes).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as db
from dagster import DagsterInstance
from dagster._core.instance import InstanceType
from dagster._core.launcher.sync_in_memory_run_launcher import SyncInMemoryRunLauncher
from dagster._core.run_coordinator import DefaultRunCoordinator
from dagster._core.storage.event_log import InMemoryEventLogStorage
from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager
from dagster._core.storage.root import TemporaryLocalArtifactStorage
from dagster._core.storage.runs import InMemoryRunStorage
from sqlalchemy.engine import Connection
from sqlalchemy.pool import StaticPool


class ThrowawayEventLogStorage(InMemoryEventLogStorage):
    """Dagster's in-memory event log, with one planned event per asset of a ranged run, one kept
    connection, and no schema look-up per asset event."""

    def __init__(self) -> None:
        super().__init__()
        # the same in-memory database (the URL names it), through one connection that every thread
        # may use: ``_connect`` holds Dagster's lock while it is in use (``has_table``, called within
        # it, keeps Dagster's connection of its own)
        self._kept = db.create_engine(
            self._engine.url, poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
        with self._kept.connect() as conn:
            conn.exec_driver_sql("PRAGMA foreign_keys=ON;")

    @property
    def supports_partition_subset_in_asset_materialization_planned_events(self) -> bool:
        return True

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        with self._db_lock, self._kept.connect() as conn, conn.begin():
            yield conn

    def _has_asset_key_index_cols_on_connection(self, conn: Connection) -> bool:
        return True

    def dispose(self) -> None:
        super().dispose()
        self._kept.dispose()


def throwaway_instance() -> DagsterInstance:
    return DagsterInstance(
        instance_type=InstanceType.EPHEMERAL,
        local_artifact_storage=TemporaryLocalArtifactStorage(),
        run_storage=InMemoryRunStorage(),
        event_storage=ThrowawayEventLogStorage(),
        compute_log_manager=NoOpComputeLogManager(),
        run_coordinator=DefaultRunCoordinator(),
        run_launcher=SyncInMemoryRunLauncher(),
    )
