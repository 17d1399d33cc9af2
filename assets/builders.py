"""Asset factories: every table is a two-step graph asset, fetch then land.

The fetch step runs in the ``visibility_api`` pool (it spends the API's rate limit), the land step in
the ``duckdb_writer`` pool (DuckDB has a single writer per file), so a long fetch never holds the
writer and two writes never fight for the file. The steps hand over a small picklable outcome: the
rows themselves wait on disk in a spool (partitioned assets) or travel as an Arrow table (snapshots,
which are small).

Resources (keys shared with the sensors): ``api`` (``VisibilityAPIResource``) and ``warehouse``
(``WarehouseResource``).
"""

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from dagster import (
    AssetIn,
    AssetsDefinition,
    BackfillPolicy,
    In,
    MetadataValue,
    OpDefinition,
    OpExecutionContext,
    Out,
    PartitionsDefinition,
    TableColumn,
    TableSchema,
    graph_asset,
    op,
)
from dagster import Nothing as DagsterNothing

from assets import progress
from assets.discovery import BrandScope, brand_filter, brand_inputs, discover_brands
from assets.landing import (
    DEFAULT_DAYS_PER_WRITE,
    FetchOne,
    FetchOutcome,
    brand_engines,
    fetch_to_spool,
    land,
    requests_beyond_plan,
)
from assets.partitions import parse_partition_keys
from assets.planning import BrandInput, Cell, Plan, expected_requests
from assets.spool import DateSpool
from resources.api.client import RequestStats, VisibilityClient
from resources.warehouse.base import SnapshotScope, TableSpec, WriteResult

API_POOL = "visibility_api"
WRITER_POOL = "duckdb_writer"
RESOURCE_KEYS = frozenset({"api", "warehouse"})

Planner = Callable[[set[Cell], list[BrandInput], Sequence[str]], Plan]

#: Run tag ``"true"``: the run is never re-executed from failure (the CLI's in-process runs), so a
#: failed land step removes its spool at once instead of keeping it for a retry (swept after a day).
NO_RETRY_TAG = "visibility/no_retry_from_failure"


def no_retry_from_failure(tags: Mapping[str, str] | Any) -> bool:
    """Whether the run's tags promise no re-execution from failure (so nothing is kept for it)."""
    return str(tags.get(NO_RETRY_TAG, "") or "").strip().lower() == "true"


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


def _log_progress(context: OpExecutionContext, name: str) -> Callable[[int, int], None]:
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
) -> FetchOutcome:
    """Discover the brands, plan the run, and spool its rows (no Dagster: reusable in benchmarks)."""
    scope: BrandScope = discover_brands(client, only_brands)
    inputs = brand_inputs(client, scope, prompts=asset.needs_prompts, competitors=asset.needs_competitors)
    plan = asset.planner(cells, inputs, asset.engine_order)
    assert asset.spec.date_column is not None
    spool = DateSpool.create(asset.spec.date_column, DEFAULT_DAYS_PER_WRITE, name=asset.spec.name)
    prompts_not_found: set[str] = set()
    try:
        not_found = fetch_to_spool(
            client, asset.spec, plan, asset.fetch_one, spool, on_progress, prompts_not_found
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
    )
    if asset.notes is not None:
        outcome.notes = asset.notes(spool)
    if prompts_not_found:
        outcome.notes["prompts_not_found"] = sorted(prompts_not_found)
    return outcome


def build_partitioned_asset(asset: PartitionedAsset) -> AssetsDefinition:
    name = asset.spec.name

    @op(name=f"fetch_{name}", pool=API_POOL, required_resource_keys={"api"}, ins=_lineage_in(asset.upstream))
    def fetch(context: OpExecutionContext) -> FetchOutcome:
        cells = parse_partition_keys(context.partition_keys)
        only = brand_filter(context.run.tags)
        with context.resources.api.get_client() as client:
            outcome = fetch_partitioned(client, asset, cells, only, _log_progress(context, name))
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
        return outcome

    @op(name=f"land_{name}", pool=WRITER_POOL, required_resource_keys={"warehouse"}, out=Out(DagsterNothing))
    def land_rows(context: OpExecutionContext, outcome: FetchOutcome) -> None:
        if not outcome.spool.exists():
            raise RuntimeError(
                f"{name}: the fetched rows ({outcome.spool.directory}) are gone (another machine, or "
                "already landed); re-execute the whole asset, not only its land step"
            )
        try:
            with context.resources.warehouse.get_warehouse() as warehouse:
                results = land(warehouse, asset.spec, outcome, context.run_id)
        except BaseException:
            # kept on failure, so a retry from the failed step lands the same rows without refetching,
            # unless the run says it will never be retried (the CLI's in-process runs)
            if no_retry_from_failure(context.run.tags):
                outcome.spool.remove()
            raise
        outcome.spool.remove()
        window = outcome.plan.window
        metadata: dict[str, Any] = {
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
        context.add_output_metadata(metadata)

    return _graph_asset(
        name,
        fetch,
        land_rows,
        asset.upstream,
        partitions_def=asset.partitions_def,
        backfill_policy=BackfillPolicy.single_run(),
        description=asset.description or asset.spec.description,
        metadata=definition_metadata(asset.spec),
        group_name="visibility_daily",
        tags={"visibility/kind": "partitioned", **asset.tags},
        kinds={"duckdb", "python"},
    )


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
