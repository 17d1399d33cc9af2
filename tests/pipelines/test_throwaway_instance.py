"""``visibility-sync run`` without ``DAGSTER_HOME`` runs in Dagster's ephemeral instance, recording one
planned materialization per asset of its ranged run instead of one per partition; every landed
partition still gets its materialization."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterEventType

from pipelines import cli
from pipelines.throwaway_instance import ThrowawayEventLogStorage
from resources.api.endpoints import ENGINES_WITH_ALL
from settings import load_settings
from sync.catalog import DAILY, SNAPSHOTS
from tests.pipelines.test_cli import env  # noqa: F401  (the fixture)

START, END = dt.date(2026, 10, 29), dt.date(2026, 10, 31)  # two days, every engine: one run


def test_a_thrown_away_run_plans_each_asset_once_and_records_every_landed_partition(
    env: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stored: Counter[tuple[str, str]] = Counter()
    store = ThrowawayEventLogStorage.store_event

    def counting(self: ThrowawayEventLogStorage, event: Any) -> None:
        if event.is_dagster_event and event.dagster_event.asset_key is not None:
            stored[
                (event.dagster_event.event_type_value, event.dagster_event.asset_key.to_user_string())
            ] += 1
        store(self, event)

    monkeypatch.setattr(ThrowawayEventLogStorage, "store_event", counting)

    summary = cli.sync(load_settings(), START, END, ENGINES_WITH_ALL, show_progress=False)

    assert not summary.failures
    cells = (END - START).days * len(ENGINES_WITH_ALL)
    for table in DAILY:
        name = table.spec.name
        assert stored[(DagsterEventType.ASSET_MATERIALIZATION_PLANNED.value, name)] == 1
        assert stored[(DagsterEventType.ASSET_MATERIALIZATION.value, name)] == cells
    for snapshot in SNAPSHOTS:
        assert stored[(DagsterEventType.ASSET_MATERIALIZATION.value, snapshot.spec.name)] == 1


def test_the_throwaway_event_log_answers_from_every_thread_what_the_checks_ask() -> None:
    """One kept connection, used by threads in turn: every event stored is read back (the checks
    read the latest materialization and the materialized partitions), whichever thread stored it."""
    import threading

    from dagster import AssetKey, AssetMaterialization

    from pipelines.throwaway_instance import throwaway_instance

    instance = throwaway_instance()
    key = AssetKey("prompt_mentions")

    def report(thread: int) -> None:
        for day in range(1, 26):
            partition = f"2026-10-{day:02d}|engine{thread}"
            instance.report_runless_asset_event(
                AssetMaterialization(asset_key=key, partition=partition, metadata={"rows_landed": day})
            )

    threads = [threading.Thread(target=report, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(instance.get_materialized_partitions(key)) == 4 * 25
    latest = instance.get_latest_materialization_event(key)
    assert latest is not None and latest.asset_materialization is not None
    assert latest.asset_materialization.metadata["rows_landed"].value == 25
    assert instance.event_log_storage.has_table("event_logs")
    instance.dispose()
