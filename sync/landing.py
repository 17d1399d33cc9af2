"""Landing a fetch's spool in write scopes (Dagster-free).

Writes replace one box of cells at a time (dates x engines, for the brands fetched and measured
there), chunked by spool bucket so memory stays flat; every write of one table's landing is in one
transaction, so a failure leaves the table as it was.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from resources.api.stats import RequestStats
from resources.warehouse.base import Warehouse
from resources.warehouse.contract import PartitionScope, PartitionWrite, TableSpec, WriteResult
from sync.planning import Box, Plan, Window, expected_requests
from sync.spool import DateSpool, bucket_windows
from sync.transforms import concat, keep_rows, select_box

#: Longest date span of one write (and a spool bucket's): bounds memory (rows of one chunk) whatever
#: the run's length. 3 rather than 7: a smaller chunk lowers a landing's peak and is no slower
#: (bench/RESULTS.md, *Memory of the process tree*).
DEFAULT_DAYS_PER_WRITE = 3


@dataclass
class FetchOutcome:
    """What a fetch hands its landing."""

    plan: Plan
    spool: DateSpool
    #: brand id -> engines its rows land under (measured engines, plus ``all`` for rollups)
    brand_engines: dict[str, tuple[str, ...]]
    out_of_scope: list[str]
    stats: RequestStats
    notes: dict[str, Any] = field(default_factory=dict)
    #: how long discovery, planning and fetching took
    fetch_seconds: float = 0.0


def _scopes_of_box(box: Box, brand_engines: dict[str, tuple[str, ...]]) -> list[PartitionScope]:
    """Brands grouped by the engines of the box they are measured on: a brand's rows on an engine
    it is no longer measured on (history) are never deleted by a run that did not fetch them."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for brand_id, engines in sorted(brand_engines.items()):
        mine = tuple(e for e in box.engines if e in engines)
        if mine:
            groups[mine].append(brand_id)
    return [PartitionScope(tuple(ids), box.window.start, box.window.end, e) for e, ids in groups.items()]


def _of_scope(spec: TableSpec, rows: pa.Table, scope: PartitionScope) -> pa.Table:
    if rows.num_rows == 0:
        return rows
    brands = pa.array(list(scope.brand_ids), type=pa.string())
    engines = pa.array(list(scope.engines), type=pa.string())
    mask = pc.and_(
        pc.is_in(rows[spec.brand_column], value_set=brands),
        pc.is_in(rows[spec.engine_column], value_set=engines),
    )
    return keep_rows(rows, mask)


@dataclass(frozen=True)
class SpooledWrites:
    """The writes of one table's landing, read from its spool one chunk (spool bucket) at a time.

    Each chunk is read once, then yielded as one write per group of brands sharing engines, so a
    landing holds one chunk's rows whatever the length of the backfill. Iterating again starts over
    from the spool: an engine that retries a whole landing (DuckDB beyond its memory budget) can.
    """

    spec: TableSpec
    outcome: FetchOutcome

    def __iter__(self) -> Iterator[PartitionWrite]:
        spec, spool = self.spec, self.outcome.spool
        assert spec.date_column is not None
        date_column = spec.date_column
        for box in self.outcome.plan.boxes:  # cut at the spool's bucket boundaries
            for start, end in bucket_windows(box.window.start, box.window.end, spool.days_per_bucket):
                chunk = Box(Window(start, end), box.engines)
                rows = concat(
                    spec,
                    spool.read(
                        lambda t, c=chunk: select_box(t, date_column, c), chunk.window.start, chunk.window.end
                    ),
                )
                for scope in _scopes_of_box(chunk, self.outcome.brand_engines):
                    yield PartitionWrite(_of_scope(spec, rows, scope), scope)
                del rows  # before the next chunk is read


def land(warehouse: Warehouse, spec: TableSpec, outcome: FetchOutcome, run_id: str) -> list[WriteResult]:
    """Replace every fetched cell's rows in one transaction (cells with no rows are emptied): the
    writes stream from the spool, one chunk's rows at a time (:class:`SpooledWrites`)."""
    assert spec.date_column is not None
    with warehouse.session():  # one connection (DuckDB: one open of the file) for both
        warehouse.ensure_table(spec)
        return warehouse.replace_partitions_together(spec, SpooledWrites(spec, outcome), run_id)


def requests_beyond_plan(plan: Plan, stats: RequestStats) -> dict[str, int]:
    """Requests beyond one per planned call, by endpoint: further pages of paged calls, and retries."""
    planned = expected_requests(plan)
    return {
        endpoint: stats.requests_by_endpoint.get(endpoint, 0) - calls
        for endpoint, calls in planned.items()
        if stats.requests_by_endpoint.get(endpoint, 0) > calls
    }
