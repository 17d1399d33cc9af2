"""Each asset check passes on good rows and fails, with counts, when its rule is broken.

Rows are landed into a real DuckDB file through the warehouse; checks are invoked through Dagster.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckKey,
    AssetCheckSeverity,
    AssetKey,
    AssetMaterialization,
    AssetSelection,
    DagsterInstance,
    Definitions,
    MetadataValue,
    define_asset_job,
)

from assets.checks import TOTALS_WINDOW_DAYS, no_timed_out_audits
from pipelines.resources import session_per_run
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.contract import PartitionScope
from resources.warehouse.resource import WarehouseResource
from sandbox.testing import SandboxHandle
from sync import transforms
from sync.progress import NO_PROGRESS
from sync.tables import CITATION_TRENDS, CITED_PAGES, COMPETITOR_TRENDS, PROMPT_MENTIONS
from tests.checks.conftest import SCHEMA, days_ago, evaluate, execute, land, meta
from tests.fixtures_sandbox import SANDBOX_TODAY

BRAND = str(uuid.UUID(int=1))
OTHER_BRAND = str(uuid.UUID(int=2))


def mention(i: int, day: dt.date) -> dict[str, Any]:
    return {
        "id": str(uuid.UUID(int=1000 + i)),
        "brand_id": BRAND,
        "prompt_id": str(uuid.UUID(int=500)),
        "response_id": str(uuid.UUID(int=600 + i)),
        "brand_name": "Acme",
        "position": 1.0,
        "sentiment": 0.5,
        "engine": "chatgpt",
        "checked_on": day,
    }


def cited(day: dt.date, url: str, *, capped: bool = False, total_count: int = 2, brand: str = BRAND) -> dict:
    return {
        "brand_id": brand,
        "date": day,
        "engine": "chatgpt",
        "rank": 1,
        "url": url,
        "domain": "acme.com",
        "root_domain": "acme.com",
        "citation_count": 3,
        "avg_position": 1.5,
        "citation_share": 0.3,
        "total_count": total_count,
        "total_citations": 10,
        "capped": capped,
    }


def trend_point(day: dt.date, name: str, sov: float, mentions: int, *, own: bool = False) -> dict[str, Any]:
    return {
        "brand_id": BRAND,
        "engine": "chatgpt",
        "granularity": "day",
        "competitor_id": None if own else str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
        "brand_name": name,
        "is_your_brand": own,
        "date": day,
        "responses_answered": 10,
        "responses_with_brand": mentions,
        "mention_count": mentions,
        "citation_count": 0,
        "share_of_voice": sov,
    }


def test_keys_unique_fails_when_a_key_occurs_twice(warehouse: WarehouseResource, db_path: Path) -> None:
    day = days_ago(3)
    land(warehouse, PROMPT_MENTIONS, [mention(1, day), mention(2, day)])
    assert evaluate("prompt_mentions", "keys_unique", warehouse).passed

    # no engine lets the writer land this, but a hand edit (or an old BigQuery table) can:
    table = f"{SCHEMA}.prompt_mentions"
    execute(db_path, f"INSERT INTO {table} SELECT * FROM {table} WHERE id = '{mention(1, day)['id']}'")
    result = evaluate("prompt_mentions", "keys_unique", warehouse)
    assert not result.passed and result.severity == AssetCheckSeverity.ERROR
    assert meta(result, "duplicate_keys") == 1
    assert meta(result, "sample")[0]["id"] == mention(1, day)["id"]


def test_capped_cited_pages_warn_with_total_count_and_rows_landed(warehouse: WarehouseResource) -> None:
    land(warehouse, CITED_PAGES, [cited(days_ago(4), "https://acme.com/a")])
    assert evaluate("cited_pages", "cited_pages_not_capped", warehouse).passed

    day = days_ago(2)
    land(
        warehouse,
        CITED_PAGES,
        [cited(day, f"https://acme.com/{i}", capped=True, total_count=5000) for i in range(2)],
    )
    result = evaluate("cited_pages", "cited_pages_not_capped", warehouse)
    assert not result.passed and result.severity == AssetCheckSeverity.WARN
    assert meta(result, "capped_slices") == 1
    [sample] = meta(result, "sample")
    assert (sample["date"], sample["total_count"], sample["rows_landed"]) == (day.isoformat(), 5000, 2)


def test_capped_generations_warn_from_the_materialization_metadata(
    instance: DagsterInstance, warehouse: WarehouseResource
) -> None:
    key = AssetKey("generations")
    instance.report_runless_asset_event(
        AssetMaterialization(key, metadata={"capped": MetadataValue.json({})})
    )
    assert evaluate("generations", "generations_not_capped", warehouse, instance).passed

    capped = {BRAND: {"rows": 999, "total_count": 1250}}
    instance.report_runless_asset_event(
        AssetMaterialization(key, metadata={"capped": MetadataValue.json(capped)})
    )
    result = evaluate("generations", "generations_not_capped", warehouse, instance)
    assert not result.passed and result.severity == AssetCheckSeverity.WARN
    assert meta(result, "capped_brands") == 1 and meta(result, "counts") == capped


def test_share_of_voice_off_100_on_a_day_with_mentions_fails(warehouse: WarehouseResource) -> None:
    good, bad, quiet = days_ago(5), days_ago(4), days_ago(3)
    rows = [
        trend_point(good, "Acme", 50.0, 5, own=True),
        trend_point(good, "Rival", 30.04, 3),
        trend_point(good, "Other", 19.98, 2),  # 100.02: within rounding
        trend_point(quiet, "Acme", 0.0, 0, own=True),  # no mentions: nothing to sum
        trend_point(quiet, "Rival", 0.0, 0),
    ]
    land(warehouse, COMPETITOR_TRENDS, rows)
    assert evaluate("competitor_trends", "share_of_voice_sums_to_100", warehouse).passed

    land(
        warehouse,
        COMPETITOR_TRENDS,
        [trend_point(bad, "Acme", 50.0, 5, own=True), trend_point(bad, "Rival", 40.0, 4)],
    )
    result = evaluate("competitor_trends", "share_of_voice_sums_to_100", warehouse)
    assert not result.passed
    assert meta(result, "groups_off") == 1
    [sample] = meta(result, "sample")
    assert (sample["date"], sample["engine"], sample["total"]) == (bad.isoformat(), "chatgpt", 90.0)


def test_partition_materialized_empty_while_the_service_reported_citations_fails(
    warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    d1, d2, d3 = days_ago(6), days_ago(5), days_ago(4)
    trend = {
        "brand_id": BRAND,
        "engine": "chatgpt",
        "granularity": "day",
        "target_type": "domain",
        "target_value": "acme.com",
        "topic_id": "all",
        "is_own_domain": True,
        "citations": 3,
        "avg_position": 1.0,
        "share": 0.3,
    }
    land(
        warehouse,
        CITATION_TRENDS,
        [
            {**trend, "date": d1, "brand_total_citations": 10},
            {**trend, "date": d2, "brand_total_citations": 7},
            {**trend, "date": d3, "brand_total_citations": 0},  # ran, cited nothing: may be empty
        ],
    )
    land(warehouse, CITED_PAGES, [cited(d1, "https://acme.com/a")])
    key = AssetKey("cited_pages")
    for day in (d1, d3):
        instance.report_runless_asset_event(AssetMaterialization(key, partition=f"{day.isoformat()}|chatgpt"))
    assert evaluate("cited_pages", "no_empty_partitions", warehouse, instance).passed

    instance.report_runless_asset_event(AssetMaterialization(key, partition=f"{d2.isoformat()}|chatgpt"))
    result = evaluate("cited_pages", "no_empty_partitions", warehouse, instance)
    assert not result.passed
    assert meta(result, "empty_cells") == 1
    assert meta(result, "sample") == [{"brand_id": BRAND, "engine": "chatgpt", "day": d2.isoformat()}]


def test_timed_out_audits_warn_with_the_audit(warehouse: WarehouseResource) -> None:
    from assets.audits import AuditLandingConfig, audit_row_table
    from sync.tables import AUDIT_REPORTS

    now = dt.datetime.now(dt.UTC)
    audit = AuditLandingConfig(
        audit_id=str(uuid.UUID(int=77)),
        brand_id=BRAND,
        url="https://acme.com/x",
        status="complete",
        poll="/v1/audit-reports/x",
        requested_at=(now - dt.timedelta(hours=2)).isoformat(),
        completed_at=(now - dt.timedelta(hours=1)).isoformat(),
        report_json="{}",
    )
    with warehouse.get_warehouse() as wh:
        wh.ensure_table(AUDIT_REPORTS)
        wh.upsert_snapshot(AUDIT_REPORTS, audit_row_table(audit), "r1", None)
    assert no_timed_out_audits(warehouse=warehouse).passed

    stuck = audit.model_copy(
        update={
            "audit_id": str(uuid.UUID(int=78)),
            "status": "timed_out",
            "completed_at": None,
            "report_json": None,
            "timed_out_at": now.isoformat(),
        }
    )
    with warehouse.get_warehouse() as wh:
        wh.upsert_snapshot(AUDIT_REPORTS, audit_row_table(stuck), "r2", None)
    result = no_timed_out_audits(warehouse=warehouse)
    assert not result.passed and result.severity == AssetCheckSeverity.WARN
    assert [a["id"] for a in meta(result, "sample")] == [stuck.audit_id]


def test_window_totals_disagreeing_with_landed_points_fail(
    sandbox: SandboxHandle, warehouse: WarehouseResource, db_path: Path
) -> None:
    api = VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"])
    end = SANDBOX_TODAY  # the sandbox's data ends the day before: those days are settled
    start = end - dt.timedelta(days=TOTALS_WINDOW_DAYS)
    with api.get_client() as client:
        brand = next(iter(client.list_brands()))
        data = client.competitor_trends(brand["id"], engine=None, start=start, end=end)
    points = transforms.competitor_trend_table(data, brand_id=brand["id"], engine="all")
    scope = PartitionScope((brand["id"],), start, end, ("all",))
    with warehouse.get_warehouse() as wh:
        wh.ensure_table(COMPETITOR_TRENDS)
        wh.replace_partitions(COMPETITOR_TRENDS, points, scope, "test-run")
    result = evaluate("competitor_trends", "window_totals_match_series", warehouse, api=api)
    assert result.passed, meta(result, "sample")
    assert meta(result, "brands_checked") == 1

    day = (end - dt.timedelta(days=2)).isoformat()
    execute(
        db_path,
        f"UPDATE {SCHEMA}.competitor_trends SET mention_count = mention_count + 1 "
        f"WHERE is_your_brand AND date = DATE '{day}'",
    )
    result = evaluate("competitor_trends", "window_totals_match_series", warehouse, api=api)
    assert not result.passed
    [mismatch] = meta(result, "sample")
    assert (mismatch["entity"], mismatch["metric"]) == (brand["name"], "mention_count")
    assert mismatch["landed_sum"] == mismatch["api_total"] + 1


def test_checks_run_alone_in_a_dagster_run_of_the_sync_step_without_fetching(
    warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    """What the UI's "Execute checks" does: the sync step runs with only the checks selected."""
    from assets.builders import daily_assets

    day = days_ago(3)
    land(
        warehouse,
        COMPETITOR_TRENDS,
        [trend_point(day, "Acme", 60.0, 6, own=True), trend_point(day, "Rival", 30.0, 3)],
    )
    trends = AssetKey("competitor_trends")
    selected = [AssetCheckKey(trends, "keys_unique"), AssetCheckKey(trends, "share_of_voice_sums_to_100")]
    # an API nobody listens on: a step that fetched would fail
    api = VisibilityAPIResource(
        api_url="http://127.0.0.1:9", api_key="unused-key-0123456789", retry_deadline_seconds=1
    )
    defs = Definitions(
        assets=daily_assets,
        jobs=[define_asset_job("trend_checks", selection=AssetSelection.checks(*selected))],
        resources={
            "warehouse": warehouse,
            "api": api,
            "progress": NO_PROGRESS,
            "sync_session": session_per_run(),
        },
    )
    result = defs.resolve_job_def("trend_checks").execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    outcomes = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert outcomes == {"keys_unique": True, "share_of_voice_sums_to_100": False}
    assert not result.get_asset_materialization_events()


def test_only_a_run_landing_the_all_rollup_compares_window_totals_with_the_api() -> None:
    from assets.checks import run_lands_rollup

    start, end = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
    assert run_lands_rollup({start: "2026-09-01|chatgpt", end: "2026-09-10|all"})
    assert run_lands_rollup({"dagster/partition": "2026-09-01|all"})
    assert run_lands_rollup({})  # no partitions: a check run of its own
    # one run of a backfill split per engine: the others' checks would repeat the same API calls
    assert not run_lands_rollup({start: "2026-09-01|claude", end: "2026-09-10|claude"})
    assert not run_lands_rollup({"dagster/partition": "2026-09-01|gemini"})
