"""Asset factories.

* Snapshots: every table is a two-step graph asset, ``fetch_<table>`` in the ``visibility_api`` pool
  (it spends the API's rate limit), then ``land_<table>`` in the ``duckdb_writer`` pool (DuckDB has a
  single writer per file), handing over the rows as a small Arrow table.
* Partitioned tables: one step per partitions definition (``sync_daily``, ``sync_rollups``) in the
  ``visibility_api`` pool, computing one asset per table. It fetches the tables back to back in a
  background thread and lands each (from its on-disk spool) while the next is fetched: a backfill is
  rate-bound, and step hand-offs (landing, Dagster's pool re-polls, step process starts) would leave
  the rate budget idle. Its writes wait on DuckDB's file lock, not on the writer pool.

Resources (keys shared with the sensors): ``api`` (``VisibilityAPIResource``) and ``warehouse``
(``WarehouseResource``).
"""

import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from dagster import (
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    In,
    MaterializeResult,
    MetadataValue,
    OpDefinition,
    OpExecutionContext,
    Out,
    PartitionsDefinition,
    TableColumn,
    TableSchema,
    graph_asset,
    multi_asset,
    op,
)
from dagster import Nothing as DagsterNothing

from assets import progress
from assets.discovery import BrandScope, brand_filter, brand_inputs, discover_brands
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
from assets.planning import BrandInput, Cell, Plan, expected_requests
from assets.prefetch import StopSignal, fetch_ahead
from assets.spool import DateSpool
from resources.api.client import RequestStats, VisibilityClient
from resources.warehouse.base import SnapshotScope, TableSpec, WriteResult

API_POOL = "visibility_api"
WRITER_POOL = "duckdb_writer"
RESOURCE_KEYS = frozenset({"api", "warehouse"})

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


def _request_metadata(stats: RequestStats) -> dict[str, Any]:
    return {
        "requests_total": stats.total_requests,
        "requests_by_endpoint": MetadataValue.json(dict(sorted(stats.requests_by_endpoint.items()))),
        "retries": stats.total_retries,
        "retries_by_cause": MetadataValue.json(dict(sorted(stats.retries_by_cause.items()))),
        "wait_seconds": round(stats.wait_seconds, 3),
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


def _log_progress(
    context: OpExecutionContext | AssetExecutionContext, name: str
) -> Callable[[int, int], None]:
    step = {"next": 0.1}

    def on_progress(done: int, total: int) -> None:
        progress.report(name, done, total)
        if total and done / total >= step["next"]:
            context.log.info(f"{name}: {done}/{total} calls done")
            step["next"] = done / total + 0.1

    return on_progress


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
    only_brands: Sequence[str],
    on_progress: Callable[[int, int], None] | None = None,
    stop: StopSignal | None = None,
) -> FetchOutcome:
    """Discover the brands, plan the run, and spool its rows (no Dagster: reusable in benchmarks)."""
    started = time.monotonic()
    scope: BrandScope = discover_brands(client, only_brands)
    inputs = brand_inputs(client, scope, prompts=asset.needs_prompts, competitors=asset.needs_competitors)
    plan = asset.planner(cells, inputs, asset.engine_order)
    assert asset.spec.date_column is not None
    spool = DateSpool.create(asset.spec.date_column, DEFAULT_DAYS_PER_WRITE, name=asset.spec.name)
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


class LandingFailed(Exception):
    """Tables of the step whose rows could not be landed (the others landed and are reported)."""

    def __init__(self, failures: Mapping[str, BaseException]) -> None:
        self.failures = dict(failures)
        detail = "; ".join(f"{table}: {type(exc).__name__}: {exc}" for table, exc in self.failures.items())
        super().__init__(f"landing failed for {', '.join(self.failures)} ({detail})")


def build_partitioned_assets(
    name: str,
    assets: Sequence[PartitionedAsset],
    *,
    group_name: str,
    description: str,
) -> AssetsDefinition:
    """One step syncing several tables of a partitions definition: fetch one while landing another.

    Tables are fetched one after the other (one client budget, so the rate limit is spent
    back to back) in the order given, in a background thread, while this step's thread lands the
    table fetched before and stores its per-partition events. Only the last table's landing is not
    hidden behind a fetch, so list the table with the longest fetch last. Each table is its own asset
    (``can_subset``: the UI and the CLI may select any of them); a table whose landing fails does
    not stop the others from landing, and the step then fails naming it.
    """
    partitions_def = assets[0].partitions_def
    assert all(a.partitions_def == partitions_def for a in assets), "one partitions definition per step"
    by_key = {AssetKey(a.spec.name): a for a in assets}
    specs = [
        AssetSpec(
            key=a.spec.name,
            deps=[a.upstream] if a.upstream else [],
            description=a.description or a.spec.description,
            metadata=definition_metadata(a.spec),
            group_name=group_name,
            tags={"visibility/kind": "partitioned", **a.tags},
            kinds={"duckdb", "python"},
        )
        for a in assets
    ]

    @multi_asset(
        name=name,
        specs=specs,
        partitions_def=partitions_def,
        backfill_policy=BackfillPolicy.single_run(),
        can_subset=True,
        pool=API_POOL,
        required_resource_keys=set(RESOURCE_KEYS),
        description=description,
    )
    def sync(context: AssetExecutionContext) -> Iterator[MaterializeResult]:
        selected = [a for key, a in by_key.items() if key in context.selected_asset_keys]
        cells = parse_partition_keys(context.partition_keys)
        only = brand_filter(context.run.tags)
        api = context.resources.api

        def fetch(asset: PartitionedAsset, stop: StopSignal) -> FetchOutcome:
            table = asset.spec.name
            with api.get_client() as client:  # own counters; the rate budget is the resource's
                outcome = fetch_partitioned(client, asset, cells, only, _log_progress(context, table), stop)
            _log_fetch(context, table, outcome)
            return outcome

        failures: dict[str, BaseException] = {}
        lander = Lander(context.resources.warehouse.settings())
        fetched = fetch_ahead(selected, fetch, discard=lambda o: o.spool.remove())
        with lander, closing(fetched):
            for asset, outcome in fetched:
                table = asset.spec.name
                started = time.monotonic()
                try:
                    results = lander.land(table, outcome, context.run_id)
                except Exception as exc:  # the other tables still land; the step fails at the end
                    context.log.error(
                        f"{table}: landing failed ({exc}); chunks not yet written keep their old rows, "
                        "a re-run of the range converges"
                    )
                    failures[table] = exc
                    continue
                finally:
                    outcome.spool.remove()
                landed = time.monotonic() - started
                yield MaterializeResult(
                    asset_key=table, metadata=_landed_metadata(asset, outcome, results, landed)
                )
        if len(failures) == 1:
            raise next(iter(failures.values()))
        if failures:
            raise LandingFailed(failures)

    return sync


def _lineage_in(upstream: str | None) -> dict[str, In]:
    return {"upstream": In(DagsterNothing)} if upstream else {}


def _graph_asset(
    name: str, fetch: OpDefinition, land_rows: OpDefinition, upstream: str | None, **kwargs: Any
) -> AssetsDefinition:
    """fetch -> land as one asset; ``upstream`` (if any) is a lineage-only dependency."""
    if upstream is None:

        @graph_asset(name=name, **kwargs)
        def without_upstream() -> Any:
            return land_rows(fetch())

        return without_upstream

    @graph_asset(name=name, ins={"upstream": AssetIn(key=upstream, dagster_type=DagsterNothing)}, **kwargs)
    def with_upstream(upstream: Any) -> Any:
        return land_rows(fetch(upstream))

    return with_upstream


# ---------------------------------------------------------------------------------------------
# snapshot assets


@dataclass
class SnapshotOutcome:
    """Rows of a snapshot fetch and how far they may retire absent rows."""

    table: pa.Table
    scope: SnapshotScope | None
    out_of_scope: list[str]
    stats: RequestStats
    notes: dict[str, Any] = field(default_factory=dict)


#: ``(client, scope, notes, run tags) -> rows``. A per-brand fetch whose listing of a brand was
#: truncated records it in ``notes["capped"]`` ({brand id: {rows, total_count}}): the rows absent from
#: a truncated listing may still exist, so those brands are upserted but never retired.
SnapshotFetch = Callable[[VisibilityClient, BrandScope, dict[str, Any], Mapping[str, str]], pa.Table]


def build_snapshot_asset(
    spec: TableSpec,
    fetch_rows: SnapshotFetch,
    *,
    per_brand: bool,
    upstream: str | None = None,
    description: str = "",
) -> AssetsDefinition:
    """A snapshot: list everything, upsert by key, retire rows of the fetched brands that vanished.

    ``per_brand``: rows belong to brands (retire within the fetched brands only); otherwise the
    listing is the whole table (``brands``), retiring anything absent unless the run was restricted
    to some brands.
    """
    name = spec.name

    @op(name=f"fetch_{name}", pool=API_POOL, required_resource_keys={"api"}, ins=_lineage_in(upstream))
    def fetch(context: OpExecutionContext) -> SnapshotOutcome:
        only = brand_filter(context.run.tags)
        notes: dict[str, Any] = {}
        with context.resources.api.get_client() as client:
            scope = discover_brands(client, only)
            table = fetch_rows(client, scope, notes, context.run.tags)
            stats = client.stats
        for brand_id in scope.out_of_scope:
            context.log.warning(f"{name}: brand {brand_id} is out of this key's scope (404); skipped")
        retire: SnapshotScope | None
        if per_brand:
            capped = set(notes.get("capped") or {})
            retired = tuple(b for b in scope.brand_ids if b not in capped)
            if capped:
                notes["brands_not_retired"] = sorted(capped & set(scope.brand_ids))
                context.log.warning(
                    f"{name}: listing truncated (capped) for brands {sorted(capped)}; their rows are "
                    "upserted only, none retired"
                )
            retire = SnapshotScope(spec.brand_column, retired) if retired else None
        else:
            retire = None if only else SnapshotScope(None)
        return SnapshotOutcome(table, retire, list(scope.out_of_scope), stats, notes)

    @op(name=f"land_{name}", pool=WRITER_POOL, required_resource_keys={"warehouse"}, out=Out(DagsterNothing))
    def land_rows(context: OpExecutionContext, outcome: SnapshotOutcome) -> None:
        with context.resources.warehouse.get_warehouse() as warehouse, warehouse.session():
            warehouse.ensure_table(spec)
            result = warehouse.upsert_snapshot(spec, outcome.table, context.run_id, outcome.scope)
        context.add_output_metadata(
            {
                **_write_metadata([result]),
                "rows_retired": result.rows_deleted,
                **_request_metadata(outcome.stats),
                "snapshot_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "brands_out_of_scope": MetadataValue.json(sorted(outcome.out_of_scope)),
                "dagster/column_schema": column_schema(spec),
                "dagster/row_count": outcome.table.num_rows,
                **_notes_metadata(outcome.notes),
            }
        )

    return _graph_asset(
        name,
        fetch,
        land_rows,
        upstream,
        description=description or spec.description,
        metadata=definition_metadata(spec),
        group_name="visibility_snapshots",
        tags={"visibility/kind": "snapshot"},
        kinds={"duckdb", "python"},
    )
