"""The assets for real: Dagster runs in process, the sandbox over loopback HTTP, DuckDB files."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from dagster import ExecuteInProcessResult, RunRequest, build_schedule_context

from assets.builders import snapshot_assets
from assets.partitions import partition_key
from pipelines.schedules import daily_sync_schedule
from resources.api.client import VisibilityClient
from resources.api.endpoints import ENGINES
from sandbox.testing import SandboxHandle
from settings import load_settings
from sync import catalog
from sync.planning import (
    ALL,
    expected_requests,
)
from tests.assets.conftest import FACTS, TRENDS, Sync, days, metadata
from tests.endpoint_keys import Endpoint
from tests.fixtures_sandbox import SANDBOX_TODAY
from tests.sync.conftest import D, served, workspace_inputs

#: the shipped tables' planners, as their catalog entries declare them
plan_mentions = catalog.PROMPT_MENTIONS.planner
plan_answers = catalog.ANSWERS.planner
plan_competitor_trends = catalog.COMPETITOR_TRENDS.planner
plan_citation_trends = catalog.CITATION_TRENDS.planner


def materialize_request(sync: Sync, request: RunRequest) -> ExecuteInProcessResult:
    """Run a schedule's RunRequest the way the daemon would: its tags, the job's assets."""
    return sync.run(["competitor_trends"], tags=dict(request.tags))


def test_one_partition_lands_exactly_that_days_engine_rows(sync: Sync, sandbox: SandboxHandle) -> None:
    sync.run(["prompt_mentions"], partition_key=partition_key(D, "claude"))

    expected: set[str] = set()
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        for brand in client.list_brands():
            if "claude" in brand["engines"]:
                for prompt in client.list_prompts(brand["id"]):
                    rows = client.list_prompt_mentions(
                        prompt["id"], engine="claude", start=D, end=D + dt.timedelta(days=1)
                    )
                    expected.update(r["id"] for r in rows)
    landed = sync.query("SELECT id, checked_on, engine FROM prompt_mentions")
    assert expected, "the sandbox should have claude mentions on that day"
    assert {r[0] for r in landed} == expected
    assert {(r[1], r[2]) for r in landed} == {(D, "claude")}


def test_a_range_run_makes_the_planners_requests_and_lists_brands_once(
    sync: Sync, sandbox: SandboxHandle
) -> None:
    dates, engines = days(D, 3), ("chatgpt", "claude", "perplexity")
    sandbox.reset_stats()
    result = sync.run(FACTS, dates[0], dates[-1], engines, tags={"dagster/backfill": "bf1"})

    counts = served(sandbox)
    cells = {(d, e) for d in dates for e in engines}
    inputs = workspace_inputs(sandbox)
    mentions_plan = plan_mentions(cells, inputs, ENGINES)
    answers_plan = plan_answers(cells, inputs, ENGINES)
    # mentions never exceed one page here: the sandbox served exactly the planned calls
    assert counts[Endpoint.MENTIONS] == expected_requests(mentions_plan)[Endpoint.MENTIONS]
    # answers page at 100 rows: planned calls plus the pages the asset reports beyond them
    answers_meta = metadata(result, "answers")
    beyond = answers_meta["requests_beyond_plan"].get(Endpoint.ANSWERS, 0)
    assert counts[Endpoint.ANSWERS] == expected_requests(answers_plan)[Endpoint.ANSWERS] + beyond
    # discovery: one brand listing per sync, shared by its tables; one prompt listing per brand
    assert counts[Endpoint.BRANDS] == 1
    assert counts[Endpoint.PROMPTS] == len(inputs)
    # the client counted what the server served
    mentions_meta = metadata(result, "prompt_mentions")
    assert mentions_meta["requests_by_endpoint"][Endpoint.MENTIONS] == counts[Endpoint.MENTIONS]
    # one fetch step for the whole range, and a materialization for every cell
    assert [e.step_key for e in result.all_events if e.is_step_success] == ["sync_daily"]
    events = result.get_asset_materialization_events()
    assert len([e for e in events if e.asset_key.path == ["prompt_mentions"]]) == len(cells)
    assert mentions_meta["window_start"] == dates[0].isoformat()
    assert mentions_meta["rows_landed"] == sync.query("SELECT COUNT(*) FROM prompt_mentions")[0][0] > 0
    assert "dagster/column_schema" in mentions_meta
    landed_cells = {(r[0], r[1]) for r in sync.query("SELECT DISTINCT checked_on, engine FROM answers")}
    assert landed_cells <= cells and {e for _, e in landed_cells} == set(engines)


def test_rerunning_a_range_gives_the_same_tables(sync: Sync) -> None:
    dates = days(D, 2)
    snapshot = "SELECT * EXCLUDE (_loaded_at, _run_id) FROM {} ORDER BY id"
    sync.run(FACTS, dates[0], dates[-1], ("gemini", "google_ai_overviews"))
    first = {t: sync.query(snapshot.format(t)) for t in ("prompt_mentions", "answers")}
    sync.run(FACTS, dates[0], dates[-1], ("gemini", "google_ai_overviews"))
    second = {t: sync.query(snapshot.format(t)) for t in ("prompt_mentions", "answers")}
    assert first == second
    assert all(first.values())
    assert sync.query("SELECT COUNT(DISTINCT _run_id) FROM prompt_mentions")[0][0] == 1


def test_the_all_rollup_lands_for_every_rollup_table(sync: Sync, sandbox: SandboxHandle) -> None:
    dates = days(D, 2)
    sandbox.reset_stats()
    result = sync.run(TRENDS, dates[0], dates[-1], ("copilot", ALL))

    for table in ("cited_pages", "citation_trends", "competitor_trends"):
        engines = {r[0] for r in sync.query(f"SELECT DISTINCT engine FROM {table}")}
        assert ALL in engines, table
        assert engines <= {"copilot", ALL}, table
    targets = sync.query("SELECT DISTINCT is_own_domain FROM citation_trends WHERE engine = 'all'")
    assert {r[0] for r in targets} == {True, False}  # own domain and tracked competitors' domains
    entities = sync.query(
        "SELECT COUNT(DISTINCT brand_name), BOOL_OR(is_your_brand), BOOL_OR(competitor_id IS NULL) "
        "FROM competitor_trends WHERE engine = 'all'"
    )[0]
    assert entities[0] > 1 and entities[1] and entities[2]
    # the rollup is fetched with the engine omitted, once per brand over the whole range
    counts = served(sandbox)
    cells = {(d, e) for d in dates for e in ("copilot", ALL)}
    inputs = workspace_inputs(sandbox, competitors=True)
    # the window-totals check of the landed `all` rollup asks the service once per brand it checks
    [totals] = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "window_totals_match_series"
    ]
    checked = totals.metadata["brands_checked"].value
    assert totals.passed and checked == len(inputs)
    planned = len(plan_competitor_trends(cells, inputs).calls)
    assert counts[Endpoint.COMPETITOR_TRENDS] == planned + checked
    assert counts[Endpoint.CITATION_TRENDS] == len(plan_citation_trends(cells, inputs).calls)
    assert counts[Endpoint.CITATION_URLS] == sum(len(dates) * (1 + ("copilot" in b.engines)) for b in inputs)


def test_the_daily_schedule_lookback_corrects_restated_days(
    sandbox_factory: Callable[..., SandboxHandle], tmp_path, instance
) -> None:
    sandbox = sandbox_factory(restate_days=3)
    sync = Sync(sandbox, tmp_path / "wh.duckdb", instance)
    first_day = SANDBOX_TODAY - dt.timedelta(days=7)
    sync.run(["competitor_trends"], first_day, SANDBOX_TODAY - dt.timedelta(days=1), (ALL,))
    query = (
        "SELECT brand_id, brand_name, date, mention_count, share_of_voice, _run_id FROM competitor_trends "
        "WHERE engine = 'all' AND granularity = 'day' ORDER BY ALL"
    )
    before = sync.query(query)
    sandbox.restate()

    context = build_schedule_context(
        scheduled_execution_time=dt.datetime(
            SANDBOX_TODAY.year, SANDBOX_TODAY.month, SANDBOX_TODAY.day, 3, tzinfo=dt.UTC
        )
    )
    request = daily_sync_schedule(load_settings({}))(context)  # the default lookback: 3 days
    result = materialize_request(sync, request)
    assert metadata(result, "competitor_trends")["window_start"] == "2026-10-28"

    after = sync.query(query)
    restated = {SANDBOX_TODAY - dt.timedelta(days=i) for i in (1, 2, 3)}
    # the days before the lookback are untouched (same run), the lookback days were replaced
    assert [r for r in after if r[2] < dt.date(2026, 10, 28)] == [
        r for r in before if r[2] < dt.date(2026, 10, 28)
    ]
    old = {r[:3]: r[3:5] for r in before if r[2] in restated}
    new = {r[:3]: r[3:5] for r in after if r[2] in restated}
    assert old.keys() == new.keys() and old != new
    # and they now hold what the service says after the restatement
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        for brand_id in {r[0] for r in after}:
            data = client.competitor_trends(brand_id, start=min(restated), end=SANDBOX_TODAY)
            for entity in [data["brand"], *data["competitors"]]:
                for point in entity["series"]:
                    key = (brand_id, entity["brand_name"], dt.date.fromisoformat(point["date"]))
                    assert new[key] == (point["mention_count"], point["share_of_voice"])


def test_out_of_scope_brands_are_skipped_with_a_warning_and_their_rows_untouched(
    sync: Sync, sandbox: SandboxHandle, instance
) -> None:
    key = partition_key(D, "chatgpt")
    first = sync.run(["prompt_mentions"], partition_key=key)
    world = sandbox.world
    scoped_key = next(k for k in world.keys.values() if k.role == "scoped")
    in_scope = [b.id for b in world.brands if b.id in scoped_key.brand_scope]
    out_of_scope = next(
        b.id
        for b in world.brands
        if b.workspace_id == scoped_key.workspace_id and b.id not in scoped_key.brand_scope
    )
    before = dict(sync.query("SELECT brand_id, COUNT(*) FROM prompt_mentions GROUP BY ALL"))
    assert out_of_scope in before

    second = sync.run(
        ["prompt_mentions"],
        partition_key=key,
        role="scoped",
        tags={"visibility/brands": f"{in_scope[0]},{out_of_scope}"},
    )

    runs = dict(sync.query("SELECT brand_id, ANY_VALUE(_run_id) FROM prompt_mentions GROUP BY ALL"))
    after = dict(sync.query("SELECT brand_id, COUNT(*) FROM prompt_mentions GROUP BY ALL"))
    assert runs[out_of_scope] == first.run_id and after[out_of_scope] == before[out_of_scope]
    assert runs[in_scope[0]] == second.run_id
    assert metadata(second, "prompt_mentions")["brands_out_of_scope"] == [out_of_scope]
    warnings = [
        e.user_message
        for e in instance.all_logs(second.run_id)
        if e.level == logging.WARNING and out_of_scope in e.user_message
    ]
    assert warnings and "out of this key's scope" in warnings[0]


def test_snapshots_land_and_a_scoped_key_never_retires_brands_it_cannot_see(
    sync: Sync, sandbox: SandboxHandle
) -> None:
    result = sync.run(snapshot_assets)
    counts = {t: sync.query(f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("brands", "prompts", "topics")}
    assert counts["brands"] == 3 and counts["prompts"] == 75 and counts["topics"] > 0
    assert sync.query("SELECT COUNT(*) FROM tracked_competitors")[0][0] > 0
    assert sync.query("SELECT COUNT(*) FROM generations")[0][0] > 0
    assert metadata(result, "generations")["capped_responses"] == 0

    # a brand-scoped key sees two of the three brands: the third is not its to retire
    scoped = sync.run(["brands"], role="scoped")
    assert metadata(scoped, "brands")["rows_landed"] == 2
    current = dict(sync.query("SELECT id, is_current FROM brands"))
    assert sorted(current.values()) == [True, True, True]
    assert len(sync.query("SELECT * FROM brands_current")) == 3


def test_answers_of_a_brand_partial_engine_run_are_filtered_by_engine(sync: Sync) -> None:
    result = sync.run(["answers"], D, D, ("claude",))
    assert {r[0] for r in sync.query("SELECT DISTINCT engine FROM answers")} == {"claude"}
    meta = metadata(result, "answers")
    assert meta["partitions"] == 1
    workspace = sync.sandbox.world.keys[sync.sandbox.keys["workspace"]].workspace_id
    unmeasured = {
        b.id for b in sync.sandbox.world.brands if b.workspace_id == workspace and "claude" not in b.engines
    }
    assert unmeasured and meta["engines_not_measured"] == {b: ["claude"] for b in unmeasured}
