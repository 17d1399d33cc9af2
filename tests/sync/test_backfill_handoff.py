"""The runs of one backfill hand each table over through the warehouse (sync/handoff.py): one run
fetches and lands the whole backfill, the others make no request and no landing; a dead claimant is
replaced, a landed handoff that lacks a run's cells is fetched again. Real DuckDB file, real sandbox.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from resources.warehouse.base import Warehouse
from resources.warehouse.duckdb import DuckDBWarehouse
from resources.warehouse.urls import warehouse_from_url
from sandbox.testing import SandboxHandle
from sync.catalog import BY_NAME, DAILY
from sync.discovery import Discovery
from sync.driver import DailyRequest, TableLanded, sync_daily
from sync.handoff import BackfillHandoff
from sync.planning import Cell
from sync.prefetch import FetchCancelled, StopSignal
from tests.fixtures_sandbox import SANDBOX_TODAY
from tests.sync.conftest import served
from tests.sync.test_driver import _Api, _config

LOG = logging.getLogger("tests.handoff")


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run waiting on another's claim looks again every 50 ms, not every second."""
    monkeypatch.setattr(Warehouse, "handoff_poll_seconds", 0.05)


D1, D2 = SANDBOX_TODAY - dt.timedelta(days=3), SANDBOX_TODAY - dt.timedelta(days=2)
CHATGPT: set[Cell] = {(D1, "chatgpt"), (D2, "chatgpt")}
PERPLEXITY: set[Cell] = {(D1, "perplexity"), (D2, "perplexity")}
ALL_CELLS = CHATGPT | PERPLEXITY


def handoff(path: Path, run_id: str, alive: set[str] | None = None, backfill: str = "b1") -> BackfillHandoff:
    return BackfillHandoff(
        backfill,
        run_id,
        lambda: DuckDBWarehouse(path, "visibility", lock_timeout_seconds=30),
        lambda other: alive is None or other in alive,
    )


def never_stopped() -> StopSignal:
    return StopSignal(threading.Event())


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def warehouse_config(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, object]:
    """The sync's warehouse settings: a DuckDB file, or a schema of a real Postgres server."""
    if request.param == "duckdb":
        return _config(tmp_path / "w.duckdb")
    url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("pg_schema")
    return {"url": url, "schema_name": schema}


def test_one_run_of_a_backfill_fetches_and_lands_every_cell_and_the_others_only_record_it(
    sandbox: SandboxHandle, warehouse_config: dict[str, Any]
) -> None:
    api = _Api(sandbox.url, sandbox.keys["workspace"])
    targets = {t.spec.name: set(ALL_CELLS) for t in DAILY}

    def open_warehouse() -> Warehouse:
        return warehouse_from_url(warehouse_config["url"], warehouse_config["schema_name"])

    def run(run_id: str, cells: set[Cell]) -> list[TableLanded]:
        handoff = BackfillHandoff("b1", run_id, open_warehouse, lambda other: True)
        request = DailyRequest(run_id, set(cells), (), Discovery(), handoff=handoff, backfill_cells=targets)
        return list(sync_daily(DAILY, request, api, warehouse_config, LOG))  # type: ignore[arg-type]

    def by_run(table: str) -> dict[str, int]:
        with open_warehouse() as wh:
            rows = wh.query(
                f"SELECT _run_id AS run, {BY_NAME[table].spec.engine_column} AS engine, COUNT(*) AS n "
                f"FROM {wh.table_ref(table)} GROUP BY 1, 2"
            ).to_pylist()
        return {f"{r['run']}/{r['engine']}": r["n"] for r in rows}

    first = run("run-chatgpt", CHATGPT)
    assert all(isinstance(e, TableLanded) for e in first), first
    after_first = sum(served(sandbox).values())
    landed = {t.spec.name: by_run(t.spec.name) for t in DAILY}
    # the first run landed the perplexity cells too, and alone
    assert set(landed["prompt_mentions"]) == {"run-chatgpt/chatgpt", "run-chatgpt/perplexity"}, landed
    assert all(key.startswith("run-chatgpt/") for rows in landed.values() for key in rows), landed

    second = run("run-perplexity", PERPLEXITY)
    assert sum(served(sandbox).values()) == after_first  # no request at all
    for event in second:
        assert isinstance(event, TableLanded), event
        assert event.cells == frozenset(PERPLEXITY)  # its own materializations only
        assert event.metadata["landed_by_run"] == "run-chatgpt"
        assert event.metadata["requests_total"] == 0
    assert {t.spec.name: by_run(t.spec.name) for t in DAILY} == landed  # and no landing of its own


def test_a_run_waits_for_a_live_claimant_then_takes_over_once_it_has_died(tmp_path: Path) -> None:
    path, alive = tmp_path / "w.duckdb", {"run-a"}
    assert handoff(path, "run-a", alive).take("answers", CHATGPT, never_stopped()) is None
    taken: list[object] = []
    waiter = threading.Thread(
        target=lambda: taken.append(
            handoff(path, "run-b", alive).take("answers", PERPLEXITY, never_stopped())
        )
    )
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive()  # run-a still runs: run-b waits
    alive.clear()  # run-a's run failed (killed, then marked failed by run monitoring)
    waiter.join(30)
    assert taken == [None]  # run-b holds the claim now and fetches
    with DuckDBWarehouse(path, "visibility") as wh:
        assert wh.read_handoff("b1", "answers").claimant == "run-b"


def test_a_stop_ends_the_wait_for_another_runs_claim(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    handoff(path, "run-a").take("answers", CHATGPT, never_stopped())
    stop = threading.Event()
    stop.set()
    with pytest.raises(FetchCancelled):
        handoff(path, "run-b").take("answers", PERPLEXITY, StopSignal(stop))


def test_a_landed_handoff_without_the_runs_cells_is_claimed_and_fetched_again(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    first = handoff(path, "run-a")
    assert first.take("answers", CHATGPT, never_stopped()) is None
    assert first.landed("answers", CHATGPT, {"rows_landed": 3})
    assert handoff(path, "run-c").take("answers", CHATGPT, never_stopped()).claimant == "run-a"
    assert handoff(path, "run-b").take("answers", PERPLEXITY, never_stopped()) is None  # claims it


def test_a_released_claim_goes_to_the_next_run_without_waiting_for_the_first_to_end(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    first = handoff(path, "run-a")
    first.take("answers", CHATGPT, never_stopped())
    assert first.release("answers")
    assert handoff(path, "run-b").take("answers", PERPLEXITY, never_stopped()) is None


def test_only_the_run_landing_the_newest_all_cell_compares_totals() -> None:
    rollup = {(D1, "all"), (D2, "all")}
    backfill = {"competitor_trends": rollup | CHATGPT}

    def request(cells: set[Cell]) -> DailyRequest:
        return DailyRequest("r", cells, (), Discovery(), backfill_cells=backfill)

    assert request({(D2, "all")}).compares_totals()
    assert not request({(D1, "all")}).compares_totals()
    assert not request(CHATGPT).compares_totals()
    assert DailyRequest("r", CHATGPT, (), Discovery()).compares_totals()  # not a backfill's run
