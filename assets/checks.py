"""Asset checks on the landed tables, and the freshness policy of the daily assets.

Each check reads the warehouse through ``resources/warehouse/queries.py`` (no SQL here) and fails
with metadata that says what broke and where (counts plus a few sample rows):

* ``keys_unique`` on every table: no key value occurs twice (ERROR).
* ``cited_pages_not_capped`` / ``generations_not_capped``: the service truncated a top-N or complete
  set (``capped``): WARN with ``total_count`` against the rows landed.
* ``share_of_voice_sums_to_100`` on ``competitor_trends``: per brand, engine and day (week, request
  window) with mentions, within ``SOV_TOLERANCE`` percentage points (ERROR).
* ``window_totals_match_series`` on ``competitor_trends``: the service's window ``totals`` (counts)
  equal the sums of the daily points landed, for each brand's last ``TOTALS_WINDOW_DAYS`` settled days
  of the ``all`` rollup (one API call per brand, only in runs that land the ``all`` rollup) (ERROR).
* ``no_empty_partitions`` on ``cited_pages``, ``prompt_mentions``, ``answers``: no (brand, engine,
  day) cell of a materialized partition is empty where the trends the service reported (landed in
  ``citation_trends`` / ``competitor_trends``) say it had data (ERROR); passes with a note while that
  evidence table has not landed.
* ``no_timed_out_audits`` on ``audit_reports``: audits that timed out in the last week (WARN).

The checks of the synced tables are :class:`TableCheck`\\ s, derived from their catalog entries
(:mod:`sync.catalog`): ``keys_unique`` from every spec, and the checks an entry names from
:data:`DECLARED_CHECKS`. They are declared on the sync steps (``check_specs``) and evaluated by them
right after each table lands, while the next table is fetched: a check is then no step of its own
(its start-up and events would add to every sync), and a run of checks alone (the UI's "Execute
checks") runs the step with no table selected. The audit checks stay ``@asset_check``\\ s of the
audit asset.

``DAILY_FRESHNESS`` is attached to every daily asset by :func:`with_freshness_policies`.
"""

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    DagsterInstance,
    FreshnessPolicy,
    apply_freshness_policy,
    asset_check,
    map_asset_specs,
)

from assets.dagster_tags import ASSET_PARTITION_RANGE_END_TAG, PARTITION_NAME_TAG
from assets.partitions import PARTITION_SETTINGS
from resources.api.endpoints import ALL
from resources.api.resource import VisibilityAPIResource
from resources.warehouse import queries
from resources.warehouse.base import Warehouse
from resources.warehouse.contract import TableSpec
from resources.warehouse.resource import WarehouseResource
from sync import catalog
from sync.tables import AUDIT_REPORTS

#: Share of voice is rounded per entity by the service; allow that much drift on the sum.
SOV_TOLERANCE = 0.5
#: Days of the competitor-trend window whose totals are compared with the landed points.
TOTALS_WINDOW_DAYS = 7
#: Days back the empty-partition checks look (cheap scans, and the period a daily sync rewrites).
EMPTY_CHECK_DAYS = 35
#: Counts that are sums of daily counts (rates and averages are not).
SUMMABLE_METRICS = ("responses_answered", "responses_with_brand", "mention_count", "citation_count")
#: The daily sync may land late; warn after 26 h without a materialization, fail after 30 h.
DAILY_FRESHNESS = FreshnessPolicy.time_window(
    fail_window=dt.timedelta(hours=30), warn_window=dt.timedelta(hours=26)
)


def _today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def _key(table: str) -> AssetKey:
    return AssetKey(table)


@dataclass(frozen=True)
class CheckInputs:
    """What a table's checks read: the warehouse, Dagster's records, the run, the API."""

    warehouse: Warehouse
    instance: DagsterInstance
    run_tags: Mapping[str, str] = field(default_factory=dict)
    #: None: checks that ask the service are skipped (another run of the backfill asks it)
    api: VisibilityAPIResource | None = None
    #: metadata of the table's materialization in this step; None: read its latest from the instance
    metadata: Mapping[str, Any] | None = None
    #: days the service may still restate (the settings' lookback): points before them are final
    lookback_days: int = PARTITION_SETTINGS.lookback_days


@dataclass(frozen=True)
class TableCheck:
    """One check of a synced table: declared on its sync step, evaluated after the table lands."""

    table: str
    name: str
    description: str
    evaluate: Callable[[CheckInputs], AssetCheckResult]
    #: tables the check reads besides its own (lineage in the UI)
    reads: tuple[str, ...] = ()

    @property
    def key(self) -> AssetCheckKey:
        return AssetCheckKey(_key(self.table), self.name)

    @property
    def spec(self) -> AssetCheckSpec:
        return AssetCheckSpec(
            self.name,
            asset=self.table,
            description=self.description,
            additional_deps=[_key(t) for t in self.reads],
        )

    def run(self, inputs: CheckInputs) -> AssetCheckResult:
        return self.evaluate(inputs)._replace(asset_key=self.key.asset_key, check_name=self.name)


# --- keys unique --------------------------------------------------------------------------------


def keys_unique_result(count: int, sample: list[Any], spec: TableSpec) -> AssetCheckResult:
    return AssetCheckResult(
        passed=count == 0,
        severity=AssetCheckSeverity.ERROR,
        description=f"{count} key value(s) of {spec.name} occur more than once (key {', '.join(spec.key)})"
        if count
        else f"every ({', '.join(spec.key)}) of {spec.name} is unique",
        metadata={"duplicate_keys": count, "key": list(spec.key), "sample": sample},
    )


def keys_unique(spec: TableSpec, inputs: CheckInputs) -> AssetCheckResult:
    count, sample = queries.duplicate_keys(inputs.warehouse, spec.name, spec.key)
    return keys_unique_result(count, sample, spec)


# --- capped ---------------------------------------------------------------------------------------


def cited_pages_not_capped(inputs: CheckInputs) -> AssetCheckResult:
    count, sample = queries.capped_cited_page_days(inputs.warehouse)
    return AssetCheckResult(
        passed=count == 0,
        severity=AssetCheckSeverity.WARN,
        description=f"{count} brand/day/engine list(s) capped: rows landed < total_count" if count else None,
        metadata={"capped_slices": count, "sample": sample},
    )


def capped_generations_result(capped: dict[str, dict[str, int]]) -> AssetCheckResult:
    """``capped``: brand id -> {"total_count", "rows"} of the brands whose listing was truncated."""
    return AssetCheckResult(
        passed=not capped,
        severity=AssetCheckSeverity.WARN,
        description=f"generations of {len(capped)} brand(s) capped: rows landed < total_count"
        if capped
        else None,
        metadata={"capped_brands": len(capped), "counts": capped},
    )


def _capped_from_metadata(metadata: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """The generations asset records ``capped`` as {brand id: {total_count, rows}} (JSON metadata)."""
    raw = metadata.get("capped")
    value = getattr(raw, "value", raw) if raw is not None else None
    if isinstance(value, dict):
        return {str(k): dict(v) for k, v in value.items()}
    return {}


def generations_not_capped(inputs: CheckInputs) -> AssetCheckResult:
    metadata = inputs.metadata
    if metadata is None:
        event = inputs.instance.get_latest_materialization_event(_key("generations"))
        materialization = event.asset_materialization if event is not None else None
        if materialization is None:
            return AssetCheckResult(passed=True, description="generations not materialized yet")
        metadata = dict(materialization.metadata)
    return capped_generations_result(_capped_from_metadata(metadata))


# --- share of voice -----------------------------------------------------------------------------


def share_of_voice_sums_to_100(inputs: CheckInputs) -> AssetCheckResult:
    count, sample = queries.share_of_voice_off(inputs.warehouse, tolerance=SOV_TOLERANCE)
    return AssetCheckResult(
        passed=count == 0,
        severity=AssetCheckSeverity.ERROR,
        description=f"{count} brand/engine/day group(s) whose share of voice is not 100" if count else None,
        metadata={"groups_off": count, "tolerance": SOV_TOLERANCE, "sample": sample},
    )


# --- window totals ------------------------------------------------------------------------------


def compare_totals(
    api_entities: Iterable[dict[str, Any]], landed: dict[str, dict[str, float]]
) -> list[dict[str, Any]]:
    """Entities whose API window totals differ from the sums of their landed daily points."""
    mismatches = []
    for entity in api_entities:
        name = str(entity.get("brand_name"))
        totals = entity.get("totals") or {}
        sums = landed.get(name, {})
        for metric in SUMMABLE_METRICS:
            expected = totals.get(metric)
            if expected is None:
                continue
            got = sums.get(metric, 0.0)
            if abs(float(expected) - got) > 1e-6:
                mismatches.append(
                    {"entity": name, "metric": metric, "api_total": expected, "landed_sum": got}
                )
    return mismatches


def settled_end(today: dt.date, lookback_days: int) -> dt.date:
    """First day the service may still restate: points before it are final."""
    return today - dt.timedelta(days=lookback_days)


def run_lands_rollup(tags: Mapping[str, str]) -> bool:
    """Whether a run's partitions include the ``all`` engine (a range ending there, or such a key).

    Ranges are rectangles in Dagster's order, where ``all`` is the last engine; a run with no
    partition tags (a run of checks alone) counts as landing it.
    """
    keys = [tags.get(t) for t in (ASSET_PARTITION_RANGE_END_TAG, PARTITION_NAME_TAG) if tags.get(t)]
    return not keys or any(str(k).rpartition("|")[2] == ALL for k in keys)


def window_totals_match_series(inputs: CheckInputs) -> AssetCheckResult:
    if inputs.api is None or not run_lands_rollup(inputs.run_tags):
        # each run of a backfill split per engine or day would otherwise ask the API the same questions
        return AssetCheckResult(
            passed=True,
            description="compared by the run of the backfill that lands its newest `all` partition"
            if inputs.api is None
            else "this run landed no `all` partition: the all-engine totals were not compared",
            metadata={"brands_checked": 0},
        )
    end_before = settled_end(_today(), inputs.lookback_days)
    windows = queries.trend_windows(inputs.warehouse, end_before=end_before, days=TOTALS_WINDOW_DAYS)
    landed = {
        brand: queries.competitor_series_totals(
            inputs.warehouse, brand_id=brand, engine="all", start=start, end=end
        )
        for brand, start, end in windows
    }
    mismatches: list[dict[str, Any]] = []
    with inputs.api.get_client() as client:
        for brand, start, end in windows:
            data = client.competitor_trends(brand, engine=None, start=start, end=end, granularity="day")
            entities = [data.get("brand") or {}, *(data.get("competitors") or [])]
            for m in compare_totals(entities, landed[brand]):
                mismatches.append({"brand_id": brand, "window": f"{start}..{end}", **m})
    return AssetCheckResult(
        passed=not mismatches,
        severity=AssetCheckSeverity.ERROR,
        description=f"{len(mismatches)} total(s) differ from the landed points" if mismatches else None,
        metadata={
            "brands_checked": len(windows),
            "mismatches": len(mismatches),
            "sample": mismatches[:5],
        },
    )


# --- no empty partitions ------------------------------------------------------------------------


def empty_cells(
    expected: set[queries.BrandDay], landed: set[queries.BrandDay], materialized: set[tuple[str, str]]
) -> list[queries.BrandDay]:
    """Cells of materialized (day, engine) partitions that hold no row though the service had data."""
    return sorted(
        (cell for cell in expected - landed if (cell[2].isoformat(), cell[1]) in materialized),
        key=lambda c: (c[2], c[0], c[1]),
        reverse=True,
    )


def _materialized(instance: DagsterInstance, key: AssetKey, since: dt.date) -> set[tuple[str, str]]:
    """(day, engine) partitions of ``key`` that Dagster recorded as materialized, from ``since``."""
    out: set[tuple[str, str]] = set()
    for partition in instance.get_materialized_partitions(key):
        day, _, engine = str(partition).partition("|")
        if day >= since.isoformat():
            out.add((day, engine))
    return out


def _evidence(table: str) -> queries.ExpectedCells:
    """The rule of ``no_empty_partitions`` that ``table``'s catalog entry names (``evidence``)."""
    evidence = getattr(catalog.BY_NAME[table], "evidence", None)  # a snapshot entry has none
    if evidence is None:
        raise ValueError(f"{table} declares no_empty_partitions without its evidence")
    return queries.EXPECTED_CELLS[evidence]


def no_empty_partitions(
    spec: TableSpec, rule: queries.ExpectedCells, inputs: CheckInputs
) -> AssetCheckResult:
    table = spec.name
    assert spec.date_column is not None
    since = _today() - dt.timedelta(days=EMPTY_CHECK_DAYS)
    if not queries.table_exists(inputs.warehouse, rule.source_table):
        return AssetCheckResult(
            passed=True,
            description=f"{rule.source_table} has not landed yet: no evidence to check against",
            metadata={"evidence_table": rule.source_table, "partitions_checked": 0},
        )
    materialized = _materialized(inputs.instance, _key(table), since)
    expected = queries.expected_cells(inputs.warehouse, rule, since=since)
    landed = (
        queries.landed_cells(inputs.warehouse, table, spec.date_column, since=since) if expected else set()
    )
    empty = empty_cells(expected, landed, materialized)
    return AssetCheckResult(
        passed=not empty,
        severity=AssetCheckSeverity.ERROR,
        description=f"{len(empty)} cell(s) of {table} landed empty while the service reported data"
        if empty
        else None,
        metadata={
            "empty_cells": len(empty),
            "partitions_checked": len(materialized),
            "evidence_table": rule.source_table,
            "sample": [{"brand_id": b, "engine": e, "day": d.isoformat()} for b, e, d in empty[:5]],
        },
    )


# --- the checks of the synced tables --------------------------------------------------------------

#: Checks a catalog entry may declare by name (``checks=(...)``), each made for the entry's table.
DECLARED_CHECKS: dict[str, Callable[[str], TableCheck]] = {
    "cited_pages_not_capped": lambda table: TableCheck(
        table,
        "cited_pages_not_capped",
        "Warns when a day's citation URL list was truncated (capped: more pages matched than the limit "
        "returned); the rows landed are then the top N, not the complete set.",
        cited_pages_not_capped,
    ),
    "generations_not_capped": lambda table: TableCheck(
        table,
        "generations_not_capped",
        "Warns when a brand's generations list was truncated (capped) at the last sync, with "
        "total_count and rows landed (from the materialization's `capped` metadata).",
        generations_not_capped,
    ),
    "share_of_voice_sums_to_100": lambda table: TableCheck(
        table,
        "share_of_voice_sums_to_100",
        f"Per brand, engine and day (week, request window) with mentions, share of voice over the brand "
        f"and its tracked competitors sums to 100 (within {SOV_TOLERANCE} points).",
        share_of_voice_sums_to_100,
    ),
    "window_totals_match_series": lambda table: TableCheck(
        table,
        "window_totals_match_series",
        f"For each brand's last {TOTALS_WINDOW_DAYS} settled days of the all-engine trend, the service's "
        "window totals (responses, mentions, citations) equal the sums of the landed daily points.",
        window_totals_match_series,
    ),
    # its rule (which table says the service had data): the entry's `evidence`, one of
    # resources/warehouse/queries.py's EXPECTED_CELLS
    "no_empty_partitions": lambda table: TableCheck(
        table,
        "no_empty_partitions",
        f"No materialized brand/engine/day of {table} is empty where "
        f"{_evidence(table).source_table} shows the service had data (last {EMPTY_CHECK_DAYS} days).",
        partial(no_empty_partitions, catalog.BY_NAME[table].spec, _evidence(table)),
        reads=(_evidence(table).source_table,),
    ),
}


def derived_checks(spec: TableSpec) -> list[TableCheck]:
    """The checks every synced table gets from its spec: no two rows share its key."""
    return [
        TableCheck(
            spec.name,
            "keys_unique",
            f"No two rows of {spec.name} share a key ({', '.join(spec.key)}).",
            partial(keys_unique, spec),
        )
    ]


def checks_of(tables: Iterable[str]) -> list[TableCheck]:
    """The checks of the synced ``tables``, from their catalog entries: those derived from the spec,
    then those the entry declares (in its order)."""
    out: list[TableCheck] = []
    for name in dict.fromkeys(tables):
        entry = catalog.BY_NAME.get(name)
        if entry is None:  # a table no sync lands (the audits: their checks are their own)
            continue
        out += derived_checks(entry.spec)
        out += [DECLARED_CHECKS[check](name) for check in entry.checks]
    return out


def table_checks() -> list[TableCheck]:
    """The checks of every synced table (the catalog's entries, in its order)."""
    return checks_of(catalog.BY_NAME)


def check_by_key(key: AssetCheckKey) -> TableCheck:
    return next(check for check in table_checks() if check.key == key)


# --- audits -------------------------------------------------------------------------------------


def _keys_unique_check(spec: TableSpec) -> AssetChecksDefinition:
    @asset_check(
        asset=_key(spec.name),
        name="keys_unique",
        description=f"No two rows of {spec.name} share a key ({', '.join(spec.key)}).",
    )
    def _check(warehouse: WarehouseResource) -> AssetCheckResult:
        with warehouse.get_warehouse() as wh:
            count, sample = queries.duplicate_keys(wh, spec.name, spec.key)
        return keys_unique_result(count, sample, spec)

    return _check


@asset_check(
    asset=_key("audit_reports"),
    name="no_timed_out_audits",
    description="Warns when audits timed out (still pending past the sensor's deadline) in the last 7 days.",
)
def no_timed_out_audits(warehouse: WarehouseResource) -> AssetCheckResult:
    since = dt.datetime.now(dt.UTC) - dt.timedelta(days=7)
    with warehouse.get_warehouse() as wh:
        timed_out = queries.audits_timed_out_since(wh, since)
    return AssetCheckResult(
        passed=not timed_out,
        severity=AssetCheckSeverity.WARN,
        description=f"{len(timed_out)} audit(s) timed out in the last 7 days" if timed_out else None,
        metadata={"timed_out": len(timed_out), "sample": timed_out[:5]},
    )


#: Checks of the audit sensor's table.
audit_checks: list[AssetChecksDefinition] = [
    _keys_unique_check(AUDIT_REPORTS),
    no_timed_out_audits,
]


# --- freshness ----------------------------------------------------------------------------------

#: Assets the daily schedule materializes (every synced table; not those landed by sensors).
DAILY_ASSET_KEYS: frozenset[AssetKey] = frozenset(_key(name) for name in catalog.BY_NAME)


def with_freshness_policies(
    assets: Sequence[AssetsDefinition | AssetSpec],
    policy: FreshnessPolicy = DAILY_FRESHNESS,
    keys: Iterable[AssetKey] = DAILY_ASSET_KEYS,
) -> list[AssetsDefinition | AssetSpec]:
    """The same assets, the daily ones carrying ``policy`` (an explicit policy on an asset wins).

    Freshness policies are evaluated by the daemon when ``dagster.yaml`` has ``freshness: enabled:
    true``; the UI then shows each asset's freshness state.
    """
    wanted = set(keys)

    def attach(spec: AssetSpec) -> AssetSpec:
        return apply_freshness_policy(spec, policy, overwrite_existing=False) if spec.key in wanted else spec

    return list(map_asset_specs(attach, assets))
