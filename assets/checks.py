"""Asset checks on the landed tables, and the freshness policy of the daily assets.

Each check reads the warehouse through ``resources/warehouse/queries.py`` (no SQL here) and fails
with metadata that says what broke and where (counts plus a few sample rows):

* ``keys_unique`` on every table: no key value occurs twice (ERROR).
* ``cited_pages_not_capped`` / ``generations_not_capped``: the service truncated a top-N or complete
  set (``capped``): WARN with ``total_count`` against the rows landed.
* ``share_of_voice_sums_to_100`` on ``competitor_trends``: per brand, engine and day with mentions,
  within ``SOV_TOLERANCE`` percentage points (ERROR).
* ``window_totals_match_series`` on ``competitor_trends``: the service's window ``totals`` (counts)
  equal the sums of the daily points landed, for each brand's last ``TOTALS_WINDOW_DAYS`` settled days
  of the ``all`` rollup (one API call per brand) (ERROR).
* ``no_empty_partitions`` on ``cited_pages``, ``prompt_mentions``, ``answers``: no (brand, engine,
  day) cell of a materialized partition is empty where the trends the service reported (landed in
  ``citation_trends`` / ``competitor_trends``) say it had data (ERROR).
* ``no_timed_out_audits`` on ``audit_reports``: audits that timed out in the last week (WARN).

``DAILY_FRESHNESS`` is attached to every daily asset by :func:`with_freshness_policies`.
"""

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    AssetsDefinition,
    AssetSpec,
    FreshnessPolicy,
    apply_freshness_policy,
    asset_check,
    map_asset_specs,
)

from assets.tables import ALL_TABLES
from pipelines.config import lookback_days_from_env
from resources.api.resource import VisibilityAPIResource
from resources.warehouse import queries
from resources.warehouse.base import TableSpec
from resources.warehouse.resource import WarehouseResource

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


# --- capped ---------------------------------------------------------------------------------------


@asset_check(
    asset=_key("cited_pages"),
    name="cited_pages_not_capped",
    description="Warns when a day's citation URL list was truncated (capped: more pages matched than "
    "the limit returned); the rows landed are then the top N, not the complete set.",
)
def cited_pages_not_capped(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.get_warehouse() as wh:
        count, sample = queries.capped_cited_page_days(wh)
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


def _capped_from_metadata(metadata: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The generations asset records ``capped`` as {brand id: {total_count, rows}} (JSON metadata)."""
    raw = metadata.get("capped")
    value = getattr(raw, "value", raw) if raw is not None else None
    if isinstance(value, dict):
        return {str(k): dict(v) for k, v in value.items()}
    return {}


@asset_check(
    asset=_key("generations"),
    name="generations_not_capped",
    description="Warns when a brand's generations list was truncated (capped) at the last sync, with "
    "total_count and rows landed (read from the materialization's `capped` metadata).",
)
def generations_not_capped(context: AssetCheckExecutionContext) -> AssetCheckResult:
    event = context.instance.get_latest_materialization_event(_key("generations"))
    materialization = event.asset_materialization if event is not None else None
    if materialization is None:
        return AssetCheckResult(passed=True, description="generations not materialized yet")
    return capped_generations_result(_capped_from_metadata(dict(materialization.metadata)))


# --- share of voice -----------------------------------------------------------------------------


@asset_check(
    asset=_key("competitor_trends"),
    name="share_of_voice_sums_to_100",
    description=f"Per brand, engine and day with mentions, share of voice over the brand and its "
    f"tracked competitors sums to 100 (within {SOV_TOLERANCE} points).",
)
def share_of_voice_sums_to_100(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.get_warehouse() as wh:
        count, sample = queries.share_of_voice_off(wh, tolerance=SOV_TOLERANCE)
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


@asset_check(
    asset=_key("competitor_trends"),
    name="window_totals_match_series",
    description=f"For each brand's last {TOTALS_WINDOW_DAYS} settled days of the all-engine trend, the "
    "service's window totals (responses, mentions, citations) equal the sums of the landed daily points.",
)
def window_totals_match_series(warehouse: WarehouseResource, api: VisibilityAPIResource) -> AssetCheckResult:
    end_before = settled_end(_today(), lookback_days_from_env())
    with warehouse.get_warehouse() as wh:
        windows = queries.trend_windows(wh, end_before=end_before, days=TOTALS_WINDOW_DAYS)
        landed = {
            brand: queries.competitor_series_totals(wh, brand_id=brand, engine="all", start=start, end=end)
            for brand, start, end in windows
        }
    mismatches: list[dict[str, Any]] = []
    with api.get_client() as client:
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
    expected: set[queries.Cell], landed: set[queries.Cell], materialized: set[tuple[str, str]]
) -> list[queries.Cell]:
    """Cells of materialized (day, engine) partitions that hold no row though the service had data."""
    return sorted(
        (cell for cell in expected - landed if (cell[2].isoformat(), cell[1]) in materialized),
        key=lambda c: (c[2], c[0], c[1]),
        reverse=True,
    )


def _materialized(context: AssetCheckExecutionContext, key: AssetKey, since: dt.date) -> set[tuple[str, str]]:
    """(day, engine) partitions of ``key`` that Dagster recorded as materialized, from ``since``."""
    out: set[tuple[str, str]] = set()
    for partition in context.instance.get_materialized_partitions(key):
        day, _, engine = str(partition).partition("|")
        if day >= since.isoformat():
            out.add((day, engine))
    return out


def _no_empty_partitions_check(table: str) -> AssetChecksDefinition:
    rule = queries.EXPECTED_CELLS[table]

    @asset_check(
        asset=_key(table),
        name="no_empty_partitions",
        description=f"No materialized brand/engine/day of {table} is empty where {rule.source_table} "
        f"shows the service had data (last {EMPTY_CHECK_DAYS} days).",
        additional_deps=[_key(rule.source_table)],
    )
    def _check(context: AssetCheckExecutionContext, warehouse: WarehouseResource) -> AssetCheckResult:
        since = _today() - dt.timedelta(days=EMPTY_CHECK_DAYS)
        materialized = _materialized(context, _key(table), since)
        with warehouse.get_warehouse() as wh:
            expected = queries.expected_cells(wh, rule, since=since)
            landed = queries.landed_cells(wh, rule, since=since) if expected else set()
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

    return _check


# --- audits -------------------------------------------------------------------------------------


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


# --- freshness ----------------------------------------------------------------------------------

#: Assets the daily schedule materializes (every table but the sensor-driven audit_reports).
DAILY_ASSET_KEYS: frozenset[AssetKey] = frozenset(
    _key(name) for name in ALL_TABLES if name != "audit_reports"
)


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


# --- registry -----------------------------------------------------------------------------------

keys_unique_checks: dict[str, AssetChecksDefinition] = {
    name: _keys_unique_check(spec) for name, spec in ALL_TABLES.items()
}
no_empty_partitions_checks: dict[str, AssetChecksDefinition] = {
    table: _no_empty_partitions_check(table) for table in queries.EXPECTED_CELLS
}

all_checks: list[AssetChecksDefinition] = [
    *keys_unique_checks.values(),
    cited_pages_not_capped,
    generations_not_capped,
    share_of_voice_sums_to_100,
    window_totals_match_series,
    *no_empty_partitions_checks.values(),
    no_timed_out_audits,
]
