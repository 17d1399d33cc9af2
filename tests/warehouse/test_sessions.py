"""``Warehouse.session()``: several writes share one connection, each still its own transaction."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pyarrow as pa
import pytest

from resources.warehouse.contract import SnapshotScope, WarehouseLockTimeout
from resources.warehouse.duckdb import DuckDBWarehouse
from tests.warehouse.conftest import COMPETITORS, D1, D2, D3, MENTIONS, Case, mention_rows, scope

SPAWN = multiprocessing.get_context("spawn")


class InjectedFault(Exception):
    pass


def _raise() -> None:
    raise InjectedFault("injected between delete and insert")


def write_when_free(path: str, started: str, done: str) -> None:
    """Child process: announce the attempt, write brand b9 (waiting for the lock), announce the end."""
    wh = DuckDBWarehouse(path, "vis", lock_timeout_seconds=120)
    Path(started).write_text("trying")
    wh.replace_partitions(MENTIONS, mention_rows("b9", [D1], name="child"), scope(("b9",), D1, D2), "run-c")
    Path(done).write_text("landed")


def competitor_rows(brand: str, ids: list[str]) -> pa.Table:
    data = {"brand_id": [brand] * len(ids), "id": ids, "name": ids, "domain": [f"{i}.example" for i in ids]}
    return pa.table(data, schema=COMPETITORS.arrow_schema)


def _names(case: Case, brand: str) -> list[str]:
    return [r["brand_name"] for r in case.rows("mentions") if r["brand_id"] == brand]


def test_writes_in_one_session_land_like_separate_writes(case: Case) -> None:
    wh = case.warehouse
    with wh.session() as session:
        assert session is wh
        wh.ensure_table(MENTIONS)
        first = wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
        second = wh.replace_partitions(
            MENTIONS, mention_rows("b1", [D1], name="Again"), scope(("b1",), D1, D2), "run-2"
        )
        third = wh.replace_partitions(MENTIONS, mention_rows("b2", [D2]), scope(("b2",), D2, D3), "run-2")
        snap = wh.upsert_snapshot(COMPETITORS, competitor_rows("b1", ["c1", "c2"]), "run-2", SnapshotScope())
    assert (first.rows_written, first.rows_deleted) == (4, 0)
    assert (second.rows_written, second.rows_deleted) == (4, 4)
    assert (third.rows_written, third.rows_deleted) == (4, 0)
    assert snap.rows_written == 2
    assert _names(case, "b1") == ["Again"] * 4
    assert _names(case, "b2") == ["Acme"] * 4
    assert len(case.rows("competitors")) == 2


def test_a_failed_write_in_a_session_keeps_the_earlier_write_and_its_own_old_rows(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1], name="Old"), scope(("b1",), D1, D2), "run-0")
    wh.replace_partitions(MENTIONS, mention_rows("b2", [D1], name="Old"), scope(("b2",), D1, D2), "run-0")
    with wh.session():
        wh.replace_partitions(MENTIONS, mention_rows("b1", [D1], name="New"), scope(("b1",), D1, D2), "run-1")
        wh._between_delete_and_insert = _raise
        with pytest.raises(InjectedFault):
            wh.replace_partitions(
                MENTIONS, mention_rows("b2", [D1], name="New"), scope(("b2",), D1, D2), "run-1"
            )
        wh._between_delete_and_insert = None
        # the session's connection is still usable after the rollback
        wh.replace_partitions(MENTIONS, mention_rows("b3", [D1], name="New"), scope(("b3",), D1, D2), "run-1")
    assert _names(case, "b1") == ["New"] * 4
    assert _names(case, "b2") == ["Old"] * 4
    assert _names(case, "b3") == ["New"] * 4


def test_a_column_added_in_a_session_is_seen_by_the_next_write(case: Case) -> None:
    wh = case.warehouse
    with wh.session():
        wh.ensure_table(MENTIONS)
        added = wh.replace_partitions(
            MENTIONS,
            mention_rows("b1", [D1], extra={"sentiment": [0.5] * 4}),
            scope(("b1",), D1, D2),
            "run-1",
        )
        again = wh.replace_partitions(
            MENTIONS,
            mention_rows("b2", [D1], extra={"sentiment": [0.25] * 4}),
            scope(("b2",), D1, D2),
            "run-1",
        )
        # rewriting b1 without the column must null it: the plan has to know the column exists
        without = wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-2")
    assert added.columns_added == ["sentiment"]
    assert again.columns_added == []
    assert without.columns_added == []
    sentiment = sorted((r["brand_id"], r["sentiment"]) for r in case.rows("mentions"))
    assert sentiment == [("b1", None)] * 4 + [("b2", 0.25)] * 4


def test_a_rolled_back_column_is_added_again_by_the_next_write_of_the_session(case: Case) -> None:
    wh = case.warehouse
    rows = mention_rows("b1", [D1], extra={"sentiment": [0.5] * 4})
    with wh.session():
        wh.ensure_table(MENTIONS)
        wh._between_delete_and_insert = _raise
        with pytest.raises(InjectedFault):
            wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-1")
        wh._between_delete_and_insert = None
        result = wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-2")
    assert result.columns_added == ["sentiment"]
    assert [r["sentiment"] for r in case.rows("mentions")] == [0.5] * 4


def test_sessions_nest_and_queries_inside_them_see_committed_writes(tmp_path: Path) -> None:
    wh = DuckDBWarehouse(tmp_path / "wh.duckdb", "vis", lock_timeout_seconds=5)
    with wh.session():
        wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
        with wh.session():
            wh.replace_partitions(MENTIONS, mention_rows("b2", [D1]), scope(("b2",), D1, D2), "run-1")
        counted = wh.query(f"SELECT count(*) AS n FROM {wh.table_ref('mentions')}").to_pylist()
        # another handle on the same file, in the same thread, neither deadlocks nor times out
        other = DuckDBWarehouse(tmp_path / "wh.duckdb", "vis", lock_timeout_seconds=5)
        other.replace_partitions(MENTIONS, mention_rows("b3", [D1]), scope(("b3",), D1, D2), "run-1")
    assert counted == [{"n": 8}]
    reader = DuckDBWarehouse(tmp_path / "wh.duckdb", "vis", read_only=True)
    total = reader.query(f"SELECT count(*) AS n FROM {reader.table_ref('mentions')}").to_pylist()
    assert total == [{"n": 12}]


def test_another_process_waits_for_an_open_session_then_writes(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    started, done = tmp_path / "started", tmp_path / "done"
    wh = DuckDBWarehouse(path, "vis", lock_timeout_seconds=30)
    proc = SPAWN.Process(target=write_when_free, args=(str(path), str(started), str(done)))
    with wh.session():
        wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
        proc.start()
        deadline = time.monotonic() + 60
        while not started.exists():
            assert proc.is_alive(), "the child died before trying to write"
            assert time.monotonic() < deadline, "the child never tried to write"
            time.sleep(0.05)
        time.sleep(0.5)  # give the child time to hit the lock; the session still holds it
        wh.replace_partitions(MENTIONS, mention_rows("b2", [D1]), scope(("b2",), D1, D2), "run-1")
        assert not done.exists()
        assert proc.is_alive()
    proc.join(120)
    assert proc.exitcode == 0
    assert done.exists()
    reader = DuckDBWarehouse(path, "vis", read_only=True)
    rows = reader.query(f"SELECT brand_id, count(*) AS n FROM {reader.table_ref('mentions')} GROUP BY 1")
    assert sorted((r["brand_id"], r["n"]) for r in rows.to_pylist()) == [("b1", 4), ("b2", 4), ("b9", 4)]


def test_opening_a_session_gives_up_after_the_lock_timeout_while_another_holds_one(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    holder = DuckDBWarehouse(path, "vis", lock_timeout_seconds=30)
    result = tmp_path / "result"
    with holder.session():
        holder.ensure_table(MENTIONS)
        blocked = SPAWN.Process(target=_open_session_briefly, args=(str(path), str(result)))
        blocked.start()
        blocked.join(120)
    assert result.read_text() == "WarehouseLockTimeout"


def _open_session_briefly(path: str, result: str) -> None:
    """Child process: try to open a session with a short lock timeout; record what happened."""
    try:
        with DuckDBWarehouse(path, "vis", lock_timeout_seconds=0.3).session():
            outcome = "opened"
    except WarehouseLockTimeout:
        outcome = "WarehouseLockTimeout"
    Path(result).write_text(outcome)
