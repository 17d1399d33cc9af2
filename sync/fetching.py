"""Fetching a table, whoever runs it (Dagster-free).

A date x engine table is a :class:`PartitionedTable` (a planner and the fetch of one call):
:func:`fetch_partitioned` discovers the brands, plans, and spools the rows to disk (:mod:`sync.landing`
lands them). A snapshot table is a :class:`SnapshotTable`: one listing of the whole set.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from resources.api.client import VisibilityClient
from resources.api.endpoints import ENGINES_WITH_ALL, Endpoint
from resources.api.errors import NotFoundError
from resources.api.paging import WalkPosition
from resources.warehouse.contract import TableSpec
from sync.allocator import return_freed_memory
from sync.discovery import BrandScope, CitationTargets, Discovery, brand_inputs
from sync.landing import DEFAULT_DAYS_PER_WRITE, FetchOutcome
from sync.planning import ALL, Call, Cell, Plan, Planner
from sync.prefetch import StopSignal
from sync.resume import (
    CallJournal,
    JournalPart,
    Pieces,
    ResumePoint,
    ResumeStore,
    call_key,
    selection_id,
)
from sync.spool import DateSpool
from sync.transforms import TransformError, check_new_columns, concat, filter_cells

#: Rows of a paged call transformed at a time: about one page (a row's dict costs ten times its
#: Arrow form).
SLICE_ROWS = 1_000

#: ``fetch_one(client, call, walk)``: one call's rows as Arrow tables, in slices. ``walk``: where a
#: paged fetch starts, kept current (for the journal); a fetch of one answer ignores it.
FetchOne = Callable[[VisibilityClient, Call, WalkPosition], Iterator[pa.Table]]


@dataclass(frozen=True)
class PartitionedTable:
    """How one date x engine table is fetched: its planner (which calls), and one call's fetch."""

    spec: TableSpec
    #: the API endpoints its calls go to (the planner plans calls to these only)
    endpoints: tuple[Endpoint, ...]
    planner: Planner
    fetch_one: FetchOne
    engine_order: tuple[str, ...] = ENGINES_WITH_ALL
    needs_prompts: bool = False
    needs_competitors: bool = False
    #: upstream asset, for lineage only (its rows are read from the API, not from the warehouse)
    upstream: str | None = None
    #: metadata from the fetched rows beyond the counts (e.g. capped responses)
    notes: Callable[[DateSpool], dict[str, Any]] | None = None
    #: citation trends: plans a call per tracked page and topic (the run's ``CitationTargets``)
    needs_targets: bool = False
    #: checks of the table beyond those every table gets from its spec (``keys_unique``), by name
    #: (``assets/checks.py``, ``DECLARED_CHECKS``)
    checks: tuple[str, ...] = ()
    #: with ``no_empty_partitions``: which landed table says a cell had data, by the name of its rule
    #: (``resources/warehouse/queries.py``, ``EXPECTED_CELLS``)
    evidence: str | None = None


@contextmanager
def naming_source(table: PartitionedTable | SnapshotTable) -> Iterator[None]:
    """Transform errors raised within name the endpoint of ``table`` (its first): its fetch knows
    the endpoint, its transform does not."""
    try:
        yield
    except TransformError as exc:
        exc.name_endpoint(table.endpoints[0].key)
        raise


def fetch_partitioned(
    client: VisibilityClient,
    asset: PartitionedTable,
    cells: set[Cell],
    only: Sequence[str],
    on_progress: Callable[[str, int, int], None] | None = None,
    stop: StopSignal | None = None,
    discovery: Discovery | None = None,
    targets: CitationTargets | None = None,
    *,
    resume: ResumeStore | None = None,
) -> FetchOutcome:
    """Discover the brands, plan the run, and spool its rows.

    ``targets``: the run's tracked pages and topics, used by a table that ``needs_targets``.
    ``resume``: where the fetch journals its completed calls, and finds those of an earlier fetch of
    the same selection (:mod:`sync.resume`): only the other calls are asked."""
    started = time.monotonic()
    return_freed_memory()
    run_targets = targets if asset.needs_targets else None
    discovery = discovery or Discovery()
    scope = discovery.scope(client, only)  # the brands in scope, listed once per sync
    inputs = brand_inputs(
        client,
        scope,
        discovery,
        prompts=asset.needs_prompts,
        competitors=asset.needs_competitors,
        targets=run_targets,
    )
    plan = asset.planner(cells, inputs, asset.engine_order)
    assert asset.spec.date_column is not None
    spool = DateSpool.create(asset.spec.date_column, DEFAULT_DAYS_PER_WRITE, name=asset.spec.name)
    notes: dict[str, Any] = {}
    prompts_not_found: set[str] = set()
    journal = None
    try:
        if resume is not None:
            journal = resume.journal(
                selection_id(asset.spec, cells, only, run_targets, client, spool.days_per_bucket)
            )
        to_ask, points = _resumed(journal, plan, spool, notes)
        client.budget.allow_planned_calls(len(to_ask.calls), asset.spec.name)
        with naming_source(asset):
            not_found = fetch_to_spool(
                client,
                asset.spec,
                to_ask,
                asset.fetch_one,
                spool,
                on_progress,
                prompts_not_found,
                stop,
                journal,
                points,
            )
        scope.drop(not_found)
        spool.close()
        if journal is not None and journal.write_error is not None:
            # the rows are whole; a re-run after a kill would ask them again
            notes["resume_journal_failed"] = journal.write_error
    except BaseException:
        spool.remove()
        raise
    finally:
        if journal is not None:
            journal.close()  # kept on disk until the step landed every table (ResumeStore.finish)
    if asset.notes is not None:
        notes = {**asset.notes(spool), **notes}
    if prompts_not_found:
        notes["prompts_not_found"] = sorted(prompts_not_found)
    return FetchOutcome(
        plan=plan,
        spool=spool,
        brand_engines=brand_engines(scope.brands, with_rollup=asset.planner.with_rollup),
        out_of_scope=list(scope.out_of_scope),
        stats=client.stats,
        notes=notes,
        fetch_seconds=time.monotonic() - started,
    )


def _resumed(
    journal: CallJournal | None, plan: Plan, spool: DateSpool, notes: dict[str, Any]
) -> tuple[Plan, dict[str, ResumePoint]]:
    """The calls still to ask, and where the partly read ones resume: the journal's rows of an
    earlier fetch of the same selection go to the spool, and ``notes["resumed"]`` says how many."""
    if journal is None:
        return plan, {}
    done, tables, points = journal.load({call_key(c) for c in plan.calls})
    for part in tables:  # the journal's files become the spool's
        spool.adopt(part.bucket, part.path, part.num_rows)
    to_ask = dataclasses.replace(plan, calls=tuple(c for c in plan.calls if call_key(c) not in done))
    resumed = {
        "calls": len(plan.calls) - len(to_ask.calls),
        "calls_partly": len(points),
        "rows": sum(t.num_rows for t in tables),
    }
    if journal.dropped:
        resumed["entries_dropped"] = journal.dropped
    if resumed["calls"] or resumed["calls_partly"]:
        notes["resumed"] = resumed
    return to_ask, points


#: ``(client, scope, notes, run tags, discovery) -> rows``. A per-brand fetch whose listing of a brand
#: was truncated records it in ``notes["capped"]`` ({brand id: {rows, total_count}}): the rows absent
#: from a truncated listing may still exist, so those brands are upserted but never retired.
SnapshotFetch = Callable[
    [VisibilityClient, BrandScope, dict[str, Any], Mapping[str, str], Discovery], pa.Table
]


@dataclass(frozen=True)
class SnapshotTable:
    """How one snapshot table is listed.

    ``per_brand``: rows belong to brands, and rows of the listed brands that vanished are retired.
    Otherwise (``brands``) nothing is retired: a brand absent from the listing may be deleted or
    merely outside a brand-scoped key's reach (the service answers 404 for both), and a key must
    never touch brands it cannot see; ``last_seen_at`` says when a brand was last listed.
    """

    spec: TableSpec
    #: the API endpoints its listing reads (beyond the brand listing every sync makes)
    endpoints: tuple[Endpoint, ...]
    fetch_rows: SnapshotFetch
    per_brand: bool
    upstream: str | None = None
    #: checks of the table beyond those every table gets from its spec (``keys_unique``), by name
    #: (``assets/checks.py``, ``DECLARED_CHECKS``)
    checks: tuple[str, ...] = ()


#: Rows of several calls filtered and spooled together: Arrow's per-call costs would otherwise cost
#: more CPU than the few hundred rows most calls answer.
BATCH_ROWS = 20_000


#: A journalled fetch writes its completed calls at least this often, so a kill loses little.
JOURNAL_SECONDS = 1.0


class _CallBatch:
    """Tables of many calls, filtered to the run's cells and spooled once ``BATCH_ROWS`` are held.

    With a ``journal``, a flush writes the rows there, one file a spool bucket, and the spool links
    those files: the rows are written once. A journal that fails to write (a full disk) is dropped.
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

    def add_call(self, key: str, tables: list[pa.Table], parts: int = 0) -> None:
        """The (last) rows of one completed call, ``parts`` partial entries before."""
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
            self._keep(rows, lambda journal, pieces: journal.record_part(key, seq, pieces, start, cursor))

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._flushed_at = time.monotonic()
        if not self._tables and not self._keys:
            return
        tables, self._tables, self._rows = self._tables, [], 0
        keys, self._keys, parts, self._parts = self._keys, [], self._parts, {}
        self._keep(self.filtered(tables), lambda journal, pieces: journal.record(pieces, keys, parts))

    def _keep(self, rows: pa.Table, record: Callable[[CallJournal, Pieces], list[JournalPart]]) -> None:
        """Journal ``rows`` split by spool bucket (``record``) and spool the journal's files; the rows
        themselves without a journal, or when it cannot write (it is then dropped for the rest of the
        fetch)."""
        journal = self._journal
        if journal is not None:
            try:
                written = record(journal, self._spool.split(rows))
            except OSError as exc:
                journal.write_error = str(exc)
                self._journal = None
            else:
                for part in written:
                    self._spool.adopt(part.bucket, part.path, part.num_rows)
                return
        self._spool.append(rows)

    def filtered(self, tables: list[pa.Table]) -> pa.Table:
        assert self._spec.date_column is not None
        return filter_cells(concat(self._spec, tables), self._spec.date_column, self._cells)


def fetch_to_spool(
    client: VisibilityClient,
    spec: TableSpec,
    plan: Plan,
    fetch_one: FetchOne,
    spool: DateSpool,
    on_progress: Callable[[str, int, int], None] | None = None,
    prompts_not_found: set[str] | None = None,
    stop: StopSignal | None = None,
    journal: CallJournal | None = None,
    resume_points: dict[str, ResumePoint] | None = None,
) -> set[str]:
    """Run the plan's calls concurrently, spooling (and journalling) the rows of the run's cells.

    Returns the brands whose calls answered 404 (landing writes none of their rows). A prompt that
    answered 404 is skipped alone (``prompts_not_found``) unless its brand answers 404 too. More
    unknown fields than ``client.max_new_columns`` stop the fetch (``TooManyFieldsError``)."""
    assert spec.date_column is not None
    batch = _CallBatch(spec, spool, plan.cells, journal)
    columns: set[str] = set()
    columns_lock = threading.Lock()

    def work(call: Call) -> tuple[Call, bool]:
        """One call's rows, from where an earlier fetch stopped; a paged call's rows so far are
        handed on (journalled) every ``JOURNAL_SECONDS`` too, so memory holds about a second's."""
        if stop is not None:  # the run stopped: start no further call (the running ones end)
            stop.raise_if_set()
        key = call_key(call)
        point = (resume_points or {}).get(key)
        position = WalkPosition(start_cursor=point.cursor if point else None)
        parts, start = (point.parts, point.cursor) if point else (0, None)
        tables: list[pa.Table] = []
        since = time.monotonic()
        try:
            for table in fetch_one(client, call, position):
                with columns_lock:
                    columns.update(table.column_names)
                    check_new_columns(spec, columns, client.max_new_columns)
                tables.append(table)
                cursor, position.emitted = position.emitted, None
                if cursor is not None and time.monotonic() - since >= JOURNAL_SECONDS:
                    batch.add_part(key, parts, tables, start, cursor)
                    tables, parts, start, since = [], parts + 1, cursor, time.monotonic()
        except NotFoundError:
            return call, False
        batch.add_call(key, tables, parts)
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
            on_progress(spec.name, done, len(plan.calls))
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
    rows: Iterable[dict[str, Any]], walk: WalkPosition, size: int = SLICE_ROWS
) -> Iterator[list[dict[str, Any]]]:
    """A paged iterator's rows in lists of about ``size``, never empty. A list ends where a page
    ends and records that page's cursor as ``walk.emitted``, so the rows before it can be
    journalled with where the walk continues."""
    batch: list[dict[str, Any]] = []
    pages = walk.pages
    for row in rows:
        if walk.pages != pages:  # the rows so far end a page: cut here if enough are held
            pages = walk.pages
            if len(batch) >= size // 2:
                walk.emitted = walk.cursor
                yield batch
                batch = []
        batch.append(row)
        if len(batch) >= 4 * size:  # a page larger than this: cut mid-page (not resumable there)
            yield batch
            batch = []
    if batch:
        walk.emitted = None  # the call's last rows: completed with it
        yield batch


def brand_engines(brands: list[dict[str, Any]], *, with_rollup: bool) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for brand in brands:
        engines = tuple(brand.get("engines") or ())
        out[str(brand["id"])] = (*engines, ALL) if with_rollup and engines else engines
    return out
