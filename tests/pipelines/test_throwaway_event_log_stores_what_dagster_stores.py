"""The throwaway event log writes, for the same events, the same rows as Dagster's in-memory one, so
every read answers the same: the events of real runs (a ranged run shaped like the sync step's, on
Dagster's ephemeral instance and on the throwaway one, and a run with a data version and an
observation) are stored in both, then their tables and Dagster's reads are compared."""

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import sqlalchemy as db
from dagster import (
    AssetCheckKey,
    AssetExecutionContext,
    AssetKey,
    AssetObservation,
    DagsterEventType,
    DagsterInstance,
    DataVersion,
    MaterializeResult,
    MultiPartitionKey,
    asset,
    materialize,
)
from dagster._check import not_none as check_not_none
from dagster._core.event_api import AssetRecordsFilter, EventRecordsFilter
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import InMemoryEventLogStorage
from dagster._core.storage.event_log.base import EventLogCursor
from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

from assets.partitions import partition_key
from pipelines.throwaway_instance import ThrowawayEventLogStorage, throwaway_instance
from tests.pipelines.ranged_materializations import FIRST_DAY, PARTITIONS, TABLES, run_ranged

#: Set by the database itself when a row is written: the second it was stored.
WRITE_TIME_COLUMNS = {"create_timestamp", "update_timestamp"}


@asset(partitions_def=PARTITIONS)
def versioned(context: AssetExecutionContext) -> MaterializeResult:
    context.log_event(
        AssetObservation(asset_key="versioned", partition=context.partition_key, metadata={"seen": 1})
    )
    return MaterializeResult(data_version=DataVersion("v1"), metadata={"rows_landed": 3})


def _run_events(instance: DagsterInstance, run_id: str) -> list[EventLogEntry]:
    return list(instance.all_logs(run_id))


@pytest.fixture(scope="module")
def events() -> list[EventLogEntry]:
    """A ranged run on Dagster's instance (one planned event per partition) and on the throwaway one
    (one per asset), a failed check in each, and a run with tags to index and an observation."""
    stored: list[EventLogEntry] = []
    for make in (DagsterInstance.ephemeral, throwaway_instance):
        with make() as instance:
            result = run_ranged(instance, 3)
            assert result.success
            stored += _run_events(instance, result.run_id)
    with DagsterInstance.ephemeral() as instance:
        key = MultiPartitionKey({"date": FIRST_DAY.isoformat(), "engine": "chatgpt"})
        result = materialize([versioned], instance=instance, partition_key=key)
        assert result.success
        stored += _run_events(instance, result.run_id)
    return stored


@pytest.fixture
def both(events: list[EventLogEntry]) -> Iterator[tuple[SqlEventLogStorage, SqlEventLogStorage]]:
    dagsters, ours = InMemoryEventLogStorage(), ThrowawayEventLogStorage()
    for event in events:
        dagsters.store_event(event)
        ours.store_event(event)
    yield dagsters, ours
    dagsters.dispose()
    ours.dispose()


def _rows(storage: SqlEventLogStorage) -> dict[str, list[tuple[Any, ...]]]:
    tables: dict[str, list[tuple[Any, ...]]] = {}
    with storage.index_connection() as conn:
        for table in SqlEventLogStorageMetadata.sorted_tables:
            columns = [c for c in table.columns if c.name not in WRITE_TIME_COLUMNS]
            query = db.select(*columns).order_by(table.c.id)
            tables[table.name] = [tuple(row) for row in conn.execute(query)]
    return tables


def test_the_same_events_leave_the_same_rows_in_every_table(
    events: list[EventLogEntry], both: tuple[SqlEventLogStorage, SqlEventLogStorage]
) -> None:
    dagsters, ours = _rows(both[0]), _rows(both[1])

    assert ours == dagsters
    kinds = {e.dagster_event_type for e in events}
    assert {DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_OBSERVATION} <= kinds
    assert len(dagsters["event_logs"]) == len(events)
    assert len(dagsters["asset_keys"]) == len(TABLES) + 1
    assert dagsters["asset_event_tags"], "no tags indexed: the tag rows were not compared"
    assert len(dagsters["asset_check_executions"]) == 2 * len(TABLES)


def _reads(storage: SqlEventLogStorage, run_ids: Sequence[str]) -> dict[str, Any]:
    """What Dagster and our code read of an event log during and after a run."""
    keys = [AssetKey(t) for t in TABLES] + [AssetKey("versioned")]
    one = keys[0]
    check_keys = [AssetCheckKey(AssetKey(t), "keys_unique") for t in TABLES]
    first = str(partition_key(FIRST_DAY, "chatgpt"))
    reads: dict[str, Any] = {
        "latest_materializations": storage.get_latest_materialization_events(keys),
        "asset_records": storage.get_asset_records(),
        "asset_keys": storage.get_asset_keys(),
        "check_history": [storage.get_asset_check_execution_history(k, limit=10) for k in check_keys],
        "latest_checks": storage.get_latest_asset_check_execution_by_key(check_keys),
        "check_summaries": storage.get_asset_check_summary_records(check_keys),
        "tags": storage.get_event_tags_for_asset(AssetKey("versioned")),
        "data_versions": storage.get_latest_tags_by_partition(
            AssetKey("versioned"), DagsterEventType.ASSET_MATERIALIZATION, ["dagster/data_version"]
        ),
        "planned": storage.get_latest_planned_materialization_info(one),
        "planned_partition": storage.get_latest_planned_materialization_info(one, first),
        "observations": storage.fetch_observations(AssetKey("versioned"), limit=10),
        "of_type": storage.get_event_records(
            EventRecordsFilter(DagsterEventType.ASSET_CHECK_EVALUATION), limit=100
        ),
    }
    for key in keys:
        name = key.to_user_string()
        reads[f"{name} partitions"] = storage.get_materialized_partitions(key)
        reads[f"{name} latest ids"] = storage.get_latest_storage_id_by_partition(
            key, DagsterEventType.ASSET_MATERIALIZATION
        )
        reads[f"{name} materializations"] = storage.fetch_materializations(key, limit=1000)
        reads[f"{name} one partition"] = storage.fetch_materializations(
            AssetRecordsFilter(asset_key=key, asset_partitions=[first]), limit=10
        )
    for run_id in run_ids:
        reads[f"{run_id} logs"] = storage.get_logs_for_run(run_id)
        reads[f"{run_id} records"] = storage.get_records_for_run(run_id)
        reads[f"{run_id} stats"] = storage.get_stats_for_run(run_id)
        reads[f"{run_id} step stats"] = storage.get_step_stats_for_run(run_id)
    return reads


def test_every_read_answers_the_same_as_dagsters(
    events: list[EventLogEntry], both: tuple[SqlEventLogStorage, SqlEventLogStorage]
) -> None:
    run_ids = list(dict.fromkeys(e.run_id for e in events))
    dagsters, ours = _reads(both[0], run_ids), _reads(both[1], run_ids)

    assert ours.keys() == dagsters.keys()
    for name, answer in dagsters.items():
        assert ours[name] == answer, name
    latest = ours["latest_materializations"][AssetKey(TABLES[0])]
    assert latest is not None and latest.asset_materialization is not None
    assert latest.asset_materialization.metadata["rows_landed"].value > 0
    assert len(ours[f"{TABLES[0]} partitions"]) == 3 * 8
    assert {r.status.value for h in ours["check_history"] for r in h} == {"SUCCEEDED", "FAILED"}


def test_a_watcher_gets_each_event_with_the_cursor_of_dagsters(events: list[EventLogEntry]) -> None:
    """The in-memory log tells a run's watchers of each event as it is stored (the run's progress)."""
    heard: dict[str, list[tuple[int, str]]] = {}
    for name, storage in (("dagster", InMemoryEventLogStorage()), ("ours", ThrowawayEventLogStorage())):
        heard[name] = []
        run_id = events[0].run_id
        storage.watch(
            run_id,
            None,
            lambda event, cursor, seen=heard[name]: seen.append(
                (EventLogCursor.parse(cursor).storage_id(), event.message)
            ),
        )
        for event in events:
            storage.store_event(event)
        storage.dispose()

    assert heard["ours"] == heard["dagster"]
    assert len(heard["ours"]) == sum(e.run_id == events[0].run_id for e in events)


def test_events_stored_from_many_threads_are_all_indexed(events: list[EventLogEntry]) -> None:
    """One kept connection, used by threads in turn: no event's rows are lost or mixed up."""
    materializations = [e for e in events if e.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION]
    storage = ThrowawayEventLogStorage()
    threads = [
        threading.Thread(target=lambda part=materializations[n::4]: [storage.store_event(e) for e in part])
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    by_key: dict[AssetKey, set[str]] = {}
    for event in materializations:
        dagster_event = event.get_dagster_event()
        by_key.setdefault(check_not_none(dagster_event.asset_key), set()).add(
            check_not_none(dagster_event.partition)
        )
    assert len(by_key) == len(TABLES) + 1  # and "versioned"
    for key, expected in by_key.items():
        assert storage.get_materialized_partitions(key) == expected
        records = storage.fetch_materializations(key, limit=1000).records
        latest = storage.get_latest_materialization_events([key])[key]
        assert latest == records[0].event_log_entry
    storage.dispose()


def _what_a_run_reads_back(instance: DagsterInstance) -> dict[str, Any]:
    """A ranged run's result and what the instance answers after it, less what differs from run to
    run (ids, times) and the planned events (one per asset on the throwaway instance, by design)."""
    result = run_ranged(instance, 4)
    planned = {
        DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
        DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED,
    }
    materializations = [
        (str(m.asset_key), m.partition, {k: v.value for k, v in m.metadata.items()})
        for m in result.asset_materializations_for_node("ranged_tables")
    ]
    checks = [(str(c.asset_key), c.check_name, c.passed) for c in result.get_asset_check_evaluations()]
    keys = [AssetKey(t) for t in TABLES]
    latest = instance.get_latest_materialization_events(keys)
    check_keys = [AssetCheckKey(k, "keys_unique") for k in keys]
    stats = instance.get_run_stats(result.run_id)
    return {
        "success": result.success,
        "node events": [
            e.event_type for e in result.events_for_node("ranged_tables") if e.event_type not in planned
        ],
        "materializations": materializations,
        "checks": checks,
        "partitions": {k: instance.get_materialized_partitions(k) for k in keys},
        "latest": {
            k: (e.dagster_event.partition, e.asset_materialization.metadata)  # type: ignore[union-attr]
            for k, e in latest.items()
            if e is not None
        },
        "fetched": {
            k: [r.partition_key for r in instance.fetch_materializations(k, limit=1000).records] for k in keys
        },
        "check executions": {
            k: [
                (r.status, r.partition)
                for r in instance.event_log_storage.get_asset_check_execution_history(k, 5)
            ]
            for k in check_keys
        },
        "stats": (stats.steps_succeeded, stats.steps_failed, stats.materializations),
    }


def test_a_run_on_the_throwaway_instance_reads_back_as_on_dagsters() -> None:
    with DagsterInstance.ephemeral() as instance:
        dagsters = _what_a_run_reads_back(instance)
    with throwaway_instance() as instance:
        ours = _what_a_run_reads_back(instance)

    assert ours == dagsters
    assert ours["success"] and len(ours["materializations"]) == 4 * 8 * len(TABLES)
    assert ours["stats"] == (1, 0, 4 * 8 * len(TABLES))
