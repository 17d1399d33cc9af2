"""Asset factories: one step per kind of table, so a sync is two steps, not one per table.

* Snapshots (``sync_snapshots``): brands, topics, prompts, tracked competitors and generations in
  one step of the ``visibility_api`` pool. The brand listing, prompts and competitors are listed
  once per sync (:class:`sync.discovery.Discovery`) and reused by the partitioned step.
* Partitioned tables (``sync_daily``): every date x engine table in one step of the
  ``visibility_api`` pool. It fetches the tables back to back in a background thread and lands each
  (from its on-disk spool, in a worker process) while the next is fetched: a backfill is rate-bound,
  and step hand-offs would leave the rate budget idle. The runs a UI backfill is split into share
  one fetch per table (:mod:`sync.shared_fetch`), so a backfill costs the planner's requests once.

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
    AssetMaterialization,
    AssetsDefinition,
    AssetSpec,
    BackfillPolicy,
    Config,
    MaterializeResult,
    MetadataValue,
    MultiPartitionsDefinition,
    TableColumn,
    TableSchema,
    multi_asset,
)
from dagster._core.storage.tags import BACKFILL_ID_TAG, PARTITION_SET_TAG
from pydantic import Field

from assets.checks import CheckInputs, TableCheck, checks_of
from assets.partitions import DATE_DIM, ENGINE_DIM, cell_keys, parse_partition_keys, requested_cells
from resources.api.client import RequestStats
from resources.api.errors import SyncCancelled
from resources.warehouse.base import SnapshotScope, TableSpec, Warehouse, WriteResult
from sync.discovery import BrandScope, CitationTargets, Discovery, brand_filter, discovery_for, sync_id
from sync.fetching import PartitionedTable, SnapshotTable, fetch_partitioned
from sync.lander import Lander
from sync.landing import (
    DEFAULT_DAYS_PER_WRITE,
    FetchOutcome,
    requests_beyond_plan,
)
from sync.planning import ALL, Cell, Plan, expected_requests
from sync.prefetch import StopSignal, fetch_ahead
from sync.shared_fetch import SharedFetches
from sync.snapshots import listed_snapshots
from sync.summary import TableSummary
from sync.tables import BRANDS
from sync.trends import citation_targets_from_settings

API_POOL = "visibility_api"
WRITER_POOL = "duckdb_writer"
RESOURCE_KEYS = frozenset({"api", "warehouse", "progress"})
#: Under the instance's storage directory: the fetches shared by the runs of a backfill.
SHARED_FETCH_DIR = "visibility_shared_fetch"


def column_schema(spec: TableSpec) -> TableSchema:
    """``dagster/column_schema`` with the spec's types and descriptions (what the UI shows)."""
    return TableSchema(
        columns=[TableColumn(name=c.name, type=str(c.type), description=c.description) for c in spec.columns]
    )


def definition_metadata(spec: TableSpec) -> dict[str, Any]:
    """What the UI shows of a table, and what IO managers need to read it for users' own assets.

    ``partition_expr``: the column of each partition dimension, as Dagster's database IO managers
    read it. ``dagster/table_name`` is the bare name here; the code location qualifies it with the
    warehouse's catalog and schema (:func:`pipelines.downstream.for_downstream`).
    """
    metadata: dict[str, Any] = {
        "dagster/column_schema": column_schema(spec),
        "dagster/table_name": spec.name,
        "table_key": ", ".join(spec.key),
    }
    if spec.kind == "partitioned":
        metadata["partition_expr"] = {DATE_DIM: spec.date_column, ENGINE_DIM: spec.engine_column}
    return metadata


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


def _summary_metadata(summary: TableSummary) -> dict[str, Any]:
    """The core's summary of a table as Dagster metadata (lists and dicts as JSON values)."""
    return _json_values(summary.metadata())


def _skipped_engines(plan: Plan) -> dict[str, list[str]]:
    """Engines of the run each brand is not measured on (nothing to fetch there)."""
    out: dict[str, list[str]] = {}
    for brand_id, engine in plan.skipped:
        out.setdefault(brand_id, []).append(engine)
    return out


def _json_values(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: MetadataValue.json(v) if isinstance(v, (dict, list)) else v for k, v in values.items()}


def _log_progress(context: AssetExecutionContext, name: str) -> Callable[[int, int], None]:
    step = {"next": 0.1}

    def on_progress(done: int, total: int) -> None:
        context.resources.progress.report(name, done, total)
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
    asset: PartitionedTable, outcome: FetchOutcome, results: list[WriteResult], land_seconds: float
) -> dict[str, Any]:
    window = outcome.plan.window
    return {
        "fetch_seconds": round(outcome.fetch_seconds, 2),
        "land_seconds": round(land_seconds, 2),
        **_summary_metadata(TableSummary.of(results, outcome.stats, outcome.out_of_scope)),
        "calls_planned": MetadataValue.json(expected_requests(outcome.plan)),
        "requests_beyond_plan": MetadataValue.json(requests_beyond_plan(outcome.plan, outcome.stats)),
        "window_start": window.start.isoformat() if window else "",
        "window_end_exclusive": window.end.isoformat() if window else "",
        "partitions": len(outcome.plan.cells),
        "brands_landed": MetadataValue.json(sorted(outcome.brand_engines)),
        "engines_not_measured": MetadataValue.json(_skipped_engines(outcome.plan)),
        "dagster/column_schema": column_schema(asset.spec),
        **_json_values(outcome.notes),
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


class DailySyncConfig(Config):
    """The run's own choice of citation trend targets (the launchpad's config of ``sync_daily``)."""

    citation_urls: list[str] | None = Field(
        default=None,
        description="Pages whose citation trend each brand gets in this run (absolute http(s) URLs), "
        "instead of VISIBILITY_CITATION_URLS. Leave unset to use the setting; [] for none.",
    )
    citation_topics: list[str] | None = Field(
        default=None,
        description="Topics (ids or names) within which each brand's own domain is trended in this "
        "run, instead of VISIBILITY_CITATION_TOPICS. Leave unset to use the setting; [] for none.",
    )

    def citation_targets(self) -> CitationTargets | None:
        """The targets this run asks for (None: the settings'); a bad URL fails naming the field."""
        if self.citation_urls is None and self.citation_topics is None:
            return None
        from settings import citation_pages, citation_topics

        default = citation_targets_from_settings()
        urls = (
            default.urls
            if self.citation_urls is None
            else citation_pages(self.citation_urls, "config citation_urls")
        )
        topics = default.topics if self.citation_topics is None else citation_topics(self.citation_topics)
        return CitationTargets(urls=tuple(urls), topics=tuple(topics))


def run_cells(context: AssetExecutionContext, partitions_def: MultiPartitionsDefinition) -> set[Cell]:
    """The cells this run was asked for (:func:`assets.partitions.requested_cells`), said in its log.

    Dagster's own ``context.partition_keys`` is not used: in a job backfill's run it reads the
    per-dimension tags copied from the range's first partition, i.e. one partition of the range.
    """
    cells = requested_cells(context.run.tags, partitions_def, job_backfill_partitions(context))
    try:
        dagster_view = parse_partition_keys(context.partition_keys)
    except Exception:  # Dagster cannot read these tags at all; ours did
        dagster_view = set()
    if dagster_view != cells:
        context.log.info(
            f"landing the {len(cells)} partitions of the run's range tags; Dagster's run context "
            f"names {len(dagster_view)} (the per-dimension tags a job backfill copies next to its range)"
        )
    return cells


def job_backfill_partitions(context: AssetExecutionContext) -> frozenset[str]:
    """The partition keys of the job backfill this run belongs to (empty: not a job backfill's run)."""
    backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
    if not backfill_id or PARTITION_SET_TAG not in context.run.tags:
        return frozenset()
    backfill = context.instance.get_backfill(backfill_id)
    return frozenset(backfill.partition_names or ()) if backfill is not None else frozenset()


def landed_events(
    table: str, cells: set[Cell], metadata: Mapping[str, Any]
) -> Iterator[AssetMaterialization]:
    """One materialization per cell landed, whatever Dagster's run context believes the run targets.

    Recorded as events (the step's outputs are optional, ``can_subset``) so that the partitions in
    Dagster's event log are exactly the ones written; a ``MaterializeResult`` would be recorded for
    the context's partitions instead.
    """
    for key in cell_keys(cells):
        yield AssetMaterialization(asset_key=table, partition=key, metadata=metadata)


def shared_fetches(context: AssetExecutionContext) -> SharedFetches | None:
    backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
    if not backfill_id:
        return None
    return SharedFetches(Path(context.instance.storage_directory()) / SHARED_FETCH_DIR, backfill_id)


def build_partitioned_assets(
    name: str,
    assets: Sequence[PartitionedTable],
    *,
    partitions_def: MultiPartitionsDefinition,
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
    the backfill's other runs (:mod:`sync.shared_fetch`); the run lands its own cells only.
    """
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
    def sync(
        context: AssetExecutionContext, config: DailySyncConfig
    ) -> Iterator[AssetMaterialization | AssetCheckResult]:
        yield from _run_checks(context, _checks_alone(context, [a.spec.name for a in assets]))
        selected = [a for key, a in by_key.items() if key in context.selected_asset_keys]
        if not selected:
            return
        cells = run_cells(context, partitions_def)
        citation_targets = config.citation_targets()
        only = brand_filter(context.run.tags)
        api = context.resources.api
        discovery = discovery_for(sync_id(context.run_id, context.run.tags))
        shared = shared_fetches(context)
        targets = backfill_targets(context, [a.spec.name for a in selected]) if shared else None

        def fetch_own(
            asset: PartitionedTable, stop: StopSignal, spool_parent: Path | None = None
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
                    citation_targets,
                )
            _log_fetch(context, table, outcome)
            return outcome

        def cells_to_fetch(asset: PartitionedTable) -> set[Cell]:
            target = (targets or {}).get(asset.spec.name)
            return cells | target if target else cells

        def fetch(asset: PartitionedTable, stop: StopSignal) -> _Fetched:
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
                metadata = _landed_metadata(asset, outcome, results, time.monotonic() - started)
                yield from landed_events(table, cells, metadata)
                # while the next table is fetched
                yield from _run_checks(context, checks_of([table]), ask_api=asks_api)
        try:
            yield from land_listed_snapshots(context, discovery, only)
        except SyncCancelled:
            raise
        except Exception as exc:
            context.log.error(f"snapshot listings not landed ({exc}); those tables keep their rows")
            failures["listed snapshots"] = exc
        _raise_failures(failures)

    return sync


def land_listed_snapshots(
    context: AssetExecutionContext, discovery: Discovery, only: Sequence[str]
) -> Iterator[AssetMaterialization]:
    """Upsert the brands, prompts and competitors the daily tables listed, when no snapshot step runs.

    A backfill of the daily group alone would otherwise leave a fresh warehouse without the tables
    the views and the report join to (docs/OPERATIONS.md, "Backfilling the daily group alone").
    Costs no request: only what this run already listed is landed.
    """
    in_run = set(context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys)
    if AssetKey(BRANDS.name) in in_run:
        return  # the run's snapshot step lists and lands them whole
    listed = listed_snapshots(discovery, only)
    if not listed:
        return
    with context.resources.warehouse.get_warehouse() as warehouse, warehouse.session():
        for table, scope, rows in listed:
            warehouse.ensure_table(table.spec)
            result = warehouse.upsert_snapshot(
                table.spec, rows, context.run_id, _retire_scope(table, scope, {}, context)
            )
            context.log.info(f"{table.spec.name}: {rows.num_rows} rows as listed by this sync's daily tables")
            yield AssetMaterialization(
                asset_key=table.spec.name,
                metadata={
                    "rows_written": result.rows_written,
                    "rows_retired": result.rows_deleted,
                    "dagster/row_count": rows.num_rows,
                    "landed_by": "sync_daily: the run synced no snapshot step; these are the listings "
                    "its daily tables made (no extra request)",
                },
            )


# ---------------------------------------------------------------------------------------------
# snapshot assets


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
                            **_summary_metadata(
                                TableSummary.of([result], item.stats, item.scope.out_of_scope)
                            ),
                            "rows_retired": result.rows_deleted,
                            "snapshot_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                            "dagster/column_schema": column_schema(spec),
                            "dagster/row_count": item.rows.num_rows,
                            **_json_values(item.notes),
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
