"""The landing worker's DuckDB memory budget: set on its connections only, never a reason to fail."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pytest

from resources.warehouse.duckdb import DuckDBWarehouse, parse_memory_limit
from resources.warehouse.resource import WarehouseConfigError, WarehouseResource
from tests.warehouse.helpers import D1, D2, D3, MENTIONS, mention_rows, scope

MIB = 1024**2


def _memory_limit(warehouse: DuckDBWarehouse) -> str:
    with warehouse.session():
        return str(warehouse.query("SELECT current_setting('memory_limit') AS m").column("m")[0].as_py())


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


def test_a_write_beyond_the_budget_is_retried_without_it_and_lands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse = DuckDBWarehouse(tmp_path / "w.duckdb", memory_limit="32MB")
    warehouse.memory_limit = "16KB"  # below what validation accepts: DuckDB fails every statement
    first, second = mention_rows("b1", [D1], per_cell=50), mention_rows("b2", [D2], per_cell=30)
    with caplog.at_level(logging.WARNING):
        with warehouse.session():  # the session goes on after the retry
            result = warehouse.replace_partitions(MENTIONS, first, scope(("b1",), D1, D2), "run-1")
            warehouse.replace_partitions(MENTIONS, second, scope(("b2",), D2, D3), "run-1")
        warehouse.replace_partitions(MENTIONS, first, scope(("b1",), D1, D2), "run-2")  # no session
    assert result.rows_written == first.num_rows
    assert "exceeded memory_limit=16KB; retried without it" in caplog.text
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
        session = warehouse._session()
        assert session is not None
        try:  # too small to checkpoint in
            _ = session.con.execute("SET memory_limit = '1MB'").fetchall()
        except duckdb.OutOfMemoryException:
            pytest.skip("this DuckDB holds more than 1MB after the write: no way to starve its checkpoint")
    if not path.with_name("w.duckdb.wal").exists():
        pytest.skip("this DuckDB checkpointed within 1MB: nothing to prove")
    reader = DuckDBWarehouse.open_read_only(path)
    count = f"SELECT count(*) AS n FROM {reader.table_ref('mentions')}"
    assert reader.query(count).column("n")[0].as_py() == rows.num_rows
    more = mention_rows("b2", [D1], per_cell=10)
    warehouse.replace_partitions(MENTIONS, more, scope(("b2",), D1, D2), "run-2")
    assert not path.with_name("w.duckdb.wal").exists()  # folded in by the next checkpoint
    assert reader.query(count).column("n")[0].as_py() == rows.num_rows + more.num_rows
