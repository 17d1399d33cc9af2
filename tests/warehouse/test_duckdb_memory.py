"""The landing's DuckDB memory budget: set on its connections only, never a reason to fail:
a landing beyond it, in any of DuckDB's out-of-memory forms, is rolled back whole and retried once."""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from resources.warehouse.contract import LOGGER_NAME, PartitionWrite, WarehouseConfigError
from resources.warehouse.duckdb import LANDING_THREADS, DuckDBWarehouse
from resources.warehouse.duckdb_memory import is_out_of_memory
from resources.warehouse.resource import WarehouseResource
from resources.warehouse.urls import parse_memory_limit
from tests.warehouse.helpers import D1, D2, D3, MENTIONS, mention_rows, scope

MIB = 1024**2


def _memory_limit(warehouse: DuckDBWarehouse) -> str:
    return str(_setting(warehouse, "memory_limit"))


def _setting(warehouse: DuckDBWarehouse, name: str) -> object:
    with warehouse.session():
        return warehouse.query(f"SELECT current_setting('{name}') AS s").column("s")[0].as_py()


@pytest.mark.parametrize(
    ("text", "size"),
    [("64MB", 64_000_000), ("1GiB", 1024**3), (" 0.5 gb ", 500_000_000), ("32MB", 32_000_000)],
)
def test_memory_sizes_are_read_like_duckdb_reads_them(text: str, size: int) -> None:
    assert parse_memory_limit(text) == size


@pytest.mark.parametrize("text", ["64", "lots", "-5MB", "64 MiBs", "16MB", "100KB"])
def test_unreadable_or_too_small_memory_sizes_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=repr(text)):
        parse_memory_limit(text)


def test_a_budgeted_handle_runs_its_connections_within_the_budget(tmp_path: Path) -> None:
    budgeted = DuckDBWarehouse(tmp_path / "w.duckdb", memory_limit="64MiB")
    budgeted.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    assert _memory_limit(budgeted) == "64.0 MiB"
    default = _memory_limit(DuckDBWarehouse(tmp_path / "w.duckdb"))
    assert default != "64.0 MiB"  # the setting did not outlive the budgeted connection
    assert "memory_limit='64MiB'" in repr(budgeted)


def test_a_landing_handle_leaves_half_the_cores_to_the_fetch(tmp_path: Path) -> None:
    landing = DuckDBWarehouse(tmp_path / "w.duckdb", memory_limit="64MiB")
    landing.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    assert _setting(landing, "threads") == LANDING_THREADS == max(1, (os.cpu_count() or 2) // 2)
    duckdb_default = duckdb.connect().execute("SELECT current_setting('threads')").fetchone()
    assert duckdb_default is not None
    assert _setting(DuckDBWarehouse(tmp_path / "w.duckdb"), "threads") == duckdb_default[0]


def test_a_write_beyond_the_budget_is_retried_without_it_and_lands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = DuckDBWarehouse(tmp_path / "w.duckdb", memory_limit="32MB")
    warehouse._budget.limit = "16KB"  # below what validation accepts: DuckDB fails every statement
    first, second = mention_rows("b1", [D1], per_cell=50), mention_rows("b2", [D2], per_cell=30)
    with caplog.at_level(logging.WARNING):
        with warehouse.session():  # the session goes on after the retry
            result = warehouse.replace_partitions(MENTIONS, first, scope(("b1",), D1, D2), "run-1")
            warehouse.replace_partitions(MENTIONS, second, scope(("b2",), D2, D3), "run-1")
        warehouse.replace_partitions(MENTIONS, first, scope(("b1",), D1, D2), "run-2")  # no session
    assert result.rows_written == first.num_rows
    assert "exceeded memory_limit=16KB" in caplog.text
    assert "rolled back whole, retrying it once without the budget" in caplog.text
    reader = DuckDBWarehouse(tmp_path / "w.duckdb")
    landed = reader.query(
        f"SELECT brand_id, count(*) AS n, max(_run_id) AS run FROM {reader.table_ref('mentions')} "
        "GROUP BY brand_id ORDER BY brand_id"
    )
    assert landed.to_pylist() == [
        {"brand_id": "b1", "n": first.num_rows, "run": "run-2"},
        {"brand_id": "b2", "n": second.num_rows, "run": "run-1"},
    ]


def test_the_resource_gives_the_budget_to_landing_handles_only(tmp_path: Path) -> None:
    resource = WarehouseResource(url=f"duckdb:///{tmp_path}/w.duckdb", duckdb_landing_memory_limit="128MB")
    landing = resource.get_warehouse(landing=True)
    other = resource.get_warehouse()
    assert isinstance(landing, DuckDBWarehouse) and isinstance(other, DuckDBWarehouse)
    assert (landing.memory_limit, other.memory_limit) == ("128MB", None)
    unbudgeted = WarehouseResource(url=f"duckdb:///{tmp_path}/w.duckdb", duckdb_landing_memory_limit="")
    landing = unbudgeted.get_warehouse(landing=True)
    assert isinstance(landing, DuckDBWarehouse) and landing.memory_limit is None
    assert resource.settings()["duckdb_landing_memory_limit"] == "128MB"


def test_the_resource_gives_the_budget_to_the_queries_of_its_other_handles(tmp_path: Path) -> None:
    resource = WarehouseResource(url=f"duckdb:///{tmp_path}/w.duckdb", duckdb_landing_memory_limit="128MB")
    landing, other = resource.get_warehouse(landing=True), resource.get_warehouse()
    assert isinstance(landing, DuckDBWarehouse) and isinstance(other, DuckDBWarehouse)
    assert (landing.query_memory_limit, other.query_memory_limit) == (None, "128MB")
    unbudgeted = WarehouseResource(url=f"duckdb:///{tmp_path}/w.duckdb", duckdb_landing_memory_limit="")
    other = unbudgeted.get_warehouse()
    assert isinstance(other, DuckDBWarehouse) and other.query_memory_limit is None


def test_a_query_runs_within_the_query_budget_and_the_session_writes_without_it(tmp_path: Path) -> None:
    warehouse = DuckDBWarehouse(tmp_path / "w.duckdb", query_memory_limit="64MiB")
    warehouse.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    with warehouse.session():
        assert _memory_limit(warehouse) == "64.0 MiB"
        con = warehouse._session()
        assert con is not None
        after = con.execute("SELECT current_setting('memory_limit')").fetchone()
    assert after is not None and after[0] != "64.0 MiB"  # reset once the query ended
    assert _memory_limit(DuckDBWarehouse(tmp_path / "w.duckdb")) != "64.0 MiB"


def test_a_query_beyond_the_query_budget_runs_again_without_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = DuckDBWarehouse(tmp_path / "w.duckdb", query_memory_limit="32MB")
    rows = mention_rows("b1", [D1, D2], per_cell=50)
    warehouse.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D3), "run-1")
    warehouse.query_memory_limit = "16KB"  # below what validation accepts: DuckDB fails the query
    sql = (
        f"SELECT brand_id, count(*) AS n FROM {warehouse.table_ref('mentions')} "
        "GROUP BY brand_id ORDER BY brand_id"
    )
    with caplog.at_level(logging.WARNING):
        counted = warehouse.query(sql)
    assert counted.to_pylist() == [{"brand_id": "b1", "n": rows.num_rows}]
    assert "DuckDB query exceeded memory_limit=16KB" in caplog.text
    assert "once more without the budget" in caplog.text


def test_a_bad_budget_fails_when_the_step_starts_naming_the_setting(tmp_path: Path) -> None:
    resource = WarehouseResource(url=f"duckdb:///{tmp_path}/w.duckdb", duckdb_landing_memory_limit="lots")
    with pytest.raises(WarehouseConfigError, match="duckdb_landing_memory_limit: 'lots'"):
        resource.settings()
    assert not (tmp_path / "w.duckdb").exists()
    # a DuckDB-only setting: other warehouses ignore it
    postgres = WarehouseResource(url="postgresql://u@h:5432/db", duckdb_landing_memory_limit="lots")
    assert postgres.settings()["url"] == "postgresql://u@h:5432/db"


def test_a_checkpoint_beyond_the_budget_loses_no_committed_write(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    warehouse = DuckDBWarehouse(path, memory_limit="32MB")
    rows = mention_rows("b1", [D1, D2], per_cell=50)
    with warehouse.session():
        warehouse.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D3), "run-1")
        con = warehouse._session()
        assert con is not None
        try:  # too small to checkpoint in
            _ = con.execute("SET memory_limit = '1MB'").fetchall()
        except duckdb.OutOfMemoryException:
            pytest.skip("this DuckDB holds more than 1MB after the write: no way to starve its checkpoint")
    if not path.with_name("w.duckdb.wal").exists():
        pytest.skip("this DuckDB checkpointed within 1MB: nothing to prove")
    reader = DuckDBWarehouse(path, read_only=True)
    count = f"SELECT count(*) AS n FROM {reader.table_ref('mentions')}"
    assert reader.query(count).column("n")[0].as_py() == rows.num_rows
    more = mention_rows("b2", [D1], per_cell=10)
    warehouse.replace_partitions(MENTIONS, more, scope(("b2",), D1, D2), "run-2")
    assert not path.with_name("w.duckdb.wal").exists()  # folded in by the next checkpoint
    assert reader.query(count).column("n")[0].as_py() == rows.num_rows + more.num_rows


# --- a landing beyond the budget: rolled back whole, retried once without it -----------------------

WEEK0 = dt.date(2026, 9, 3)


def _big_text_writes(name: str, weeks: int = 3, per_cell: int = 8) -> list[PartitionWrite]:
    """Weekly writes of b1 whose rows carry ~100 KB of text each (answers as the service sends them)."""
    out = []
    for week in range(weeks):
        days = [WEEK0 + dt.timedelta(days=7 * week + i) for i in range(7)]
        rows = mention_rows("b1", days, per_cell=per_cell, name=name)
        text = pa.array([f"{name} {i} " + "x" * 100_000 for i in range(rows.num_rows)])
        rows = rows.append_column("answer_text", text)
        out.append(PartitionWrite(rows, scope(("b1",), days[0], days[-1] + dt.timedelta(days=1))))
    return out


def _landed(path: Path) -> list[dict[str, object]]:
    reader = DuckDBWarehouse(path, read_only=True)
    return reader.query(
        f"SELECT _run_id, brand_name, count(*) AS n, min(length(answer_text)) AS shortest "
        f"FROM {reader.table_ref('mentions')} GROUP BY ALL ORDER BY ALL"
    ).to_pylist()


def test_large_text_rows_beyond_a_32mb_budget_land_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "w.duckdb"
    DuckDBWarehouse(path).replace_partitions_together(MENTIONS, _big_text_writes("Old"), "run-1")
    budgeted = DuckDBWarehouse(path, memory_limit="32MB")
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        results = budgeted.replace_partitions_together(MENTIONS, _big_text_writes("New"), "run-2")
    assert [r.rows_written for r in results] == [112, 112, 112]
    assert [r.rows_deleted for r in results] == [112, 112, 112]
    # ~34 MB of text in one transaction does not fit 32MB: this DuckDB fails the commit with
    # "TransactionException: Failed to commit: failed to pin block" (the form seen in production)
    assert "exceeded memory_limit=32MB" in caplog.text
    assert "rolled back whole, retrying it once without the budget" in caplog.text
    assert _landed(path) == [{"_run_id": "run-2", "brand_name": "New", "n": 336, "shortest": 100_006}]


def test_an_error_that_is_not_about_memory_is_not_retried(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    DuckDBWarehouse(path).replace_partitions_together(MENTIONS, _big_text_writes("Old", per_cell=1), "run-1")
    before = _landed(path)
    budgeted = DuckDBWarehouse(path, memory_limit="64MB")
    calls: list[int] = []

    def fail_in_the_last_write() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("injected in the last write")

    budgeted._between_delete_and_insert = fail_in_the_last_write
    with pytest.raises(RuntimeError, match="injected"):
        budgeted.replace_partitions_together(MENTIONS, _big_text_writes("New", per_cell=1), "run-2")
    assert len(calls) == 3  # one attempt
    assert _landed(path) == before


def test_a_one_shot_landing_beyond_the_budget_is_rolled_back_not_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "w.duckdb"
    DuckDBWarehouse(path).replace_partitions_together(MENTIONS, _big_text_writes("Old", per_cell=1), "run-1")
    before = _landed(path)
    warehouse = DuckDBWarehouse(path, memory_limit="32MB")
    warehouse._budget.limit = "16KB"  # below what validation accepts: DuckDB fails every statement
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME), pytest.raises(duckdb.Error) as raised:
        warehouse.replace_partitions_together(MENTIONS, iter(_big_text_writes("New", per_cell=1)), "run-2")
    assert is_out_of_memory(raised.value)
    assert "retrying it once without the budget" not in caplog.text
    assert _landed(path) == before


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 32.0 KiB"), True),
        (
            duckdb.TransactionException(
                "TransactionContext Error: Failed to commit: failed to pin block of size 2.0 MiB "
                "(60.9 MiB/61.0 MiB used)"
            ),
            True,
        ),
        (duckdb.IOException("IO Error: could not allocate block of size 256.0 KiB"), True),
        (duckdb.InvalidInputException("Invalid Input Error: Out of Memory Error: ..."), True),
        (duckdb.TransactionException("TransactionContext Error: Conflict on tuple deletion"), False),
        (duckdb.IOException('IO Error: Could not set lock on file "x.duckdb"'), False),
        (MemoryError("out of memory"), False),  # not DuckDB's: the budget is not the cause
    ],
)
def test_every_form_of_duckdb_running_out_of_memory_is_recognised(error: Exception, expected: bool) -> None:
    assert is_out_of_memory(error) is expected
