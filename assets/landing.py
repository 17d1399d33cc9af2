"""Fetching a plan into the spool, and landing the spool in write scopes (Dagster-free).

Writes replace one box of cells at a time (contiguous dates x engines, for the brands that were
fetched and are measured on those engines), chunked into at most ``days_per_write`` days so that
memory stays flat for long backfills. Each write is one warehouse transaction: a failure leaves the
previous rows of that chunk in place, and a re-run replaces them again.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from assets.planning import ALL, Box, Call, Plan, Window, expected_requests
from assets.spool import Spool
from assets.transforms import concat, filter_cells, select_box
from resources.api.client import RequestStats, VisibilityClient
from resources.api.errors import NotFoundError
from resources.warehouse.base import PartitionScope, TableSpec, Warehouse, WriteResult

#: Longest date span of one write: bounds memory (rows of one chunk) whatever the run's length.
DEFAULT_DAYS_PER_WRITE = 7

FetchOne = Callable[[VisibilityClient, Call], pa.Table]


@dataclass
class FetchOutcome:
    """What a fetch step hands the landing step (picklable: it crosses process boundaries)."""

    table: str
    plan: Plan
    spool: Spool
    #: brand id -> engines its rows land under (measured engines, plus ``all`` for rollups)
    brand_engines: dict[str, tuple[str, ...]]
    out_of_scope: list[str]
    stats: RequestStats
    notes: dict[str, Any] = field(default_factory=dict)


def fetch_to_spool(
    client: VisibilityClient,
    spec: TableSpec,
    plan: Plan,
    fetch_one: FetchOne,
    spool: Spool,
    on_progress: Callable[[int, int], None] | None = None,
) -> set[str]:
    """Run the plan's calls concurrently, spooling the rows of the run's cells.

    Returns the brands whose calls answered 404 (their rows are dropped, never written).
    """
    assert spec.date_column is not None
    not_found: set[str] = set()

    def work(call: Call) -> tuple[Call, pa.Table | None]:
        try:
            return call, fetch_one(client, call)
        except NotFoundError:
            return call, None

    total = len(plan.calls)
    for done, (call, table) in enumerate(client.map_concurrent(work, plan.calls), start=1):
        if table is None:
            not_found.add(call.brand_id)
        else:
            spool.append(filter_cells(table, spec.date_column, plan.cells))
        if on_progress is not None:
            on_progress(done, total)
    return not_found


def write_chunks(box: Box, days_per_write: int) -> Iterator[Box]:
    """Split a box into boxes of at most ``days_per_write`` days."""
    start = box.window.start
    while start < box.window.end:
        end = min(box.window.end, start + dt.timedelta(days=days_per_write))
        yield Box(Window(start, end), box.engines)
        start = end


def _scopes_of_box(box: Box, brand_engines: dict[str, tuple[str, ...]]) -> list[PartitionScope]:
    """Brands grouped by the engines of the box they are measured on: a brand's rows on an engine
    it is no longer measured on (history) are never deleted by a run that did not fetch them."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for brand_id, engines in sorted(brand_engines.items()):
        mine = tuple(e for e in box.engines if e in engines)
        if mine:
            groups[mine].append(brand_id)
    return [
        PartitionScope(tuple(ids), box.window.start, box.window.end, engines)
        for engines, ids in groups.items()
    ]


def _in_scope(spec: TableSpec, scope: PartitionScope) -> Callable[[pa.Table], pa.Table]:
    assert spec.date_column is not None
    box = Box(Window(scope.start, scope.end), scope.engines)
    brands = pa.array(list(scope.brand_ids), type=pa.string())

    def predicate(table: pa.Table) -> pa.Table:
        inside = select_box(table, spec.date_column or "", box)
        if inside.num_rows == 0:
            return inside
        return inside.filter(pc.fill_null(pc.is_in(inside[spec.brand_column], value_set=brands), False))

    return predicate


def land(
    warehouse: Warehouse,
    spec: TableSpec,
    outcome: FetchOutcome,
    run_id: str,
    *,
    days_per_write: int = DEFAULT_DAYS_PER_WRITE,
) -> list[WriteResult]:
    """Replace every fetched cell's rows, chunk by chunk; cells with no rows are emptied."""
    warehouse.ensure_table(spec)
    results: list[WriteResult] = []
    for box in outcome.plan.boxes:
        for chunk in write_chunks(box, days_per_write):
            for scope in _scopes_of_box(chunk, outcome.brand_engines):
                rows = concat(spec, outcome.spool.read(_in_scope(spec, scope)))
                results.append(warehouse.replace_partitions(spec, rows, scope, run_id))
    return results


def brand_engines(brands: list[dict[str, Any]], *, with_rollup: bool) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for brand in brands:
        engines = tuple(brand.get("engines") or ())
        out[str(brand["id"])] = (*engines, ALL) if with_rollup and engines else engines
    return out


def requests_beyond_plan(plan: Plan, stats: RequestStats) -> dict[str, int]:
    """Requests beyond one per planned call, by endpoint: further pages of paged calls, and retries."""
    planned = expected_requests(plan)
    return {
        endpoint: stats.requests_by_endpoint.get(endpoint, 0) - calls
        for endpoint, calls in planned.items()
        if stats.requests_by_endpoint.get(endpoint, 0) > calls
    }
