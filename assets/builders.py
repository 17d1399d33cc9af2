"""The sync's two steps as Dagster multi-assets, one asset per catalog table: ``sync_snapshots`` and
``sync_daily`` (every date x engine table). They run :mod:`sync.driver` and translate its events into
materializations and check results; what is Dagster's stays here: which cells a run was asked for
(its tags, its backfill), the events, and the checks.
"""

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, TypeVar

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
    ResourceParam,
    TableColumn,
    TableSchema,
    multi_asset,
)
from pydantic import Field

from assets.checks import DAILY_FRESHNESS, CheckInputs, TableCheck, checks_of
from assets.dagster_tags import BACKFILL_ID_TAG, PARTITION_SET_TAG
from assets.partitions import (
    DAILY_PARTITIONS,
    DATE_DIM,
    ENGINE_DIM,
    cell_keys,
    parse_partition_keys,
    requested_cells,
)
from resources.api.errors import SyncCancelled
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.base import Warehouse
from resources.warehouse.contract import TableSpec
from resources.warehouse.resource import WarehouseResource
from settings import citation_pages, citation_topics
from sync import catalog
from sync.catalog import SENSOR_TABLES, SNAPSHOTS
from sync.discovery import CitationTargets, brand_filter
from sync.driver import (
    DailyRequest,
    SyncEvent,
    TableFailed,
    TableLanded,
    land_listed,
    raise_failures,
    sync_daily,
    sync_snapshots,
)
from sync.fetching import PartitionedTable, SnapshotTable
from sync.handoff import BackfillHandoff
from sync.head_start import SyncSession
from sync.planning import Cell
from sync.progress import Listener
from sync.resume import ResumeStore, resume_root
from sync.tables import BRANDS

API_POOL = "visibility_api"
WRITER_POOL = "duckdb_writer"
SCHEMA_KEY = "dagster/column_schema"
Entry = TypeVar("Entry", PartitionedTable, SnapshotTable)
#: The shortest interval between two progress lines of one table in the run's log.
PROGRESS_LOG_SECONDS = 10.0


def column_schema(spec: TableSpec) -> TableSchema:
    """``dagster/column_schema`` with the spec's types and descriptions (what the UI shows)."""
    return TableSchema(
        columns=[TableColumn(name=c.name, type=str(c.type), description=c.description) for c in spec.columns]
    )


def table_asset_spec(entry: PartitionedTable | SnapshotTable, group_name: str, kind: str) -> AssetSpec:
    """The asset of one table, with what the UI shows and the ``partition_expr`` IO managers read.
    ``upstream`` is lineage only (snapshots first); the description says so for the backfill dialog.
    """
    spec, upstream = entry.spec, entry.upstream
    metadata: dict[str, Any] = {
        SCHEMA_KEY: column_schema(spec),
        "dagster/table_name": spec.name,
        "table_key": ", ".join(spec.key),
    }
    if spec.kind == "partitioned":
        metadata["partition_expr"] = {DATE_DIM: spec.date_column, ENGINE_DIM: spec.engine_column}
    text = spec.description
    if upstream:
        text += (
            f"\n\nUpstream `{upstream}` is lineage only: the rows come from the API, so a backfill "
            f'need not wait for `{upstream}` (answer Dagster\'s "upstream assets not materialized" '
            "prompt with Launch)."
        )
    return AssetSpec(
        key=spec.name,
        deps=[upstream] if upstream else [],
        description=text,
        metadata=metadata,
        group_name=group_name,
        tags={"visibility/kind": kind},
        kinds={"duckdb", "python"},
        freshness_policy=DAILY_FRESHNESS,
    )


def _sync_step(
    name: str, tables: Sequence[PartitionedTable | SnapshotTable], group_name: str, kind: str, **step: Any
) -> Callable[[Callable[..., Any]], AssetsDefinition]:
    """``multi_asset`` of a step syncing ``tables``: an asset per table (any subset selectable, so the
    UI and the command line pick tables), and their checks."""
    return multi_asset(
        name=name,
        specs=[table_asset_spec(t, group_name, kind) for t in tables],
        check_specs=[c.spec for c in checks_of(t.spec.name for t in tables)],
        can_subset=True,
        pool=API_POOL,
        **step,
    )


def _selection(
    context: AssetExecutionContext, tables: Sequence[Entry]
) -> tuple[list[TableCheck], list[Entry]]:
    """The selected checks of tables not selected (a run of checks alone: the UI's "Execute checks"),
    and the selected tables."""
    chosen = context.selected_asset_keys
    selected = [t for t in tables if AssetKey(t.spec.name) in chosen]
    alone = [c for c in checks_of(t.spec.name for t in tables) if c.key.asset_key not in chosen]
    return alone, selected


def _json_values(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: MetadataValue.json(v) if isinstance(v, (dict, list)) else v for k, v in values.items()}


def _progress(context: AssetExecutionContext, progress: Listener) -> Listener:
    """Each table's planned calls, to the display and to the run's log each further tenth (at most every
    PROGRESS_LOG_SECONDS): each log line is an event Dagster stores, written in the fetching thread.
    """
    next_step: dict[str, float] = {}
    logged_at: dict[str, float] = {}

    def on_progress(name: str, done: int, total: int) -> None:
        progress(name, done, total)
        now = time.monotonic()
        if not total or done / total < next_step.get(name, 0.1):
            return
        if now - logged_at.setdefault(name, now) >= PROGRESS_LOG_SECONDS:
            context.log.info(f"{name}: {done}/{total} calls done")
            logged_at[name] = now
            next_step[name] = done / total + 0.1

    return on_progress


def _run_checks(
    context: AssetExecutionContext,
    checks: Sequence[TableCheck],
    warehouse: WarehouseResource | Warehouse,
    api: VisibilityAPIResource | None,
    metadata: Mapping[str, Any] | None = None,
) -> Iterator[AssetCheckResult]:
    """Evaluate the selected ``checks`` in one session of ``warehouse`` (a handle already open, or the
    resource); ``api`` None: checks must not ask the service. A check that cannot run is a failed
    check, not a failed step: its table has landed either way."""
    wanted = [c for c in checks if c.key in context.selected_asset_check_keys]
    if not wanted:
        return
    opened = warehouse.get_warehouse() if isinstance(warehouse, WarehouseResource) else nullcontext(warehouse)
    with opened as handle, handle.session():
        inputs = CheckInputs(handle, context.instance, context.run.tags, api, metadata)
        for check in wanted:
            try:
                yield check.run(inputs)
            except SyncCancelled:
                raise
            except Exception as exc:
                context.log.warning(f"{check.table}: check {check.name} could not run ({exc})")
                yield AssetCheckResult(
                    asset_key=check.key.asset_key,
                    check_name=check.name,
                    passed=False,
                    severity=AssetCheckSeverity.ERROR,
                    description=f"the check could not run: {type(exc).__name__}: {exc}",
                )


def _translated(
    events: Iterator[SyncEvent],
    on_landed: Callable[[TableLanded], Iterator[AssetMaterialization | MaterializeResult | AssetCheckResult]],
) -> Iterator[AssetMaterialization | MaterializeResult | AssetCheckResult]:
    """The driver's events as Dagster's; fails the step at the end with the tables that failed."""
    seen: list[SyncEvent] = []
    for event in events:
        seen.append(event)
        if isinstance(event, TableLanded):
            yield from on_landed(event)
    raise_failures(seen)


def _landed_metadata(event: TableLanded, spec: TableSpec) -> dict[str, Any]:
    return {**_json_values(event.metadata), SCHEMA_KEY: column_schema(spec)}


def backfill_targets(context: AssetExecutionContext, tables: Sequence[str]) -> dict[str, set[Cell]] | None:
    """The cells of each table that the run's backfill targets, across all its runs (None: no backfill).

    Anything unreadable means no handoff: the run then fetches its own cells.
    """
    backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
    if not backfill_id:
        return None
    try:
        backfill = context.instance.get_backfill(backfill_id)
        return None if backfill is None else targets_of(backfill, context.repository_def.asset_graph, tables)
    except Exception as exc:  # never fail a run over an optimisation
        context.log.warning(
            f"backfill {backfill_id}: its target could not be read ({exc}); fetching own cells"
        )
    return None


def targets_of(backfill: Any, asset_graph: Any, tables: Sequence[str]) -> dict[str, set[Cell]] | None:
    """``backfill``'s cells of each of ``tables``: an asset backfill stores its target subset, a job
    backfill its partition names (every asset of the job)."""
    if backfill.is_asset_backfill:
        subset = backfill.get_asset_backfill_data(asset_graph).target_subset
        return {
            table: parse_partition_keys(subset.get_partitions_subset(AssetKey(table)).get_partition_keys())
            for table in tables
            if AssetKey(table) in subset.asset_keys
        }
    if backfill.partition_names:
        return dict.fromkeys(tables, parse_partition_keys(list(backfill.partition_names)))
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

    def citation_targets(self, api: VisibilityAPIResource) -> CitationTargets:
        """The targets this run asks for: its own, else the ``api`` resource's (the settings'
        ``VISIBILITY_CITATION_*`` in the code location); a bad URL fails naming the field."""
        if self.citation_urls is None:
            urls = citation_pages(api.citation_urls, "api citation_urls")
        else:
            urls = citation_pages(self.citation_urls, "config citation_urls")
        topics = citation_topics(
            api.citation_topics if self.citation_topics is None else self.citation_topics
        )
        return CitationTargets(urls=tuple(urls), topics=tuple(topics))


#: The date x engine step (:data:`sync_daily`): the step whose config (:class:`DailySyncConfig`) the
#: snapshot step, which runs first, checks before its first request.
DAILY_STEP = "sync_daily"


def check_daily_config(run_config: Mapping[str, Any], api: VisibilityAPIResource) -> None:
    """Fail on a bad value of the daily step's config (a page that is not a URL) naming the field,
    before the run makes its first request, whichever of its steps runs first."""
    raw = ((run_config.get("ops") or {}).get(DAILY_STEP) or {}).get("config")
    if raw:
        DailySyncConfig(**raw).citation_targets(api)


def run_cells(context: AssetExecutionContext) -> set[Cell]:
    """The cells this run was asked for (:func:`assets.partitions.requested_cells`), given the
    partitions of the job backfill it belongs to. Not Dagster's ``context.partition_keys``: in a job
    backfill's run it reads one partition of the range."""
    tags = context.run.tags
    backfill_id = tags.get(BACKFILL_ID_TAG) if PARTITION_SET_TAG in tags else None  # job backfills only
    backfill = context.instance.get_backfill(backfill_id) if backfill_id else None
    partitions = (backfill.partition_names or ()) if backfill is not None else ()
    return requested_cells(tags, DAILY_PARTITIONS, frozenset(partitions))


def landed_events(
    table: str, cells: set[Cell], metadata: Mapping[str, Any]
) -> Iterator[AssetMaterialization]:
    """One materialization per cell landed (a ``MaterializeResult`` would record the run context's
    partitions instead). The column schema, large and the same for every cell, travels on the first
    and last only: on every event it made each write markedly costlier."""
    keys = cell_keys(cells)
    lean = {k: v for k, v in metadata.items() if k != SCHEMA_KEY}
    for index, key in enumerate(keys):
        ends = index in (0, len(keys) - 1)
        yield AssetMaterialization(asset_key=table, partition=key, metadata=metadata if ends else lean)


def backfill_handoff(context: AssetExecutionContext, warehouse: WarehouseResource) -> BackfillHandoff:
    """The run's side of its backfill's handoffs. A claimant is alive while its run has not ended
    (run monitoring fails a killed one)."""
    instance = context.instance

    def is_alive(run_id: str) -> bool:
        run = instance.get_run_by_id(run_id)
        return run is not None and not run.is_finished

    return BackfillHandoff(
        context.run.tags[BACKFILL_ID_TAG], context.run_id, warehouse.get_warehouse, is_alive
    )


def build_daily_step(assets: Sequence[PartitionedTable]) -> AssetsDefinition:
    """The ``sync_daily`` step: one step for every date x engine table, so the UI's group "Materialize"
    picks one date range for all. A failed table fails the step at the end, naming it.
    """

    @_sync_step(
        DAILY_STEP,
        assets,
        catalog.DAILY_GROUP,
        "partitioned",
        partitions_def=DAILY_PARTITIONS,
        backfill_policy=BackfillPolicy.single_run(),
        description="Every date x engine table (engines plus the `all` rollup): fetched back to back, "
        "each landed while the next is fetched; of a backfill's runs, the first to reach a table "
        "fetches and lands it for all of them.",
    )
    def sync(
        context: AssetExecutionContext,
        config: DailySyncConfig,
        api: VisibilityAPIResource,
        warehouse: WarehouseResource,
        progress: ResourceParam[Listener],
        sync_session: ResourceParam[SyncSession],
    ) -> Iterator[AssetMaterialization | MaterializeResult | AssetCheckResult]:
        alone, selected = _selection(context, assets)
        yield from _run_checks(context, alone, warehouse, api)
        if not selected:
            return
        targets = config.citation_targets(api)
        request = daily_request(context, targets, selected, warehouse, sync_session)
        asks_api = api if request.compares_totals() else None
        spec_of = {a.spec.name: a.spec for a in selected}

        def on_landed(event: TableLanded) -> Iterator[AssetMaterialization | AssetCheckResult]:
            if event.table not in spec_of:  # a listing the daily tables made (``_with_listed``)
                yield AssetMaterialization(asset_key=event.table, metadata=_json_values(event.metadata))
                return
            yield from landed_events(
                event.table, set(event.cells), _landed_metadata(event, spec_of[event.table])
            )
            yield from _run_checks(context, checks_of([event.table]), warehouse, asks_api)

        events = sync_daily(
            selected, request, api, warehouse.settings(), context.log, _progress(context, progress)
        )
        yield from _translated(_with_listed(context, events, request, warehouse), on_landed)

    return sync


def daily_request(
    context: AssetExecutionContext,
    citation_targets: CitationTargets | None,
    tables: Sequence[PartitionedTable],
    warehouse: WarehouseResource,
    session: SyncSession,
) -> DailyRequest:
    """What this run lands (:func:`run_cells`), and the backfill it belongs to."""
    backfill_cells = backfill_targets(context, [t.spec.name for t in tables])
    return DailyRequest(
        run_id=context.run_id,
        cells=run_cells(context),
        only=brand_filter(context.run.tags),
        discovery=session.discovery,
        citation_targets=citation_targets,
        handoff=backfill_handoff(context, warehouse) if backfill_cells else None,
        backfill_cells=backfill_cells or {},
        resume=ResumeStore(
            resume_root(None if context.instance.is_ephemeral else context.instance.storage_directory())
        ),
        fetched_ahead=session.head_start,
    )


def _with_listed(
    context: AssetExecutionContext,
    events: Iterator[SyncEvent],
    request: DailyRequest,
    warehouse: WarehouseResource,
) -> Iterator[SyncEvent]:
    """The daily tables' events, then, when the run has no snapshot step, the listings they made: the
    views and the report join to them (docs/OPERATIONS.md, "Backfilling the daily group alone")."""
    yield from events
    in_run = set(context.run.asset_selection or context.job_def.asset_layer.selected_asset_keys)
    if AssetKey(BRANDS.name) in in_run:
        return  # the run's snapshot step lists and lands them whole
    try:
        yield from land_listed(
            request.discovery,
            request.only,
            request.run_id,
            warehouse.get_warehouse,
            context.log,
            empty_tables=[*(t.spec for t in SNAPSHOTS), *SENSOR_TABLES],
        )
    except SyncCancelled:
        raise
    except Exception as exc:
        context.log.error(f"snapshot listings not landed ({exc}); those tables keep their rows")
        yield TableFailed("listed snapshots", exc)


@_sync_step(
    "sync_snapshots",
    catalog.SNAPSHOTS,
    catalog.SNAPSHOT_GROUP,
    "snapshot",
    description="Snapshot tables: each listed whole and upserted; rows gone from the API stay "
    "with is_current = false.",
)
def snapshot_step(
    context: AssetExecutionContext,
    api: VisibilityAPIResource,
    warehouse: WarehouseResource,
    sync_session: ResourceParam[SyncSession],
) -> Iterator[AssetMaterialization | MaterializeResult | AssetCheckResult]:
    """Lists and upserts every selected snapshot table (:func:`sync.driver.sync_snapshots`)."""
    check_daily_config(context.run_config, api)
    alone, selected = _selection(context, catalog.SNAPSHOTS)
    yield from _run_checks(context, alone, warehouse, api)
    spec_of = {t.spec.name: t.spec for t in selected}

    def on_landed(event: TableLanded) -> Iterator[MaterializeResult | AssetCheckResult]:
        assert event.warehouse is not None  # the upsert's session, still open
        # evaluated before the materialization is recorded, in the upsert's session
        checked = list(_run_checks(context, checks_of([event.table]), event.warehouse, api, event.metadata))
        yield MaterializeResult(asset_key=event.table, metadata=_landed_metadata(event, spec_of[event.table]))
        yield from checked

    only = brand_filter(context.run.tags)
    events = sync_snapshots(
        selected,
        context.run_id,
        only,
        context.run.tags,
        sync_session.discovery,
        api,
        warehouse.get_warehouse,
        context.log,
        empty_tables=SENSOR_TABLES,
    )
    yield from _translated(events, on_landed)


snapshot_assets: list[AssetsDefinition] = [snapshot_step]
daily_assets: list[AssetsDefinition] = [build_daily_step(catalog.DAILY)]
