"""The Dagster instance of a command run without ``DAGSTER_HOME``: Dagster's ephemeral one (in-memory
storages, thrown away at exit), with an event log that costs the command less per event.

Each materialization stored cost the command 3-4 ms of CPU in Dagster's in-memory event log, and a
sync stores one per partition landed (1,200 for 30 days of five daily tables over eight engines).
What this one does differently, each change writing the same rows as Dagster's (the tests compare
both databases after the same events):

* a ranged run records one planned materialization per asset instead of one per partition. Dagster's
  own switch for that (``DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS``) stays off for recorded
  runs, since a failed run then does not mark its partitions failed in the UI (docs/OPERATIONS.md);
  nothing reads a thrown-away run's partitions;
* one SQLite connection, kept, instead of a new one (and its two ``PRAGMA``\\ s) for every statement;
  Dagster's lock already lets one thread at a time use the database;
* an event is serialized once: the asset table's last materialization (an ``EventLogRecord`` of
  the event) embeds the event's JSON as stored in the event log instead of serializing it again
  (JSON with sorted keys is the same text, nested or not). Serializing was half of each event's CPU;
* an event's rows (the event, an asset's indexed tags and its row) go in through SQLite's own
  driver, with statements SQLAlchemy compiled once and its own converters of the values, in one
  transaction under Dagster's lock: building, compiling and executing a SQLAlchemy statement for
  each row, in a connection opened for each, was most of the other half;
* no look at the asset table's columns, nor for the tag table, before every asset event: this
  database was created by this storage, with Dagster's current schema (Dagster checks for databases
  older than its columns).

Measured (issue 21, one process, alternated): a 30-day ranged run of five tables shaped like the
sync step's (``tests/pipelines/ranged_materializations.py``) spent 2.8 s of CPU storing its events
with the first two changes alone, 0.7 s with all (0.6 ms per materialization stored).

Built as ``dagster._core.instance.factory.create_ephemeral_instance`` builds Dagster's; the Dagster
code it stands in for is pinned (``tests/pipelines/test_throwaway_event_log_pins_dagster.py`` fails
if any of it changes).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as db
from dagster import DagsterInstance
from dagster import _check as check
from dagster._core.events import ASSET_CHECK_EVENTS, ASSET_EVENTS
from dagster._core.events.log import EventLogEntry
from dagster._core.instance import InstanceType
from dagster._core.launcher.sync_in_memory_run_launcher import SyncInMemoryRunLauncher
from dagster._core.run_coordinator import DefaultRunCoordinator
from dagster._core.storage.event_log import InMemoryEventLogStorage
from dagster._core.storage.event_log.schema import AssetEventTagsTable, AssetKeyTable, SqlEventLogStorageTable
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager
from dagster._core.storage.root import TemporaryLocalArtifactStorage
from dagster._core.storage.runs import InMemoryRunStorage
from dagster._time import datetime_from_timestamp
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.pool import StaticPool

#: The columns of an event's row, as ``SqlEventLogStorage._event_to_row`` names them.
EVENT_COLUMNS = ("run_id", "event", "dagster_event_type", "timestamp", "step_key", "asset_key", "partition")
TAG_COLUMNS = ("event_id", "asset_key", "key", "value", "event_timestamp")


def event_record_json(event_json: str, storage_id: int) -> str:
    """``serialize_value(EventLogRecord(storage_id, event))`` from ``serialize_value(event)``.

    Dagster's serializer writes sorted keys with the default separators, so a record's text is its
    fields' texts in key order, the event's included as it was serialized on its own.
    """
    return f'{{"__class__": "EventLogRecord", "event_log_entry": {event_json}, "storage_id": {storage_id}}}'


@dataclass(frozen=True)
class CompiledWrite:
    """A statement as SQLAlchemy compiles it for SQLite, and its converters of the values it binds
    (a timestamp becomes SQLAlchemy's text of it), to run through the driver itself."""

    sql: str
    converters: tuple[Callable[[Any], Any] | None, ...]

    @classmethod
    def of(cls, statement: Any, table: db.Table, columns: Sequence[str], dialect: Dialect) -> CompiledWrite:
        compiled = statement.compile(dialect=dialect, column_keys=list(columns))
        if list(compiled.positiontup or ()) != list(columns):
            raise RuntimeError(f"unexpected parameter order in {compiled}: {compiled.positiontup}")
        return cls(
            str(compiled),
            tuple(table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in columns),
        )

    def parameters(self, values: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(
            value if convert is None or value is None else convert(value)
            for convert, value in zip(self.converters, values, strict=True)
        )


class _OneSerializationStore(SqlEventLogStorage):
    """``SqlEventLogStorage.store_event`` writing the same rows for less CPU (module docstring).

    Follows :class:`InMemoryEventLogStorage` in :class:`ThrowawayEventLogStorage`'s method order:
    the in-memory storage's ``store_event`` (which then notifies the run's watchers) calls this one.
    """

    _kept: db.Engine
    _compiled: dict[tuple[str, ...], CompiledWrite]
    #: the storage's lock and a transaction on its connection, as SQLite's driver has it
    _raw_transaction: Callable[[], AbstractContextManager[sqlite3.Cursor]]

    def _compile_writes(self, dialect: Dialect) -> None:
        self._compiled = {
            EVENT_COLUMNS: CompiledWrite.of(
                SqlEventLogStorageTable.insert(), SqlEventLogStorageTable, EVENT_COLUMNS, dialect
            ),
            TAG_COLUMNS: CompiledWrite.of(
                AssetEventTagsTable.insert(), AssetEventTagsTable, TAG_COLUMNS, dialect
            ),
        }

    def _asset_upsert(self, columns: tuple[str, ...]) -> CompiledWrite:
        """The asset row's insert, or update of the columns given when the asset has one: Dagster
        tries the insert, and updates on the unique key's violation."""
        found = self._compiled.get(columns)
        if found is None:
            insert = sqlite.insert(AssetKeyTable)
            upsert = insert.on_conflict_do_update(
                index_elements=[AssetKeyTable.c.asset_key],
                set_={name: insert.excluded[name] for name in columns if name != "asset_key"},
            )
            found = self._compiled[columns] = CompiledWrite.of(
                upsert, AssetKeyTable, columns, self._kept.dialect
            )
        return found

    def store_event(self, event: EventLogEntry) -> None:
        check.inst_param(event, "event", EventLogEntry)
        row = self._event_to_row(event)  # the only serialization of the event
        dagster_event = event.dagster_event
        with self._raw_transaction() as cursor:
            written = self._compiled[EVENT_COLUMNS]
            cursor.execute(written.sql, written.parameters([row[name] for name in EVENT_COLUMNS]))
            event_id = check.not_none(cursor.lastrowid)
            if (
                dagster_event is not None
                and dagster_event.event_type in ASSET_EVENTS
                and dagster_event.asset_key
            ):
                self._write_asset_rows(cursor, event, event_id, row)
        if dagster_event is not None and dagster_event.event_type in ASSET_CHECK_EVENTS:
            self.store_asset_check_event(event, event_id)

    def _write_asset_rows(
        self, cursor: sqlite3.Cursor, event: EventLogEntry, event_id: int, row: Mapping[str, Any]
    ) -> None:
        """What ``_store_asset_event_tags`` and ``_store_asset_event`` write."""
        asset_key = row["asset_key"]
        tags = self._tags_for_asset_event(event)
        if tags:
            written = self._compiled[TAG_COLUMNS]
            timestamp = self._event_insert_timestamp(event)
            cursor.executemany(
                written.sql,
                [
                    written.parameters((event_id, asset_key, key, value, timestamp))
                    for key, value in tags.items()
                ],
            )
        values = self._asset_entry_values(event, event_id, row["event"])
        if values:
            columns = ("asset_key", *values)
            upsert = self._asset_upsert(columns)
            cursor.execute(upsert.sql, upsert.parameters((asset_key, *values.values())))

    def _asset_entry_values(self, event: EventLogEntry, event_id: int, event_json: str) -> dict[str, Any]:
        """``_get_asset_entry_values``, the materialization's record built from the event's JSON."""
        if check.not_none(event.dagster_event).is_step_materialization:
            return {
                "last_materialization": event_record_json(event_json, event_id),
                "last_run_id": event.run_id,
                "last_materialization_timestamp": datetime_from_timestamp(event.timestamp),
            }
        return self._get_asset_entry_values(event, event_id, True)  # serializes nothing for the others


class ThrowawayEventLogStorage(InMemoryEventLogStorage, _OneSerializationStore):
    """Dagster's in-memory event log, with one planned event per asset of a ranged run, one kept
    connection, one serialization per event, and no schema look-up per asset event."""

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
        # that connection as SQLite's driver has it, checked out for good: what an event writes
        self._driver = self._kept.raw_connection()
        self._compile_writes(self._kept.dialect)

    @property
    def supports_partition_subset_in_asset_materialization_planned_events(self) -> bool:
        return True

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        with self._db_lock, self._kept.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _raw_transaction(self) -> Iterator[sqlite3.Cursor]:
        """``_connect``'s lock and transaction, without a SQLAlchemy connection opened per event."""
        with self._db_lock:
            driver = self._driver.driver_connection
            try:
                yield driver.cursor()
            except BaseException:
                driver.rollback()
                raise
            driver.commit()

    def _has_asset_key_index_cols_on_connection(self, conn: Connection) -> bool:
        return True

    def dispose(self) -> None:
        super().dispose()
        self._driver.close()
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
