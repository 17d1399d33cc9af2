"""Fetching a plan into the spool, and landing the spool in write scopes (Dagster-free).

Writes replace one box of cells at a time (contiguous dates x engines, for the brands that were
fetched and are measured on those engines), chunked into at most ``days_per_write`` days so that
memory stays flat for long backfills. Every write of one table's landing is in ONE warehouse
transaction (:meth:`~resources.warehouse.base.Warehouse.replace_partitions_together`): a failure in
any chunk leaves the whole table as it was, and a re-run replaces it again.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from resources.api.errors import NotFoundError
from resources.api.paging import WalkPosition
from resources.api.stats import RequestStats
from resources.warehouse.base import Warehouse
from resources.warehouse.contract import PartitionScope, PartitionWrite, TableSpec, WriteResult
from sync.planning import ALL, Box, Call, Cell, Plan, Window, expected_requests
from sync.prefetch import StopSignal
from sync.resume import CallJournal, JournalPart, ResumePoint, call_key
from sync.spool import DateSpool, bucket_windows
from sync.transforms import check_new_columns, concat, filter_cells, keep_rows, select_box

if TYPE_CHECKING:  # landing needs no HTTP client
    from resources.api.client import VisibilityClient

#: Rows of a paged call transformed at a time: about one page. Each of the fetch's threads holds
#: its slice as Python objects (a row's dict costs ten times its Arrow form); the calls' tables are
#: then gathered (``BATCH_ROWS``) before Arrow's per-table costs are paid.
SLICE_ROWS = 1_000
#: Longest date span of one write (and a spool bucket's): bounds memory (rows of one chunk) whatever
#: the run's length. 3 rather than 7: a smaller chunk lowers a landing's peak and is no slower
#: (bench/RESULTS.md, *Memory of the process tree*).
DEFAULT_DAYS_PER_WRITE = 3

#: One call's rows as Arrow tables, yielded in slices so a long paged call never sits in memory whole:
#: ``fetch_one(client, call, walk)``. ``walk`` (None but in a resumable fetch) is the paging walk's
#: position (:class:`~resources.api.paging.WalkPosition`): a paged fetch starts there and keeps it
#: current; a fetch of one answer ignores it.
FetchOne = Callable[["VisibilityClient", Call, WalkPosition | None], Iterator[pa.Table]]


@dataclass
class FetchOutcome:
    """What a fetch hands its landing."""

    table: str
    plan: Plan
    spool: DateSpool
    #: brand id -> engines its rows land under (measured engines, plus ``all`` for rollups)
    brand_engines: dict[str, tuple[str, ...]]
    out_of_scope: list[str]
    stats: RequestStats
    notes: dict[str, Any] = field(default_factory=dict)
    #: how long discovery, planning and fetching took
    fetch_seconds: float = 0.0


#: Rows of several calls filtered and spooled together: most calls answer a few hundred rows, and
#: Arrow's per-call costs (a filter, a bucket split, a concatenation) would then cost more CPU than
#: the rows themselves (bench/RESULTS.md, *CPU per landed row*).
BATCH_ROWS = 20_000


#: A journalled fetch writes its completed calls at least this often, so a kill loses little.
JOURNAL_SECONDS = 1.0


#: Journals rows split by spool bucket (``days`` days a bucket); returns the files written.
_Record = Callable[[list[tuple[int, pa.Table]], int], list[JournalPart]]


class _CallBatch:
    """Tables of many calls, filtered to the run's cells and spooled once ``BATCH_ROWS`` are held.

    With a ``journal`` (:mod:`sync.resume`), a call's rows are added only once the call completed,
    and each flush (``BATCH_ROWS`` or ``JOURNAL_SECONDS``) records them under the calls' keys, one
    file a spool bucket: the spool takes those files (:meth:`DateSpool.adopt`), so the rows are
    written once. Should the journal fail to write (its disk full), the fetch goes on without it.
    """

    def __init__(
        self,
        spec: TableSpec,
        spool: DateSpool,
        cells: frozenset[Cell] | set[Cell],
        journal: CallJournal | None = None,
    ) -> None:
        assert spec.date_column is not None
        self._spec = spec
        self._spool = spool
        self._cells = cells
        self._journal = journal
        self._lock = threading.Lock()
        self._tables: list[pa.Table] = []
        self._keys: list[str] = []
        self._parts: dict[str, int] = {}
        self._rows = 0
        self._flushed_at = time.monotonic()

    def add(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        with self._lock:
            self._tables.append(table)
            self._rows += table.num_rows
            if self._rows >= BATCH_ROWS:
                self._flush_locked()

    def add_call(self, key: str, tables: list[pa.Table], parts: int = 0) -> None:
        """The (last) rows of one completed call (journalled fetch), ``parts`` partial entries before."""
        with self._lock:
            self._tables.extend(t for t in tables if t.num_rows)
            self._rows += sum(t.num_rows for t in tables)
            self._keys.append(key)
            self._parts[key] = parts
            if self._rows >= BATCH_ROWS or time.monotonic() - self._flushed_at >= JOURNAL_SECONDS:
                self._flush_locked()

    def add_part(self, key: str, seq: int, tables: list[pa.Table], start: str | None, cursor: str) -> None:
        """The rows a paged call read so far (from cursor ``start`` to ``cursor``): journalled at once
        as its ``seq``-th part, and spooled."""
        rows = self.filtered(tables)
        with self._lock:
            journal = self._journal
            if journal is None:
                self._spool.append(rows)
                return
            self._keep(rows, lambda pieces, d: journal.record_part(key, seq, pieces, start, cursor, days=d))

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._flushed_at = time.monotonic()
        if not self._tables and not self._keys:
            return
        tables, self._tables, self._rows = self._tables, [], 0
        keys, self._keys, parts, self._parts = self._keys, [], self._parts, {}
        assert self._spec.date_column is not None
        rows = filter_cells(concat(self._spec, tables), self._spec.date_column, self._cells)
        journal = self._journal
        if journal is None or not keys:
            self._spool.append(rows)
            return
        self._keep(rows, lambda pieces, days: journal.record(pieces, keys, parts, days=days))

    def _keep(self, rows: pa.Table, record: _Record) -> None:
        """Journal ``rows`` (``record``) and spool the journal's files; the rows themselves when the
        journal cannot write (it is then dropped for the rest of the fetch)."""
        assert self._journal is not None
        try:
            written = record(self._spool.split(rows), self._spool.days_per_bucket)
        except OSError as exc:
            self._journal.write_error = str(exc)
            self._journal = None
            self._spool.append(rows)
            return
        for part in written:
            assert part.path is not None and part.bucket is not None
            self._spool.adopt(part.bucket, part.path, part.num_rows)

    def filtered(self, tables: list[pa.Table]) -> pa.Table:
        assert self._spec.date_column is not None
        return filter_cells(concat(self._spec, tables), self._spec.date_column, self._cells)


def fetch_to_spool(
    client: VisibilityClient,
    spec: TableSpec,
    plan: Plan,
    fetch_one: FetchOne,
    spool: DateSpool,
    on_progress: Callable[[int, int], None] | None = None,
    prompts_not_found: set[str] | None = None,
    stop: StopSignal | None = None,
    journal: CallJournal | None = None,
    resume_points: dict[str, ResumePoint] | None = None,
) -> set[str]:
    """Run the plan's calls concurrently, spooling the rows of the run's cells as they arrive.

    Returns the brands whose calls answered 404: their rows (even those spooled before the 404) are
    never written, because landing only writes the brands that stayed in scope. A 404 on a
    prompt-level call (a prompt deleted between listing and fetching) skips only that prompt: its id
    goes to ``prompts_not_found`` (when given; the caller warns). The brand then leaves the
    scope only if the brand itself answers 404 too (one extra request per such brand), so a brand
    removed mid-run never has its cells emptied. ``stop`` (set when the run stops) ends the fetch early
    with ``FetchCancelled``. ``journal``: each completed call's rows are also kept there, so a
    re-run of a killed or failed sync asks only the other calls (:mod:`sync.resume`). More unknown
    fields over all calls than ``client.max_new_columns`` stop the fetch (``TooManyFieldsError``),
    before a page beyond them is spooled.
    """
    assert spec.date_column is not None
    batch = _CallBatch(spec, spool, plan.cells, journal)
    columns: set[str] = set()
    columns_lock = threading.Lock()

    def fetch_bounded(call: Call, walk: WalkPosition | None = None) -> Iterator[pa.Table]:
        for table in fetch_one(client, call, walk):
            with columns_lock:
                columns.update(table.column_names)
                check_new_columns(spec, columns, client.max_new_columns)
            yield table

    def journalled(call: Call) -> None:
        """One call, its rows kept in ``journal``: a paged call's every ``JOURNAL_SECONDS`` too."""
        assert journal is not None
        key = call_key(call)
        point = (resume_points or {}).get(key)
        position = WalkPosition(start_cursor=point.cursor if point else None)
        parts, start = (point.parts, point.cursor) if point else (0, None)
        tables: list[pa.Table] = []
        since = time.monotonic()
        for table in fetch_bounded(call, position):
            tables.append(table)
            cursor, position.emitted = position.emitted, None
            if cursor is not None and time.monotonic() - since >= JOURNAL_SECONDS:
                batch.add_part(key, parts, tables, start, cursor)
                tables, parts, start, since = [], parts + 1, cursor, time.monotonic()
        batch.add_call(key, tables, parts)

    def work(call: Call) -> tuple[Call, bool]:
        if stop is not None:  # the run stopped: start no further call (the running ones end)
            stop.raise_if_set()
        try:
            if journal is None:
                for table in fetch_bounded(call):
                    batch.add(table)
            else:
                journalled(call)
        except NotFoundError:
            return call, False
        return call, True

    not_found: set[str] = set()
    prompt_misses: dict[str, set[str]] = defaultdict(set)
    for done, (call, found) in enumerate(client.map_concurrent(work, plan.calls), start=1):
        if not found:
            if call.prompt_id is None:
                not_found.add(call.brand_id)
            else:
                prompt_misses[call.brand_id].add(call.prompt_id)
        if on_progress is not None:
            on_progress(done, len(plan.calls))
    batch.flush()
    _resolve_prompt_misses(client, prompt_misses, not_found, prompts_not_found)
    return not_found


def _resolve_prompt_misses(
    client: VisibilityClient,
    prompt_misses: dict[str, set[str]],
    not_found: set[str],
    prompts_not_found: set[str] | None,
) -> None:
    """Prompts that answered 404: their brand leaves the scope (``not_found``) only if it answers
    404 too; otherwise only the prompts are skipped (``prompts_not_found``)."""
    for brand_id, prompt_ids in sorted(prompt_misses.items()):
        if brand_id in not_found:
            continue
        try:
            client.get_brand(brand_id)
        except NotFoundError:
            not_found.add(brand_id)
            continue
        if prompts_not_found is not None:
            prompts_not_found.update(prompt_ids)


def slices(
    rows: Iterable[dict[str, Any]], size: int = SLICE_ROWS, *, walk: WalkPosition | None = None
) -> Iterator[list[dict[str, Any]]]:
    """A paged iterator's rows in lists of at most ``size`` (the last may be shorter, never empty).

    Under a resumable fetch (``walk``, the position the rows' walk keeps: :mod:`sync.resume`) a list
    ends where a page ends, once it holds at least half of ``size``, and records that page's position
    as ``emitted``: the rows before it can be journalled with the cursor that continues the walk
    after them.
    """
    if walk is not None:
        yield from _page_slices(rows, size, walk)
        return
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _page_slices(
    rows: Iterable[dict[str, Any]], size: int, position: WalkPosition
) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    pages = position.pages
    for row in rows:
        if position.pages != pages:  # the rows so far end a page: cut here if enough are held
            pages = position.pages
            if len(batch) >= size // 2:
                position.emitted, position.emitted_pages = position.cursor, pages
                yield batch
                batch = []
        batch.append(row)
        if len(batch) >= 4 * size:  # a page larger than this: cut mid-page (not resumable there)
            position.emitted_pages = -1
            yield batch
            batch = []
    if batch:
        position.emitted, position.emitted_pages = None, -1  # the call's last rows: completed with it
        yield batch


def write_chunks(box: Box, days_per_write: int) -> Iterator[Box]:
    """Split a box at the spool's bucket boundaries (at most ``days_per_write`` days each)."""
    for start, end in bucket_windows(box.window.start, box.window.end, days_per_write):
        yield Box(Window(start, end), box.engines)


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
        for box in self.outcome.plan.boxes:
            for chunk in write_chunks(box, spool.days_per_bucket):
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
    """Replace every fetched cell's rows, all in one transaction; cells with no rows are emptied.

    The writes (one per chunk and group of brands sharing engines) stream from the spool
    (:class:`SpooledWrites`) into one :meth:`~resources.warehouse.base.Warehouse.replace_partitions_together`:
    the table's landing commits whole or not at all, and holds one chunk's rows at a time.
    """
    assert spec.date_column is not None
    with warehouse.session():  # one connection (DuckDB: one open of the file) for both
        warehouse.ensure_table(spec)
        return warehouse.replace_partitions_together(spec, SpooledWrites(spec, outcome), run_id)


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
