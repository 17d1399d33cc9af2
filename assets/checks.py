"""Asset checks on the landed tables, and the freshness policy of the daily assets.

A synced table's checks come from its catalog entry and run inside its sync step right after it
lands, so a check costs no step of its own; a failure's metadata shows counts and sample rows.
"""

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    DagsterInstance,
    FreshnessPolicy,
    asset_check,
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
ERROR, WARN = AssetCheckSeverity.ERROR, AssetCheckSeverity.WARN


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
        return AssetCheckKey(AssetKey(self.table), self.name)

    @property
    def spec(self) -> AssetCheckSpec:
        deps = [AssetKey(t) for t in self.reads]
        return AssetCheckSpec(self.name, asset=self.table, description=self.description, additional_deps=deps)

    def run(self, inputs: CheckInputs) -> AssetCheckResult:
        return self.evaluate(inputs)._replace(asset_key=self.key.asset_key, check_name=self.name)


def _result(
    failures: int,
    severity: AssetCheckSeverity,
    problem: str,
    metadata: dict[str, Any],
    passing: str | None = None,
) -> AssetCheckResult:
    """Passed (described by ``passing``) when ``failures`` is 0; else failed at ``severity``."""
    description = problem if failures else passing
    return AssetCheckResult(
        passed=failures == 0, severity=severity, description=description, metadata=metadata
    )


def keys_unique(spec: TableSpec, warehouse: Warehouse) -> AssetCheckResult:
    count, sample = queries.duplicate_keys(warehouse, spec.name, spec.key)
    key = ", ".join(spec.key)
    problem = f"{count} key value(s) of {spec.name} occur more than once (key {key})"
    metadata = {"duplicate_keys": count, "key": list(spec.key), "sample": sample}
    return _result(count, ERROR, problem, metadata, passing=f"every ({key}) of {spec.name} is unique")


def cited_pages_not_capped(inputs: CheckInputs) -> AssetCheckResult:
    count, sample = queries.capped_cited_page_days(inputs.warehouse)
    problem = f"{count} brand/day/engine list(s) capped: rows landed < total_count"
    return _result(count, WARN, problem, {"capped_slices": count, "sample": sample})


def generations_not_capped(inputs: CheckInputs) -> AssetCheckResult:
    metadata = inputs.metadata
    if metadata is None:
        event = inputs.instance.get_latest_materialization_event(AssetKey("generations"))
        if event is None or event.asset_materialization is None:
            return AssetCheckResult(passed=True, description="generations not materialized yet")
        metadata = dict(event.asset_materialization.metadata)
    # the asset records ``capped`` as JSON metadata: {brand id: {total_count, rows}}
    raw = metadata.get("capped")
    value = getattr(raw, "value", raw)
    capped = {str(k): dict(v) for k, v in value.items()} if isinstance(value, dict) else {}
    problem = f"generations of {len(capped)} brand(s) capped: rows landed < total_count"
    return _result(len(capped), WARN, problem, {"capped_brands": len(capped), "counts": capped})


def share_of_voice_sums_to_100(inputs: CheckInputs) -> AssetCheckResult:
    count, sample = queries.share_of_voice_off(inputs.warehouse, tolerance=SOV_TOLERANCE)
    problem = f"{count} brand/engine/day group(s) whose share of voice is not 100"
    return _result(count, ERROR, problem, {"groups_off": count, "tolerance": SOV_TOLERANCE, "sample": sample})


def compare_totals(
    api_entities: Iterable[dict[str, Any]], landed: dict[str, dict[str, float]]
) -> list[dict[str, Any]]:
    """Entities whose API window totals differ from the sums of their landed daily points."""
    mismatches = []
    for entity in api_entities:
        name = str(entity.get("brand_name"))
        totals = entity.get("totals") or {}
        for metric in SUMMABLE_METRICS:
            expected = totals.get(metric)
            got = landed.get(name, {}).get(metric, 0.0)
            if expected is not None and abs(float(expected) - got) > 1e-6:
                mismatches.append(
                    {"entity": name, "metric": metric, "api_total": expected, "landed_sum": got}
                )
    return mismatches


def run_lands_rollup(tags: Mapping[str, str]) -> bool:
    """Whether a run's partitions include the ``all`` engine (last in Dagster's order, so a range ending
    there); a run with no partition tags (checks alone) counts as landing it.
    """
    keys = [tags.get(t) for t in (ASSET_PARTITION_RANGE_END_TAG, PARTITION_NAME_TAG) if tags.get(t)]
    return not keys or any(str(k).rpartition("|")[2] == ALL for k in keys)


def window_totals_match_series(inputs: CheckInputs) -> AssetCheckResult:
    # only one run of a backfill split per engine or day asks the API (the others would repeat it)
    if inputs.api is None or not run_lands_rollup(inputs.run_tags):
        return AssetCheckResult(
            passed=True,
            description="compared by the run of the backfill that lands its newest `all` partition"
            if inputs.api is None
            else "this run landed no `all` partition: the all-engine totals were not compared",
            metadata={"brands_checked": 0},
        )
    # points before the lookback are settled: the service no longer restates them
    end_before = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=PARTITION_SETTINGS.lookback_days)
    windows = queries.trend_windows(inputs.warehouse, end_before=end_before, days=TOTALS_WINDOW_DAYS)
    mismatches: list[dict[str, Any]] = []
    with inputs.api.get_client() as client:
        for brand, start, end in windows:
            landed = queries.competitor_series_totals(
                inputs.warehouse, brand_id=brand, engine="all", start=start, end=end
            )
            data = client.competitor_trends(brand, engine=None, start=start, end=end, granularity="day")
            entities = [data.get("brand") or {}, *(data.get("competitors") or [])]
            for m in compare_totals(entities, landed):
                mismatches.append({"brand_id": brand, "window": f"{start}..{end}", **m})
    problem = f"{len(mismatches)} total(s) differ from the landed points"
    metadata = {"brands_checked": len(windows), "mismatches": len(mismatches), "sample": mismatches[:5]}
    return _result(len(mismatches), ERROR, problem, metadata)


def no_empty_partitions(table: str, inputs: CheckInputs) -> AssetCheckResult:
    """No cell of a materialized (day, engine) partition is empty where the evidence table (its
    entry's ``evidence`` rule) says the service had data."""
    spec = catalog.BY_NAME[table].spec
    assert spec.date_column is not None
    rule = _evidence(table)
    if not queries.table_exists(inputs.warehouse, rule.source_table):
        return AssetCheckResult(
            passed=True,
            description=f"{rule.source_table} has not landed yet: no evidence to check against",
            metadata={"evidence_table": rule.source_table, "partitions_checked": 0},
        )
    since = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=EMPTY_CHECK_DAYS)
    partitions = (str(p).partition("|") for p in inputs.instance.get_materialized_partitions(AssetKey(table)))
    materialized = {(day, engine) for day, _, engine in partitions if day >= since.isoformat()}
    expected = queries.expected_cells(inputs.warehouse, rule, since=since)
    landed = (
        queries.landed_cells(inputs.warehouse, table, spec.date_column, since=since) if expected else set()
    )
    empty = sorted(
        (cell for cell in expected - landed if (cell[2].isoformat(), cell[1]) in materialized),
        key=lambda c: (c[2], c[0], c[1]),
        reverse=True,
    )
    problem = f"{len(empty)} cell(s) of {table} landed empty while the service reported data"
    metadata = {
        "empty_cells": len(empty),
        "partitions_checked": len(materialized),
        "evidence_table": rule.source_table,
        "sample": [{"brand_id": b, "engine": e, "day": d.isoformat()} for b, e, d in empty[:5]],
    }
    return _result(len(empty), ERROR, problem, metadata)


def _evidence(table: str) -> queries.ExpectedCells:
    """The rule of ``no_empty_partitions`` that ``table``'s catalog entry names (``evidence``)."""
    evidence = getattr(catalog.BY_NAME[table], "evidence", None)  # a snapshot entry has none
    if evidence is None:
        raise ValueError(f"{table} declares no_empty_partitions without its evidence")
    return queries.EXPECTED_CELLS[evidence]


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
    "no_empty_partitions": lambda table: TableCheck(
        table,
        "no_empty_partitions",
        f"No materialized brand/engine/day of {table} is empty where "
        f"{_evidence(table).source_table} shows the service had data (last {EMPTY_CHECK_DAYS} days).",
        lambda inputs: no_empty_partitions(table, inputs),
        reads=(_evidence(table).source_table,),
    ),
}


def _keys_unique_description(spec: TableSpec) -> str:
    return f"No two rows of {spec.name} share a key ({', '.join(spec.key)})."


def _keys_unique_check(spec: TableSpec) -> TableCheck:
    def evaluate(inputs: CheckInputs) -> AssetCheckResult:
        return keys_unique(spec, inputs.warehouse)

    return TableCheck(spec.name, "keys_unique", _keys_unique_description(spec), evaluate)


def checks_of(tables: Iterable[str]) -> list[TableCheck]:
    """The checks of the synced ``tables``: ``keys_unique``, then those the entry declares (in its order).
    A table no sync lands has none here (the audits' checks are their own)."""
    out: list[TableCheck] = []
    for name in dict.fromkeys(tables):
        entry = catalog.BY_NAME.get(name)
        if entry is None:
            continue
        out += [_keys_unique_check(entry.spec), *(DECLARED_CHECKS[check](name) for check in entry.checks)]
    return out


@asset_check(
    asset=AUDIT_REPORTS.name, name="keys_unique", description=_keys_unique_description(AUDIT_REPORTS)
)
def audit_keys_unique(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.get_warehouse() as wh:
        return keys_unique(AUDIT_REPORTS, wh)


@asset_check(
    asset=AUDIT_REPORTS.name,
    name="no_timed_out_audits",
    description="Warns when audits timed out (still pending past the sensor's deadline) in the last 7 days.",
)
def no_timed_out_audits(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.get_warehouse() as wh:
        timed_out = queries.audits_timed_out_since(wh, dt.datetime.now(dt.UTC) - dt.timedelta(days=7))
    problem = f"{len(timed_out)} audit(s) timed out in the last 7 days"
    return _result(len(timed_out), WARN, problem, {"timed_out": len(timed_out), "sample": timed_out[:5]})


audit_checks: list[AssetChecksDefinition] = [audit_keys_unique, no_timed_out_audits]
