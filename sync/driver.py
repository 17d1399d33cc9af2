"""A sync's orchestration, whoever runs it (Dagster-free): fetch each table, land it, say what happened.

One event per table, :class:`TableLanded` or :class:`TableFailed`, which the Dagster steps
(``assets/builders.py``) translate. A failure every later table would repeat (its ``failure_kind``:
a refused key, an unreachable service, a stop) ends the sync; any other fails its table only.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, closing, suppress
from dataclasses import dataclass, field
from logging import Logger
from typing import Any, Protocol

import pyarrow as pa

from resources.api.client import VisibilityClient
from resources.api.stats import RequestStats
from resources.failures import failure_kind
from resources.warehouse.base import Warehouse
from resources.warehouse.contract import SnapshotScope, TableSpec, WriteResult
from resources.warehouse.handoffs import Handoff
from resources.warehouse.urls import warehouse_for
from sync import catalog, transforms
from sync.allocator import return_freed_memory
from sync.discovery import BrandScope, CitationTargets, Discovery
from sync.fetching import PartitionedTable, SnapshotTable, fetch_partitioned, naming_source
from sync.handoff import BackfillHandoff
from sync.head_start import HeadStart, Selection
from sync.landing import FetchOutcome, land, requests_beyond_plan
from sync.planning import ALL, Cell, expected_requests
from sync.prefetch import StopSignal, fetch_ahead
from sync.progress import Listener
from sync.resume import ResumeStore
from sync.transforms import check_new_columns


class Api(Protocol):
    """The service as the driver uses it: new clients sharing one budget, and a stop switch."""

    def get_client(self) -> VisibilityClient: ...
    def cancel(self) -> None: ...


OpenWarehouse = Callable[[], AbstractContextManager[Warehouse]]


@dataclass(frozen=True)
class TableLanded:
    """A table landed: its metadata (JSON-ready) and, for a date x engine table, the cells written.

    ``warehouse``: a snapshot table's open session, still open while the event is handled, so that
    its checks share the upsert's connection (one open of a DuckDB file).
    """

    table: str
    metadata: dict[str, Any]
    cells: frozenset[Cell] = frozenset()
    warehouse: Warehouse | None = None


@dataclass(frozen=True)
class TableFailed:
    """A table not synced (it keeps its previous rows); the sync goes on with the next table."""

    table: str
    error: BaseException


SyncEvent = TableLanded | TableFailed


class SyncFailed(Exception):
    """Tables of a sync that could not be synced (the others were, and are reported)."""


def raise_failures(events: Sequence[SyncEvent]) -> None:
    """Fail with the one failure of the events (its own class, for its exit code), or all of them,
    caused by the one whose kind has the highest exit code (which ``SyncFailed``'s kind is then:
    five tables past the retry deadline exit 4, as one does)."""
    failures = {e.table: e.error for e in events if isinstance(e, TableFailed)}
    if len(failures) == 1:
        raise next(iter(failures.values()))
    if failures:
        worst = max(failures.values(), key=lambda error: failure_kind(error).exit_code)
        detail = "; ".join(f"{table}: {type(exc).__name__}: {exc}" for table, exc in failures.items())
        raise SyncFailed(f"sync failed for {', '.join(failures)} ({detail})") from worst


# ---------------------------------------------------------------------------------------------
# date x engine tables


@dataclass
class DailyRequest:
    """What one run of the date x engine tables is asked to land, and the backfill it belongs to."""

    run_id: str
    cells: set[Cell]
    only: Sequence[str]
    discovery: Discovery
    #: the run's citation targets (the settings' or its config's; None: none)
    citation_targets: CitationTargets | None = None
    #: the backfill's handoffs (None: not a backfill's run)
    handoff: BackfillHandoff | None = None
    #: per table, the cells of the whole backfill this run belongs to
    backfill_cells: dict[str, set[Cell]] = field(default_factory=dict)
    #: where fetches keep what they fetched until every table landed (a re-run resumes from it)
    resume: ResumeStore | None = None
    #: the fetches the command line started before this run (:mod:`sync.head_start`), if any
    fetched_ahead: HeadStart | None = None

    def compares_totals(self) -> bool:
        """Of a backfill's runs, only the one landing its newest ``all`` cell asks the API for totals
        (the others would ask the same questions again)."""
        rollup = [c for c in self.backfill_cells.get("competitor_trends", ()) if c[1] == ALL]
        return not rollup or max(rollup) in self.cells


@dataclass
class _Fetched:
    """A fetch ready to land, and what to do once it landed (its metadata) or was discarded (None);
    or, with nothing to land, the table's event (its fetch failed, or another run landed it)."""

    outcome: FetchOutcome | None
    release: Callable[[dict[str, Any] | None], None] = lambda metadata: None
    event: SyncEvent | None = None


def sync_daily(
    tables: Sequence[PartitionedTable],
    request: DailyRequest,
    api: Api,
    warehouse_config: Mapping[str, Any],
    log: Logger,
    on_progress: Listener | None = None,
) -> Iterator[SyncEvent]:
    """Fetch the tables in order while landing the one fetched before; one event per table.

    Only the last table's landing is not hidden behind a fetch, so list the longest fetch last.
    """
    return_freed_memory()
    fetch = _DailyFetch(request, api, log, on_progress)
    fetched = fetch_ahead(tables, fetch, discard=lambda f: f.release(None), on_stop=api.cancel)
    all_landed = False
    try:
        with closing(fetched):
            failed = False
            for table, item in fetched:
                event = _land_daily(table, item, request, warehouse_config, log)
                failed = failed or isinstance(event, TableFailed)
                yield event
            all_landed = not failed
    finally:
        if request.resume is not None and all_landed:  # else kept on disk for a re-run of the sync
            request.resume.finish()


def _land_daily(
    table: PartitionedTable,
    item: _Fetched,
    request: DailyRequest,
    warehouse_config: Mapping[str, Any],
    log: Logger,
) -> SyncEvent:
    name = table.spec.name
    if item.outcome is None:
        assert item.event is not None
        return item.event
    started = time.monotonic()
    try:
        with warehouse_for(warehouse_config, landing=True) as warehouse:
            results = land(warehouse, table.spec, item.outcome, request.run_id)
    except Exception as exc:  # the other tables still land; the sync fails at the end
        log.error(f"{name}: landing failed ({exc}); the table keeps its previous rows")
        item.release(None)
        return TableFailed(name, exc)
    metadata = daily_metadata(item.outcome, results, time.monotonic() - started)
    item.release(metadata)
    return TableLanded(name, metadata, frozenset(request.cells))


def landed_metadata(
    results: Sequence[WriteResult], requests: RequestStats, out_of_scope: Sequence[str] = ()
) -> dict[str, Any]:
    """What a sync did to one table, as its materialization says (JSON-ready values): the rows written
    and the requests made. The command line's summary reads them back (``pipelines/cli.py``)."""
    return {
        "rows_landed": sum(r.rows_written for r in results),
        "rows_replaced": sum(r.rows_deleted for r in results),
        "writes": len(results),
        "columns_added": sorted({c for r in results for c in r.columns_added}),
        **_request_metadata(requests),
        "brands_out_of_scope": sorted(out_of_scope),
    }


def _request_metadata(requests: RequestStats) -> dict[str, Any]:
    stats = requests.to_metadata()
    return {
        "requests_total": requests.total_requests,
        "requests_by_endpoint": stats["requests_by_endpoint"],
        "retries": requests.total_retries,
        "retries_by_cause": stats["retries_by_cause"],
        "wait_seconds": stats["wait_seconds"],
        "errors_by_code": stats["errors_by_code"],
        "unknown_engine_rows": stats["unknown_engine_rows"],
    }


def recorded_metadata(landed: Handoff, cells: set[Cell]) -> dict[str, Any]:
    """A table another run of the backfill landed: its landing's summary, and 0 requests of this run."""
    return {
        **landed.metadata,
        **_request_metadata(RequestStats()),
        "fetch_seconds": 0.0,
        "land_seconds": 0.0,
        "requests_beyond_plan": 0,
        "partitions": len(cells),
        "landed_by_run": landed.claimant,
    }


class _DailyFetch:
    """One table's fetch for :func:`fetch_ahead`: its own cells, or its backfill's (:mod:`sync.handoff`).

    A failure that the next tables would repeat is raised (it ends the sync); any other is handed
    to the landing side as the table's failure, and the next table is fetched.
    """

    def __init__(self, request: DailyRequest, api: Api, log: Logger, on_progress: Listener | None) -> None:
        self.request, self.api, self.log, self.on_progress = request, api, log, on_progress

    def __call__(self, table: PartitionedTable, stop: StopSignal) -> _Fetched:
        try:
            return self._fetch(table, stop)
        except Exception as exc:
            if failure_kind(exc).stops_the_sync:
                raise
            self.log.error(f"{table.spec.name}: sync failed ({exc}); the table keeps its previous rows")
            return _Fetched(None, event=TableFailed(table.spec.name, exc))

    def _fetch(self, table: PartitionedTable, stop: StopSignal) -> _Fetched:
        name, request, handoff = table.spec.name, self.request, self.request.handoff
        backfill = request.backfill_cells.get(name)
        if handoff is None or not backfill:
            outcome = self._take_ahead(table, stop) or self._fetch_own(table, stop, request.cells)
            return _Fetched(outcome, lambda metadata: outcome.spool.remove())
        landed = handoff.take(name, request.cells, stop)
        if landed is not None:
            self.log.info(f"{name}: landed by run {landed.claimant} of this backfill; no request")
            recorded = recorded_metadata(landed, request.cells)
            return _Fetched(None, event=TableLanded(name, recorded, frozenset(request.cells)))
        cells = request.cells | backfill
        try:
            outcome = self._fetch_own(table, stop, cells)
        except BaseException:
            with suppress(Exception):  # the fetch's own error is the one to tell
                handoff.release(name)
            raise

        def release(metadata: dict[str, Any] | None) -> None:
            outcome.spool.remove()
            try:
                if metadata is None:
                    handoff.release(name)
                elif not handoff.landed(name, cells, metadata):
                    self.log.warning(f"{name}: landed, but this run no longer held the backfill's claim")
            except Exception as exc:  # the rows are landed (or not) either way
                self.log.warning(
                    f"{name}: the backfill's handoff could not be updated ({exc}); the other runs "
                    "take the table over once this run has ended"
                )

        outcome.notes["landed_for_backfill"] = f"{len(cells)} partitions, for every run of the backfill"
        return _Fetched(outcome, release)

    def _take_ahead(self, table: PartitionedTable, stop: StopSignal) -> FetchOutcome | None:
        """The table's fetch made for exactly this run before it started (the command line's), if any."""
        request, name = self.request, table.spec.name
        if request.fetched_ahead is None:
            return None
        selection = Selection(
            frozenset(request.cells),
            tuple(request.only),
            request.citation_targets,
            request.resume.root if request.resume is not None else None,
        )
        outcome = request.fetched_ahead.take(name, selection, request.resume, stop)
        if outcome is not None:
            self.log.info(f"{name}: fetched while the command line started (sync/head_start.py)")
            _log_fetch(self.log, name, outcome)
        return outcome

    def _fetch_own(self, table: PartitionedTable, stop: StopSignal, cells: set[Cell]) -> FetchOutcome:
        request = self.request
        with self.api.get_client() as client:  # own counters; the rate budget is shared
            outcome = fetch_partitioned(
                client,
                table,
                cells,
                request.only,
                self.on_progress,
                stop,
                request.discovery,
                request.citation_targets,
                resume=request.resume,
            )
        _log_fetch(self.log, table.spec.name, outcome)
        return outcome


def _log_fetch(log: Logger, name: str, outcome: FetchOutcome) -> None:
    for brand_id in outcome.out_of_scope:
        log.warning(f"{name}: brand {brand_id} is out of this key's scope (404); skipped, its rows untouched")
    for prompt_id in outcome.notes.get("prompts_not_found", []):
        log.warning(
            f"{name}: prompt {prompt_id} answered 404 (deleted during the run?); skipped, "
            "its brand's other prompts land"
        )
    if outcome.plan.skipped:
        log.info(f"{name}: not fetched, brand not measured on the engine: {outcome.plan.skipped}")
    log.info(
        f"{name}: {len(outcome.plan.calls)} calls planned, {outcome.stats.total_requests} requests made, "
        f"{outcome.spool.rows} rows fetched"
    )


def daily_metadata(
    outcome: FetchOutcome, results: Sequence[WriteResult], land_seconds: float
) -> dict[str, Any]:
    """What a date x engine table's materialization says (JSON-ready values)."""
    window = outcome.plan.window
    return {
        "fetch_seconds": round(outcome.fetch_seconds, 2),
        "land_seconds": round(land_seconds, 2),
        **landed_metadata(results, outcome.stats, outcome.out_of_scope),
        "calls_planned": expected_requests(outcome.plan),
        "requests_beyond_plan": requests_beyond_plan(outcome.plan, outcome.stats),
        "window_start": window.start.isoformat() if window else "",
        "window_end_exclusive": window.end.isoformat() if window else "",
        "partitions": len(outcome.plan.cells),
        "brands_landed": sorted(outcome.brand_engines),
        "engines_not_measured": outcome.plan.skipped,
        **outcome.notes,
    }


# ---------------------------------------------------------------------------------------------
# snapshot tables


@dataclass
class _Listing:
    """One snapshot table as listed."""

    rows: pa.Table
    scope: BrandScope
    notes: dict[str, Any]
    stats: RequestStats


def sync_snapshots(
    tables: Sequence[SnapshotTable],
    run_id: str,
    only: Sequence[str],
    run_tags: Mapping[str, str],
    discovery: Discovery,
    api: Api,
    open_warehouse: OpenWarehouse,
    log: Logger,
    empty_tables: Sequence[TableSpec] = (),
) -> Iterator[SyncEvent]:
    """List each table (the next while this one lands) and upsert it; one event per table.

    A failure every later table would repeat ends the listings: each table not synced then fails.
    ``empty_tables`` (those a sensor lands) are then created if missing, so that every table dbt's
    sources and BI tools name exists from the first sync on.
    """
    return_freed_memory()  # before the listings' first Arrow buffer (mimalloc would keep it)

    def fetch(table: SnapshotTable, stop: StopSignal) -> _Listing | TableFailed:
        notes: dict[str, Any] = {}
        try:
            with api.get_client() as client:
                scope = discovery.scope(client, only)
                with naming_source(table):
                    rows = table.fetch_rows(client, scope, notes, run_tags, discovery)
                    check_new_columns(table.spec, rows.column_names, client.max_new_columns)
                return _Listing(rows, scope, notes, client.stats)
        except Exception as exc:
            if failure_kind(exc).stops_the_sync:
                raise
            return TableFailed(table.spec.name, exc)

    # a stop while a listing waits on the API (a retry, the rate limit) cancels the wait
    fetched = fetch_ahead(tables, fetch, discard=lambda _: None, on_stop=api.cancel)
    with open_warehouse() as warehouse, closing(fetched):
        try:
            failed = False
            for table, listing in fetched:
                for event in _upsert_listing(table, listing, run_id, warehouse, log):
                    failed = failed or isinstance(event, TableFailed)
                    yield event
            for spec in () if failed else empty_tables:  # a failed step changes nothing it need not
                warehouse.ensure_table(spec)
        except Exception as exc:  # a refused key or an unreachable service: no later table can sync
            log.error(f"snapshots stopped ({exc}); the tables not synced keep their previous rows")
            yield TableFailed("snapshots", exc)


def _upsert_listing(
    table: SnapshotTable, listing: _Listing | TableFailed, run_id: str, warehouse: Warehouse, log: Logger
) -> Iterator[SyncEvent]:
    spec = table.spec
    if isinstance(listing, TableFailed):
        log.error(f"{spec.name}: sync failed ({listing.error}); the table keeps its previous rows")
        yield listing
        return
    for brand_id in listing.scope.out_of_scope:
        log.warning(f"{spec.name}: brand {brand_id} is out of this key's scope (404); skipped")
    retire = retire_scope(table, listing.scope, listing.notes, log)
    # the upsert and the table's checks share one connection (one open of a file)
    with warehouse.session():
        try:
            warehouse.ensure_table(spec)
            result = warehouse.upsert_snapshot(spec, listing.rows, run_id, retire)
        except Exception as exc:
            if failure_kind(exc).stops_the_sync:
                raise
            log.error(f"{spec.name}: sync failed ({exc}); the table keeps its previous rows")
            yield TableFailed(spec.name, exc)
            return
        yield TableLanded(
            spec.name,
            {
                **landed_metadata([result], listing.stats, listing.scope.out_of_scope),
                "rows_retired": result.rows_deleted,
                "snapshot_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "dagster/row_count": listing.rows.num_rows,
                **listing.notes,
            },
            warehouse=warehouse,
        )


def retire_scope(
    table: SnapshotTable, scope: BrandScope, notes: dict[str, Any], log: Logger
) -> SnapshotScope | None:
    """The brands whose vanished rows a listing retires: none for a truncated (capped) listing."""
    if not table.per_brand:
        return None
    capped = set(notes.get("capped") or {})
    retired = tuple(b for b in scope.brand_ids if b not in capped)
    if capped:
        notes["brands_not_retired"] = sorted(capped & set(scope.brand_ids))
        log.warning(
            f"{table.spec.name}: listing truncated (capped) for brands {sorted(capped)}; their rows are "
            "upserted only, none retired"
        )
    return SnapshotScope(table.spec.brand_column, retired) if retired else None


def land_listed(
    discovery: Discovery,
    only: Sequence[str],
    run_id: str,
    open_warehouse: OpenWarehouse,
    log: Logger,
    empty_tables: Sequence[TableSpec] = (),
) -> Iterator[TableLanded]:
    """Upsert the brands, and the prompts and tracked competitors, the daily tables listed (no request),
    and create ``empty_tables`` (the snapshot tables no daily table lists) if missing.

    For a run with no snapshot step: a backfill of the daily group alone would otherwise leave a
    fresh warehouse without the tables the views, the report and dbt's sources join to
    (docs/OPERATIONS.md, "Backfilling the daily group alone").
    """
    scope, listings = discovery.listed(only)
    if scope is None:
        return
    with naming_source(catalog.BRANDS):
        listed = [(catalog.BRANDS, transforms.rows_to_table(catalog.BRANDS.spec, scope.brands))]
    for table in (catalog.PROMPTS, catalog.TRACKED_COMPETITORS):
        if table.spec.name in listings:
            with naming_source(table):
                listed.append((table, transforms.per_brand_table(table.spec, listings[table.spec.name])))
    with open_warehouse() as warehouse, warehouse.session():
        for spec in empty_tables:
            warehouse.ensure_table(spec)
        for table, rows in listed:
            warehouse.ensure_table(table.spec)
            result = warehouse.upsert_snapshot(table.spec, rows, run_id, retire_scope(table, scope, {}, log))
            log.info(f"{table.spec.name}: {rows.num_rows} rows as listed by this sync's daily tables")
            yield TableLanded(
                table.spec.name,
                {
                    "rows_written": result.rows_written,
                    "rows_retired": result.rows_deleted,
                    "dagster/row_count": rows.num_rows,
                    "landed_by": "sync_daily: the run synced no snapshot step; these are the listings "
                    "its daily tables made (no extra request)",
                },
            )
