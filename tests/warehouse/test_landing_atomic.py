"""Nothing half-landed: every chunk of one table's landing commits together, or none does.

On DuckDB and on Postgres, through ``replace_partitions_together`` and through
``sync.landing.land`` reading a real spool chunk by chunk. BigQuery's equivalent is in test_bigquery.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from resources.api.stats import RequestStats
from resources.warehouse.contract import PartitionWrite
from sync.landing import FetchOutcome, SpooledWrites, land
from sync.planning import Box, Plan, Window
from sync.spool import DateSpool
from tests.warehouse.conftest import MENTIONS, Case, mention_rows, scope

ENGINES = ("chatgpt", "claude")
#: three weeks: three spool buckets, so three chunks
START = dt.date(2026, 9, 3)
DAYS = [START + dt.timedelta(days=i) for i in range(21)]
END = DAYS[-1] + dt.timedelta(days=1)


class InjectedFault(Exception):
    pass


def fail_on_call(n: int) -> object:
    """A fault hook that lets ``n - 1`` writes through and fails the ``n``-th, inside its transaction."""
    calls = {"n": 0}

    def hook() -> None:
        calls["n"] += 1
        if calls["n"] == n:
            raise InjectedFault(f"injected in write {n}")

    return hook


def weekly_writes(name: str) -> list[PartitionWrite]:
    """Three writes of brands b1 and b2, one per week."""
    out = []
    for week in range(3):
        days = DAYS[7 * week : 7 * week + 7]
        rows = pa.concat_tables([mention_rows(b, days, name=name) for b in ("b1", "b2")])
        out.append(PartitionWrite(rows, scope(("b1", "b2"), days[0], days[-1] + dt.timedelta(days=1))))
    return out


def test_a_landing_of_several_writes_lands_them_all_with_one_result_each(case: Case) -> None:
    results = case.warehouse.replace_partitions_together(MENTIONS, weekly_writes("New"), "run-1")
    assert [(r.rows_written, r.rows_deleted) for r in results] == [(56, 0)] * 3
    assert len(case.rows("mentions")) == 168


def test_a_failure_in_the_last_write_leaves_the_table_with_exactly_its_previous_rows(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions_together(MENTIONS, weekly_writes("Old"), "run-1")
    before = case.rows("mentions", drop_meta=False)
    wh._between_delete_and_insert = fail_on_call(3)
    with pytest.raises(InjectedFault):
        wh.replace_partitions_together(MENTIONS, weekly_writes("New"), "run-2")
    wh._between_delete_and_insert = None
    assert case.rows("mentions", drop_meta=False) == before


def test_a_new_column_of_a_failed_landing_is_rolled_back_with_it(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions_together(MENTIONS, weekly_writes("Old"), "run-1")
    writes = weekly_writes("New")
    first = writes[0]
    writes[0] = PartitionWrite(
        first.rows.append_column("novel", pa.array([1] * first.rows.num_rows)), first.scope
    )
    wh._between_delete_and_insert = fail_on_call(3)
    with pytest.raises(InjectedFault):
        wh.replace_partitions_together(MENTIONS, writes, "run-2")
    wh._between_delete_and_insert = None
    assert "novel" not in case.column_types("mentions")
    assert {r["brand_name"] for r in case.rows("mentions")} == {"Old"}


def test_each_write_sees_the_earlier_ones_so_a_key_cannot_land_in_two_scopes(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions_together(MENTIONS, weekly_writes("Old"), "run-1")
    before = case.rows("mentions", drop_meta=False)
    writes = weekly_writes("New")
    last = writes[-1]
    # the last write repeats an id the first write of this landing put into another week
    ids = last.rows["id"].to_pylist()
    ids[0] = writes[0].rows["id"][0].as_py()
    writes[-1] = PartitionWrite(last.rows.set_column(0, "id", pa.array(ids)), last.scope)
    with pytest.raises(ValueError, match="already exist outside the partition scope"):
        wh.replace_partitions_together(MENTIONS, writes, "run-2")
    assert case.rows("mentions", drop_meta=False) == before


def test_no_writes_change_nothing(case: Case) -> None:
    case.warehouse.replace_partitions_together(MENTIONS, weekly_writes("Old"), "run-1")
    before = case.rows("mentions", drop_meta=False)
    assert case.warehouse.replace_partitions_together(MENTIONS, [], "run-2") == []
    assert case.rows("mentions", drop_meta=False) == before


# --- land(): the spool, chunk by chunk, in one transaction ------------------------------------------


@pytest.fixture
def spooled(tmp_path: Path) -> Iterator[FetchOutcome]:
    """A real spool holding three weeks of b1 and b2 (three chunks), as a fetch leaves it."""
    spool = DateSpool.create(MENTIONS.date_column or "", 7, name="atomic", parent=tmp_path)
    for brand in ("b1", "b2"):
        spool.append(mention_rows(brand, DAYS, name="New"))
    spool.close()
    window = Window(START, END)
    outcome = FetchOutcome(
        plan=Plan(
            cells=frozenset((d, e) for d in DAYS for e in ENGINES),
            calls=(),
            boxes=(Box(window, ENGINES),),
        ),
        spool=spool,
        brand_engines={"b1": ENGINES, "b2": ENGINES},
        out_of_scope=[],
        stats=RequestStats(),
    )
    yield outcome
    spool.remove()


def test_land_replaces_every_chunk_of_the_spool(case: Case, spooled: FetchOutcome) -> None:
    case.warehouse.replace_partitions_together(MENTIONS, weekly_writes("Old"), "run-1")
    results = land(case.warehouse, MENTIONS, spooled, "run-2")
    assert len(results) >= 3  # at least one write per chunk
    assert sum(r.rows_written for r in results) == 168
    assert {(r["brand_name"], r["_run_id"]) for r in case.rows("mentions", drop_meta=False)} == {
        ("New", "run-2")
    }


def test_land_failing_in_its_last_chunk_keeps_exactly_the_previous_rows(
    case: Case, spooled: FetchOutcome
) -> None:
    wh = case.warehouse
    wh.replace_partitions_together(MENTIONS, weekly_writes("Old"), "run-1")
    before = case.rows("mentions", drop_meta=False)
    writes = len(list(SpooledWrites(MENTIONS, spooled)))
    wh._between_delete_and_insert = fail_on_call(writes)
    with pytest.raises(InjectedFault):
        land(wh, MENTIONS, spooled, "run-2")
    wh._between_delete_and_insert = None
    assert case.rows("mentions", drop_meta=False) == before


def test_spooled_writes_start_over_when_iterated_again(spooled: FetchOutcome) -> None:
    """A retried landing (DuckDB beyond its budget) reads the spool again from its first chunk."""
    writes = SpooledWrites(MENTIONS, spooled)
    first = [(w.scope, w.rows.num_rows) for w in writes]
    assert [(w.scope, w.rows.num_rows) for w in writes] == first
    assert sum(n for _, n in first) == 168
