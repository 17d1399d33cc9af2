"""The warehouse retry policy: a DuckDB write is attempted at most twice."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import pytest

from resources.warehouse.contract import LOGGER_NAME
from resources.warehouse.duckdb import DuckDBWarehouse
from tests.warehouse.helpers import D1, D2, MENTIONS, mention_rows, scope


def test_a_landing_out_of_memory_again_without_the_budget_is_attempted_twice_then_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "w.duckdb"
    DuckDBWarehouse(path).replace_partitions(
        MENTIONS, mention_rows("b1", [D1], name="Old"), scope(("b1",), D1, D2), "run-1"
    )
    budgeted = DuckDBWarehouse(path, memory_limit="64MB")
    attempts: list[int] = []

    def out_of_memory_every_time() -> None:
        attempts.append(1)
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 1.0 MiB")

    budgeted._between_delete_and_insert = out_of_memory_every_time
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME), pytest.raises(duckdb.OutOfMemoryException):
        budgeted.replace_partitions(
            MENTIONS, mention_rows("b1", [D1], name="New"), scope(("b1",), D1, D2), "run-2"
        )

    assert len(attempts) == 2  # the budgeted attempt and one retry without the budget, no more
    retries = [r for r in caplog.records if "retrying it once without the budget" in r.getMessage()]
    assert len(retries) == 1
    landed = DuckDBWarehouse(path, read_only=True).query(
        'SELECT DISTINCT brand_name FROM "visibility"."mentions"'
    )
    assert landed.to_pylist() == [{"brand_name": "Old"}]  # both attempts rolled back
