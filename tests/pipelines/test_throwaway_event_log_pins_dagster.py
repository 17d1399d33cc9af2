"""The throwaway event log stands in for private Dagster code (``pipelines/throwaway_instance.py``):
these tests fail when that code changes, so that an upgrade of Dagster re-reads it first."""

import hashlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from dagster import DagsterEventType, DagsterInstance
from dagster._core.events.log import EventLogEntry
from dagster._core.instance.factory import create_ephemeral_instance
from dagster._core.storage.event_log import InMemoryEventLogStorage
from dagster._core.storage.event_log.base import EventLogRecord
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
from dagster._serdes import serialize_value

from pipelines.throwaway_instance import ThrowawayEventLogStorage, event_record_json
from tests.pipelines.ranged_materializations import run_ranged

#: The first 16 hex digits of the SHA-256 of each one's source, as of Dagster 1.13.27.
PINNED: dict[Callable[..., Any], str] = {
    # what ``_OneSerializationStore.store_event`` writes the rows of, in one transaction
    SqlEventLogStorage.store_event: "391ced414e9bfecb",
    SqlEventLogStorage._event_to_row: "93d47fbe7edc4f70",
    SqlEventLogStorage._store_asset_event: "fdb9340b9eef1c9b",  # insert, else update: the upsert
    SqlEventLogStorage._get_asset_entry_values: "bb3b9df2c6c371fe",
    SqlEventLogStorage._store_asset_event_tags: "85d6f17ef04b926f",
    SqlEventLogStorage._tags_for_asset_event: "c5c3936a8de86826",
    SqlEventLogStorage._event_insert_timestamp: "02e6947ee3f9408a",
    SqlEventLogStorage.index_transaction: "00b2488c8cdfd277",
    SqlEventLogStorage._has_asset_key_index_cols_on_connection: "8d359e6b6224b3fd",
    # the in-memory log it extends: its database, lock, connections and watchers
    InMemoryEventLogStorage.__init__: "5bae82ffabd6e363",
    InMemoryEventLogStorage.store_event: "2f5abb45025a9bdd",  # calls ours (super), then the watchers
    InMemoryEventLogStorage._connect: "10880a7df64f40c5",
    InMemoryEventLogStorage.has_table: "70e9d2dc8169c40b",
    InMemoryEventLogStorage.dispose: "d329af23b7440be5",
    # the ephemeral instance ``throwaway_instance`` is built as
    create_ephemeral_instance: "c088e32a905e0c0b",
}


def _digest(function: Callable[..., Any]) -> str:
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]


@pytest.mark.parametrize("function", list(PINNED), ids=lambda f: f.__qualname__)
def test_the_dagster_code_the_throwaway_event_log_stands_in_for_is_unchanged(
    function: Callable[..., Any],
) -> None:
    assert _digest(function) == PINNED[function], (
        f"Dagster changed {function.__qualname__}: check pipelines/throwaway_instance.py against it, "
        "then pin the new digest"
    )


@pytest.fixture(scope="module")
def asset_events() -> list[EventLogEntry]:
    """A ranged run's materializations (column schema on some, not on others) and planned events."""
    with DagsterInstance.ephemeral() as instance:
        result = run_ranged(instance, 2)
        assert result.success
        return [
            e for e in instance.all_logs(result.run_id) if e.is_dagster_event and e.dagster_event.asset_key
        ]


def test_a_materializations_record_is_serialized_as_its_event_nested(
    asset_events: list[EventLogEntry],
) -> None:
    materializations = [
        e for e in asset_events if e.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION
    ]
    assert len({len(serialize_value(e)) for e in materializations}) > 1  # with and without the schema
    for storage_id, event in enumerate(materializations, start=1):
        record = EventLogRecord(storage_id=storage_id, event_log_entry=event)
        assert event_record_json(serialize_value(event), storage_id) == serialize_value(record)


def test_an_asset_events_asset_row_is_dagsters(asset_events: list[EventLogEntry]) -> None:
    storage = ThrowawayEventLogStorage()
    kinds = set()
    for storage_id, event in enumerate(asset_events, start=1):
        kinds.add(event.dagster_event_type)
        ours = storage._asset_entry_values(event, storage_id, serialize_value(event))
        assert ours == storage._get_asset_entry_values(event, storage_id, True)
    storage.dispose()
    assert kinds == {DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_MATERIALIZATION_PLANNED}
