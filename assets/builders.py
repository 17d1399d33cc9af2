"""Asset factories: one step per kind of table, so a sync is two steps, not one per table.

* Snapshots (``sync_snapshots``): brands, topics, prompts, tracked competitors and generations in
  one step of the ``visibility_api`` pool. The brand listing, prompts and competitors are listed
  once per sync (:class:`assets.discovery.Discovery`) and reused by the partitioned step.
* Partitioned tables (``sync_daily``): every date x engine table in one step of the
  ``visibility_api`` pool. It fetches the tables back to back in a background thread and lands each
  (from its on-disk spool, in a worker process) while the next is fetched: a backfill is rate-bound,
  and step hand-offs would leave the rate budget idle. The runs a UI backfill is split into share
  one fetch per table (:mod:`assets.shared_fetch`), so a backfill costs the planner's requests once.

Resources (keys shared with the sensors): ``api`` (``VisibilityAPIResource``) and ``warehouse``
(``WarehouseResource``).
"""

import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    MaterializeResult,
    MetadataValue,
    PartitionsDefinition,
    TableColumn,
    TableSchema,
    multi_asset,
)
from dagster._core.storage.tags import BACKFILL_ID_TAG

from assets import progress
from assets.checks import CheckInputs, TableCheck, checks_of
from assets.discovery import BrandScope, Discovery, brand_filter, brand_inputs, discovery_for, sync_id
from assets.lander import Lander
from assets.landing import (
    DEFAULT_DAYS_PER_WRITE,
    FetchOne,
    FetchOutcome,
    brand_engines,
    fetch_to_spool,
    requests_beyond_plan,
)
from assets.partitions import parse_partition_keys
from assets.planning import ALL, BrandInput, Cell, Plan, expected_requests
from assets.prefetch import StopSignal, fetch_ahead
from assets.shared_fetch import SharedFetches
from assets.spool import DateSpool
from resources.api.client import RequestStats, VisibilityClient
from resources.api.errors import SyncCancelled
from resources.warehouse.base import SnapshotScope, TableSpec, Warehouse, WriteResult

API_POOL = "visibility_api"
WRITER_POOL = "duckdb_writer"
RESOURCE_KEYS = frozenset({"api", "warehouse"})
#: Under the instance's storage directory: the fetches shared by the runs of a backfill.
SHARED_FETCH_DIR = "visibility_shared_fetch"

Planner = Callable[[set[Cell], list[BrandInput], Sequence[str]], Plan]


def column_schema(spec: TableSpec) -> TableSchema:
    """``dagster/column_schema`` with the spec's types and descriptions (what the UI shows)."""
    return TableSchema(
        columns=[TableColumn(name=c.name, type=str(c.type), description=c.description) for c in spec.columns]
    )


def definition_metadata(spec: TableSpec) -> dict[str, Any]:
    return {
        "dagster/column_schema": column_schema(spec),
        "dagster/table_name": spec.name,
        "table_key": ", ".join(spec.key),
    }


def table_asset_spec(
    spec: TableSpec, upstream: str | None, description: str, group_name: str, tags: dict[str, str]
) -> AssetSpec:
    """The asset of one table; ``upstream`` is lineage only (its rows come from the API)."""
    return AssetSpec(
        key=spec.name,
        deps=[upstream] if upstream else [],
        description=description or spec.description,
        metadata=definition_metadata(spec),
        group_name=group_name,
        tags=tags,
        kinds={"duckdb", "python"},
    )


def _request_metadata(stats: RequestStats) -> dict[str, Any]:
    return {
        "requests_total": stats.total_requests,
        "requests_by_endpoint": MetadataValue.json(dict(sorted(stats.requests_by_endpoint.items()))),
        "retries": stats.total_retries,
        "retries_by_cause": MetadataValue.json(dict(sorted(stats.retries_by_cause.items()))),
        "wait_seconds": round(stats.wait_seconds, 3),
        "errors_by_code": MetadataValue.json(stats.to_metadata()["errors_by_code"]),
        "unknown_engine_rows": MetadataValue.json(dict(sorted(stats.unknown_engine_rows.items()))),
    }


def _write_metadata(results: Sequence[WriteResult]) -> dict[str, Any]:
    landed = sum(r.rows_written for r in results)
    return {
        "rows_landed": landed,
        "rows_replaced": sum(r.rows_deleted for r in results),
        "writes": len(results),
        "columns_added": MetadataValue.json(sorted({c for r in results for c in r.columns_added})),
    }


def _skipped_engines(plan: Plan) -> dict[str, list[str]]:
    """Engines of the run each brand is not measured on (nothing to fetch there)."""
    out: dict[str, list[str]] = {}
    for brand_id, engine in plan.skipped:
        out.setdefault(brand_id, []).append(engine)
    return out


def _notes_metadata(notes: dict[str, Any]) -> dict[str, Any]:
    return {k: MetadataValue.json(v) if isinstance(v, (dict, list)) else v for k, v in notes.items()}


def _log_progress(context: AssetExecutionContext, name: str) -> Callable[[int, int], None]:
    step = {"next": 0.1}

    def on_progress(done: int, total: int) -> None:
        progress.report(name, done, total)
        if total and done / total >= step["next"]:
            context.log.info(f"{name}: {done}/{total} calls done")
            step["next"] = done / total + 0.1

    return on_progress


class StepFailed(Exception):
    """Tables of a step that could not be synced (the others were, and are reported)."""

    def __init__(self, failures: Mapping[str, BaseException]) -> None:
        self.failures = dict(failures)
        detail = "; ".join(f"{table}: {type(exc).__name__}: {exc}" for table, exc in self.failures.items())
        super().__init__(f"sync failed for {', '.join(self.failures)} ({detail})")


def _run_checks(
    context: AssetExecutionContext,
    checks: Sequence[TableCheck],
    metadata: Mapping[str, Any] | None = None,
    *,
    ask_api: bool = True,
    warehouse: Warehouse | None = None,
) -> Iterator[AssetCheckResult]:
    """Evaluate the selected ``checks`` (of a table that just landed, or of a run of checks alone).

    A check that cannot run (its query failed, the API did not answer) is a failed check, not a
    failed step: the table it checks has landed either way. ``warehouse``: the handle (and session)
    the table was just landed with, else a new one.
    """
    from resources.api.errors import SyncCancelled

    wanted = [c for c in checks if c.key in context.selected_asset_check_keys]
    if not wanted:
        return
    # one connection for all of them (DuckDB: a new one per query would cost an open of the file each)
    with (
        nullcontext(warehouse) if warehouse else context.resources.warehouse.get_warehouse() as warehouse,
        warehouse.session(),
    ):
        api = context.resources.api if ask_api else None
        inputs = CheckInputs(warehouse, context.instance, context.run.tags, api, metadata)
        for check in wanted:
            try:
                result = check.run(inputs)
            except SyncCancelled:
                raise
            except Exception as exc:
                context.log.warning(f"{check.table}: check {check.name} could not run ({exc})")
                result = AssetCheckResult(
                    asset_key=check.key.asset_key,
                    check_name=check.name,
                    passed=False,
                    severity=AssetCheckSeverity.ERROR,
                    description=f"the check could not run: {type(exc).__name__}: {exc}",
                )
            yield result


def _checks_alone(context: AssetExecutionContext, tables: Sequence[str]) -> list[TableCheck]:
    """Selected checks whose table is not selected: a run of checks alone (the UI's "Execute checks")."""
    return [c for c in checks_of(tables) if c.key.asset_key not in context.selected_asset_keys]


def _raise_failures(failures: Mapping[str, BaseException]) -> None:
    if len(failures) == 1:
        raise next(iter(failures.values()))
    if failures:
        raise StepFailed(failures)


# ---------------------------------------------------------------------------------------------
# partitioned assets


@dataclass(frozen=True)
class PartitionedAsset:
    """How one partitioned table is fetched."""

    spec: TableSpec
    partitions_def: PartitionsDefinition
    engine_order: tuple[str, ...]
    planner: Planner
    fetch_one: FetchOne
    with_rollup: bool
    needs_prompts: bool = False
    needs_competitors: bool = False
    #: upstream asset, for lineage only (its rows are read from the API, not from the warehouse)
    upstream: str | None = None
    description: str = ""
    #: metadata from the fetched rows beyond the counts (e.g. capped responses)
    notes: Callable[[DateSpool], dict[str, Any]] | None = None
    tags: dict[str, str] = field(default_factory=dict)


def fetch_partitioned(
    client: VisibilityClient,
    asset: PartitionedAsset,
    cells: set[Cell],
    only: Sequence[str],
    on_progress: Callable[[int, int], None] | None = None,
    stop: StopSignal | None = None,
    discovery: Discovery | None = None,
    spool_parent: Path | None = None,
) -> FetchOutcome:
    """Discover the brands, plan the run, and spool its rows (no Dagster: reusable in benchmarks)."""
    started = time.monotonic()
    listings = discovery or Discovery()
    scope: BrandScope = listings.scope(client, only)
    inputs = brand_inputs(
        client, scope, prompts=asset.needs_prompts, competitors=asset.needs_competitors, discovery=listings
    )
    plan = asset.planner(cells, inputs, asset.engine_order)
    assert asset.spec.date_column is not None
    spool = DateSpool.create(
        asset.spec.date_column, DEFAULT_DAYS_PER_WRITE, name=asset.spec.name, parent=spool_parent
    )
    prompts_not_found: set[str] = set()
    try:
        not_found = fetch_to_spool(
            client, asset.spec, plan, asset.fetch_one, spool, on_progress, prompts_not_found, stop
        )
        scope.drop(not_found)
        spool.close()
    except BaseException:
        spool.remove()
        raise
    outcome = FetchOutcome(
        table=asset.spec.name,
        plan=plan,
        spool=spool,
        brand_engines=brand_engines(scope.brands, with_rollup=asset.with_rollup),
        out_of_scope=list(scope.out_of_scope),
        stats=client.stats,
        fetch_seconds=time.monotonic() - started,
    )
    if asset.notes is not None:
        outcome.notes = asset.notes(spool)
    if prompts_not_found:
        outcome.notes["prompts_not_found"] = sorted(prompts_not_found)
    return outcome


def _log_fetch(context: AssetExecutionContext, name: str, outcome: FetchOutcome) -> None:
    for brand_id in outcome.out_of_scope:
        context.log.warning(
            f"{name}: brand {brand_id} is out of this key's scope (404); skipped, its rows untouched"
        )
    for prompt_id in outcome.notes.get("prompts_not_found", []):
        context.log.warning(
            f"{name}: prompt {prompt_id} answered 404 (deleted during the run?); skipped, "
            "its brand's other prompts land"
        )
    skipped = _skipped_engines(outcome.plan)
    if skipped:
        context.log.info(f"{name}: not fetched, brand not measured on the engine: {skipped}")
    context.log.info(
        f"{name}: {len(outcome.plan.calls)} calls planned, {outcome.stats.total_requests} requests made, "
        f"{outcome.spool.rows} rows fetched"
    )


def _landed_metadata(
    asset: PartitionedAsset, outcome: FetchOutcome, results: list[WriteResult], land_seconds: float
) -> dict[str, Any]:
    window = outcome.plan.window
    return {
        "fetch_seconds": round(outcome.fetch_seconds, 2),
        "land_seconds": round(land_seconds, 2),
        **_write_metadata(results),
        **_request_metadata(outcome.stats),
        "calls_planned": MetadataValue.json(expected_requests(outcome.plan)),
        "requests_beyond_plan": MetadataValue.json(requests_beyond_plan(outcome.plan, outcome.stats)),
        "window_start": window.start.isoformat() if window else "",
        "window_end_exclusive": window.end.isoformat() if window else "",
        "partitions": len(outcome.plan.cells),
        "brands_landed": MetadataValue.json(sorted(outcome.brand_engines)),
        "brands_out_of_scope": MetadataValue.json(sorted(outcome.out_of_scope)),
        "engines_not_measured": MetadataValue.json(_skipped_engines(outcome.plan)),
        "dagster/column_schema": column_schema(asset.spec),
        **_notes_metadata(outcome.notes),
    }


@dataclass
class _Fetched:
    """A fetch ready to land, and what to do with its spool once landed (or discarded)."""

    outcome: FetchOutcome
    release: Callable[[bool], None]


def backfill_targets(context: AssetExecutionContext, tables: Sequence[str]) -> dict[str, set[Cell]] | None:
    """The cells of each table that the run's backfill targets, across all its runs (None: no backfill).

    An asset backfill stores its target subset; a job backfill its partition names (every asset of
    the job). Anything unreadable means no sharing: the run then fetches its own cells.
    """
    backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
    if not backfill_id:
        return None
    try:
        backfill = context.instance.get_backfill(backfill_id)
        if backfill is None:
            return None
        if backfill.is_asset_backfill:
            data = backfill.get_asset_backfill_data(context.repository_def.asset_graph)
            subset = data.target_subset
            return {
                table: parse_partition_keys(
                    subset.get_partitions_subset(AssetKey(table)).get_partition_keys()
                )
                for table in tables
                if AssetKey(table) in subset.asset_keys
            }
        if backfill.partition_names:
            cells = parse_partition_keys(list(backfill.partition_names))
            return dict.fromkeys(tables, cells)
    except Exception as exc:  # never fail a run over an optimisation
        context.log.warning(
            f"backfill {backfill_id}: its target could not be read ({exc}); fetching own cells"
        )
    return None


def shared_fetches(context: AssetExecutionContext) -> SharedFetches | None:
    backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
    if not backfill_id:
        return None
    return SharedFetches(Path(context.instance.storage_directory()) / SHARED_FETCH_DIR, backfill_id)


def build_partitioned_assets(
    name: str,
    assets: Sequence[PartitionedAsset],
    *,
    group_name: str,
    description: str,
) -> AssetsDefinition:
    """One step syncing the tables of a partitions definition: fetch one while landing another.

    Tables are fetched one after the other (one client budget, so the rate limit is spent back to
    back) in the order given, in a background thread, while this step's thread lands the table
    fetched before and stores its per-partition events. Only the last table's landing is not hidden
    behind a fetch, so list the table with the longest fetch last. Each table is its own asset
    (``can_subset``: the UI and the CLI may select any of them); a table whose landing fails does not
    stop the others from landing, and the step then fails naming it.

    In a run of a backfill, each table's fetch covers the whole backfill's cells and is shared with
    the backfill's other runs (:mod:`assets.shared_fetch`); the run lands its own cells only.
    """
    partitions_def = assets[0].partitions_def
    assert all(a.partitions_def == partitions_def for a in assets), "one partitions definition per step"
    by_key = {AssetKey(a.spec.name): a for a in assets}
    specs = [
        table_asset_spec(
            a.spec, a.upstream, a.description, group_name, {"visibility/kind": "partitioned", **a.tags}
        )
        for a in assets
    ]

    @multi_asset(
        name=name,
        specs=specs,
        check_specs=[c.spec for c in checks_of(a.spec.name for a in assets)],
        partitions_def=partitions_def,
        backfill_policy=BackfillPolicy.single_run(),
        can_subset=True,
        pool=API_POOL,
        required_resource_keys=set(RESOURCE_KEYS),
        description=description,
    )
    def sync(context: AssetExecutionContext) -> Iterator[MaterializeResult | AssetCheckResult]:
        yield from _run_checks(context, _checks_alone(context, [a.spec.name for a in assets]))
        selected = [a for key, a in by_key.items() if key in context.selected_asset_keys]
        if not selected:
            return
        cells = parse_partition_keys(context.partition_keys)
        only = brand_filter(context.run.tags)
        api = context.resources.api
        discovery = discovery_for(sync_id(context.run_id, context.run.tags))
        shared = shared_fetches(context)
        targets = backfill_targets(context, [a.spec.name for a in selected]) if shared else None

        def fetch_own(
            asset: PartitionedAsset, stop: StopSignal, spool_parent: Path | None = None
        ) -> FetchOutcome:
            table = asset.spec.name
            with api.get_client() as client:  # own counters; the rate budget is the resource's
                outcome = fetch_partitioned(
                    client,
                    asset,
                    cells_to_fetch(asset),
                    only,
                    _log_progress(context, table),
                    stop,
                    discovery,
                    spool_parent,
                )
            _log_fetch(context, table, outcome)
            return outcome

        def cells_to_fetch(asset: PartitionedAsset) -> set[Cell]:
            target = (targets or {}).get(asset.spec.name)
            return cells | target if target else cells

        def fetch(asset: PartitionedAsset, stop: StopSignal) -> _Fetched:
            table = asset.spec.name
            if shared is None or not (targets or {}).get(table):
                outcome = fetch_own(asset, stop)
                return _Fetched(outcome, lambda landed: outcome.spool.remove())
            target = cells_to_fetch(asset)
            with shared.claim(table, stop) as claim:
                if claim.outcome is None or not cells <= claim.outcome.plan.cells:
                    published = fetch_own(asset, stop, claim.directory)
                    published.notes["fetched_by_run"] = context.run_id
                    claim.publish(published)
                    stats = published.stats
                else:
                    published = claim.outcome
                    stats = RequestStats()
                    context.log.info(
                        f"{table}: landing {len(cells)} of the backfill's {len(published.plan.cells)} "
                        f"partitions from the fetch of run {published.notes.get('fetched_by_run')}"
                    )
            own = dataclasses.replace(
                published,
                plan=published.plan.restricted_to(cells, asset.engine_order),
                stats=stats,
                notes=dict(published.notes),
            )
            return _Fetched(
                own,
                lambda landed: shared.landed(table, context.run_id, cells, target) if landed else None,
            )

        failures: dict[str, BaseException] = {}
        # of the runs of a backfill, only the one landing its newest `all` partition compares the
        # landed totals with the API's (the others would ask the same questions again)
        rollup = [c for c in (targets or {}).get("competitor_trends", ()) if c[1] == ALL]
        asks_api = not rollup or max(rollup) in cells
        # a few days land in this process: a worker's start-up would cost more than it saves
        days = {day for day, _ in cells}
        lander = Lander(
            context.resources.warehouse.settings(), in_process=len(days) <= DEFAULT_DAYS_PER_WRITE
        )
        fetched = fetch_ahead(selected, fetch, discard=lambda f: f.release(False), on_stop=api.cancel)
        with lander, closing(fetched):
            for asset, item in fetched:
                table, outcome = asset.spec.name, item.outcome
                started = time.monotonic()
                try:
                    results = lander.land(table, outcome, context.run_id)
                except Exception as exc:  # the other tables still land; the step fails at the end
                    context.log.error(f"{table}: landing failed ({exc}); the table keeps its previous rows")
                    failures[table] = exc
                    item.release(False)
                    continue
                item.release(True)
                landed = time.monotonic() - started
                yield MaterializeResult(
                    asset_key=table, metadata=_landed_metadata(asset, outcome, results, landed)
                )
                # while the next table is fetched
                yield from _run_checks(context, checks_of([table]), ask_api=asks_api)
        _raise_failures(failures)

    return sync


# ---------------------------------------------------------------------------------------------
# snapshot assets


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
    fetch_rows: SnapshotFetch
    per_brand: bool
    upstream: str | None = None
    description: str = ""


def _retire_scope(
    table: SnapshotTable, scope: BrandScope, notes: dict[str, Any], context: AssetExecutionContext
) -> SnapshotScope | None:
    if not table.per_brand:
        return None
    capped = set(notes.get("capped") or {})
    retired = tuple(b for b in scope.brand_ids if b not in capped)
    if capped:
        notes["brands_not_retired"] = sorted(capped & set(scope.brand_ids))
        context.log.warning(
            f"{table.spec.name}: listing truncated (capped) for brands {sorted(capped)}; their rows are "
            "upserted only, none retired"
        )
    return SnapshotScope(table.spec.brand_column, retired) if retired else None


@dataclass
class _SnapshotFetch:
    """One snapshot table as listed, or the error that stopped its listing."""

    rows: pa.Table | None = None
    scope: BrandScope | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    stats: RequestStats | None = None
    error: Exception | None = None


def build_snapshot_assets(name: str, tables: Sequence[SnapshotTable], *, group_name: str) -> AssetsDefinition:
    """One step listing every selected snapshot table and upserting it (tables are small)."""
    by_key = {AssetKey(t.spec.name): t for t in tables}
    specs = [
        table_asset_spec(t.spec, t.upstream, t.description, group_name, {"visibility/kind": "snapshot"})
        for t in tables
    ]

    @multi_asset(
        name=name,
        specs=specs,
        check_specs=[c.spec for c in checks_of(t.spec.name for t in tables)],
        can_subset=True,
        pool=API_POOL,
        required_resource_keys=set(RESOURCE_KEYS),
        description="Snapshot tables: each listed whole and upserted; rows gone from the API stay "
        "with is_current = false.",
    )
    def sync(context: AssetExecutionContext) -> Iterator[MaterializeResult | AssetCheckResult]:
        yield from _run_checks(context, _checks_alone(context, [t.spec.name for t in tables]))
        selected = [t for key, t in by_key.items() if key in context.selected_asset_keys]
        only = brand_filter(context.run.tags)
        discovery = discovery_for(sync_id(context.run_id, context.run.tags))
        failures: dict[str, BaseException] = {}

        def fetch(table: SnapshotTable, stop: StopSignal) -> _SnapshotFetch:
            """List one table; an error that dooms every later table (a refused key) ends the fetches."""
            notes: dict[str, Any] = {}
            try:
                with context.resources.api.get_client() as client:
                    scope = discovery.scope(client, only)
                    rows = table.fetch_rows(client, scope, notes, context.run.tags, discovery)
                    return _SnapshotFetch(rows, scope, notes, client.stats)
            except Exception as exc:
                if _stops_everything(exc):
                    raise
                return _SnapshotFetch(error=exc)

        # the next table is listed while this one lands (one round trip each, then a small upsert)
        # a stop while a listing waits on the API (a retry, the rate limit) cancels the wait
        fetched = fetch_ahead(selected, fetch, discard=lambda _: None, on_stop=context.resources.api.cancel)
        with context.resources.warehouse.get_warehouse() as warehouse, closing(fetched):
            try:
                for table, item in fetched:
                    spec = table.spec
                    try:
                        if item.error is not None:
                            raise item.error
                        assert item.scope is not None and item.rows is not None and item.stats is not None
                        for brand_id in item.scope.out_of_scope:
                            context.log.warning(
                                f"{spec.name}: brand {brand_id} is out of this key's scope (404); skipped"
                            )
                        retire = _retire_scope(table, item.scope, item.notes, context)
                        # the upsert and the table's checks share one connection (one open of a file)
                        with warehouse.session():
                            warehouse.ensure_table(spec)
                            result = warehouse.upsert_snapshot(spec, item.rows, context.run_id, retire)
                            checked = list(
                                _run_checks(context, checks_of([spec.name]), item.notes, warehouse=warehouse)
                            )
                    except SyncCancelled:
                        raise
                    except Exception as exc:
                        context.log.error(
                            f"{spec.name}: sync failed ({exc}); the table keeps its previous rows"
                        )
                        failures[spec.name] = exc
                        continue
                    yield MaterializeResult(
                        asset_key=spec.name,
                        metadata={
                            **_write_metadata([result]),
                            "rows_retired": result.rows_deleted,
                            **_request_metadata(item.stats),
                            "snapshot_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                            "brands_out_of_scope": MetadataValue.json(sorted(item.scope.out_of_scope)),
                            "dagster/column_schema": column_schema(spec),
                            "dagster/row_count": item.rows.num_rows,
                            **_notes_metadata(item.notes),
                        },
                    )
                    yield from checked
            except Exception as exc:  # a refused key or an unreachable service: no later table can sync
                context.log.error(
                    f"snapshots stopped ({exc}); the tables not synced keep their previous rows"
                )
                failures["snapshots"] = exc
        _raise_failures(failures)

    return sync


def _stops_everything(exc: BaseException) -> bool:
    """A refused key, an unreachable service or a stop request fails every later table the same way."""
    from resources.api import errors as E

    return isinstance(
        exc,
        (
            E.AuthenticationError,
            E.SubscriptionRequiredError,
            E.PermissionDeniedError,
            E.TransportError,
            E.QuotaExceededError,
        ),
    )
