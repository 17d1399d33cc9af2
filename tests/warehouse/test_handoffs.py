"""The backfill handoffs table: every change is a compare-and-set, the same on every engine.

Real DuckDB file, real Postgres, the BigQuery emulator. Each test uses a backfill id of its own
(BigQuery's tests share one dataset).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resources.warehouse.duckdb import DuckDBWarehouse
from resources.warehouse.handoffs import CLAIMED, LANDED, OPEN, Handoff
from resources.warehouse.postgres import PostgresWarehouse

CELLS = [["2026-09-01", "chatgpt"], ["2026-09-01", "claude"]]


@pytest.fixture(
    params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres), pytest.param("bigquery")]
)
def warehouse(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "duckdb":
        with DuckDBWarehouse(tmp_path / "wh.duckdb", "vis", lock_timeout_seconds=30) as wh:
            yield wh
    elif request.param == "postgres":
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("pg_schema")
        with PostgresWarehouse(url, schema) as wh:
            yield wh
    else:
        target = request.getfixturevalue("bigquery_emulator_target")
        yield target.warehouse()


@pytest.fixture
def bigquery_emulator_target(request: pytest.FixtureRequest) -> Any:
    """The emulator only: the handoffs table is one per dataset, not per test prefix."""
    from tests.fixtures_bigquery import EMULATOR_DATASET, EMULATOR_PROJECT, BigQueryTarget, _emulator_client

    client = _emulator_client(request.getfixturevalue("bigquery_emulator"))
    client.create_dataset(f"{EMULATOR_PROJECT}.{EMULATOR_DATASET}", exists_ok=True)
    return BigQueryTarget("emulator", client, EMULATOR_PROJECT, EMULATOR_DATASET, "handoffs_")


def backfill() -> str:
    return f"backfill-{uuid.uuid4().hex[:8]}"


def test_the_first_run_claims_a_table_and_a_second_cannot(warehouse: Any) -> None:
    b = backfill()
    assert warehouse.read_handoff(b, "answers") is None
    assert warehouse.claim_handoff(b, "answers", "run-a", None)
    assert not warehouse.claim_handoff(b, "answers", "run-b", None)  # it read "no row" too late
    seen = warehouse.read_handoff(b, "answers")
    assert (seen.claimant, seen.state) == ("run-a", CLAIMED)
    assert not warehouse.claim_handoff(b, "answers", "run-b", Handoff("", OPEN))
    assert warehouse.claim_handoff(b, "citation_trends", "run-b", None)  # another table: its own row


def test_a_landed_handoff_carries_its_cells_and_summary_and_only_its_claimant_lands_it(
    warehouse: Any,
) -> None:
    b = backfill()
    warehouse.claim_handoff(b, "answers", "run-a", None)
    assert not warehouse.land_handoff(b, "answers", "run-b", CELLS, {"rows_landed": 1})
    assert warehouse.land_handoff(b, "answers", "run-a", CELLS, {"rows_landed": 12, "brands": ["b1"]})
    seen = warehouse.read_handoff(b, "answers")
    assert seen == Handoff("run-a", LANDED, CELLS, {"rows_landed": 12, "brands": ["b1"]})


def test_a_dead_claimant_is_replaced_by_exactly_one_of_the_runs_that_saw_it(warehouse: Any) -> None:
    b = backfill()
    warehouse.claim_handoff(b, "answers", "run-dead", None)
    seen = warehouse.read_handoff(b, "answers")
    assert warehouse.claim_handoff(b, "answers", "run-b", seen)
    assert not warehouse.claim_handoff(b, "answers", "run-c", seen)  # same stale view: refused
    assert warehouse.read_handoff(b, "answers").claimant == "run-b"


def test_a_released_claim_is_open_to_the_next_run(warehouse: Any) -> None:
    b = backfill()
    warehouse.claim_handoff(b, "answers", "run-a", None)
    assert not warehouse.release_handoff(b, "answers", "run-b")
    assert warehouse.release_handoff(b, "answers", "run-a")
    seen = warehouse.read_handoff(b, "answers")
    assert seen.state == OPEN
    assert warehouse.claim_handoff(b, "answers", "run-b", seen)


def test_runs_claiming_at_once_elect_one(warehouse: Any, tmp_path: Path) -> None:
    if isinstance(warehouse, DuckDBWarehouse):
        handles = [DuckDBWarehouse(warehouse.path, "vis", lock_timeout_seconds=30) for _ in range(6)]
    elif isinstance(warehouse, PostgresWarehouse):
        handles = [PostgresWarehouse(warehouse.url, warehouse.schema) for _ in range(6)]
    else:
        handles = [warehouse] * 3  # one client; the emulator runs one job at a time anyway
    b, wins, errors = backfill(), [], []
    start = threading.Barrier(len(handles))

    def claim(i: int) -> None:
        try:
            start.wait()
            if handles[i].claim_handoff(b, "answers", f"run-{i}", None):
                wins.append(i)
        except Exception as exc:  # a failure must show, not pass as "did not win"
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(wins) == 1
    assert warehouse.read_handoff(b, "answers").claimant == f"run-{wins[0]}"
