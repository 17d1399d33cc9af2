"""The warehouse retry policy: a DuckDB write is attempted at most twice, and the backoff both retry
loops share waits as documented."""

from __future__ import annotations

import logging
import statistics
from pathlib import Path

import duckdb
import pytest
from tenacity import RetryCallState

from resources.warehouse.backoff import jittered_backoff
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


def _waits(backoff: object, attempt: int, samples: int = 400) -> list[float]:
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.attempt_number = attempt
    return [backoff(state) for _ in range(samples)]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("attempt", "delay"), [(1, 0.02), (2, 0.04), (3, 0.08), (4, 0.16), (5, 0.25), (9, 0.25)]
)
def test_the_lock_wait_backoff_doubles_from_20_ms_to_250_ms_jittered_by_half(
    attempt: int, delay: float
) -> None:
    waits = _waits(jittered_backoff(0.02, 0.25), attempt)
    assert all(0.5 * delay <= w <= 1.5 * delay for w in waits)
    assert statistics.mean(waits) == pytest.approx(delay, rel=0.1)
    assert max(waits) - min(waits) > 0.5 * delay  # jittered, not fixed


def test_the_concurrent_update_backoff_doubles_from_its_base_without_a_cap() -> None:
    waits = _waits(jittered_backoff(1.0), 7)
    assert all(32 <= w <= 96 for w in waits)
