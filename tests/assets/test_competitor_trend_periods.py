"""Competitor trends' weeks and window totals, landed for real: Dagster runs against the sandbox
into DuckDB files, their requests counted by the sandbox."""

from __future__ import annotations

import datetime as dt
from typing import Any

from dagster import ExecuteInProcessResult

from resources.api.client import VisibilityClient
from resources.api.endpoints import ENGINES
from sandbox.testing import SandboxHandle
from sync import catalog
from sync.planning import ALL
from tests.assets.conftest import Sync, days, metadata
from tests.endpoint_keys import Endpoint
from tests.sync.conftest import served, workspace_inputs

#: the shipped table's planner, as their catalog entries declare them
plan_competitor_trends = catalog.COMPETITOR_TRENDS.planner

THURSDAY = dt.date(2026, 10, 22)
SUNDAY = dt.date(2026, 10, 25)
MONDAY = SUNDAY - dt.timedelta(days=6)
ROWS = (
    "SELECT granularity, engine, brand_id, brand_name, period_start, date, responses_answered, "
    "mention_count, share_of_voice FROM competitor_trends ORDER BY ALL"
)
METRICS = ("responses_answered", "mention_count", "share_of_voice")


def api_trends(sandbox: SandboxHandle, start: dt.date, end: dt.date, granularity: str) -> dict[tuple, dict]:
    """(brand_id, entity) -> the all-engine response's entity: its series and totals."""
    out: dict[tuple, dict] = {}
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        for brand in client.list_brands():
            data = client.competitor_trends(brand["id"], start=start, end=end, granularity=granularity)
            for entity in [data["brand"], *data["competitors"]]:
                out[(brand["id"], entity["brand_name"])] = entity
    return out


def landed(sync: Sync, granularity: str, engine: str = ALL) -> dict[tuple, list[tuple[Any, ...]]]:
    rows = sync.query(
        "SELECT brand_id, brand_name, period_start, date, responses_answered, mention_count, share_of_voice "
        "FROM competitor_trends WHERE granularity = ? AND engine = ? ORDER BY ALL",
        [granularity, engine],
    )
    out: dict[tuple, list[tuple[Any, ...]]] = {}
    for r in rows:
        out.setdefault((r[0], r[1]), []).append(r[2:])
    return out


def brands_checked(result: ExecuteInProcessResult) -> int:
    """Brands whose all-engine totals the run's check asked the service for (one call each)."""
    [check] = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "window_totals_match_series"
    ]
    return int(check.metadata["brands_checked"].value)


def test_a_run_holding_a_sunday_lands_its_whole_week_and_the_windows_totals(
    sync: Sync, sandbox: SandboxHandle
) -> None:
    # Thursday to Tuesday: the days, the week ending on Sunday (from the Monday before the run)
    sandbox.reset_stats()
    result = sync.run(["competitor_trends"], THURSDAY, THURSDAY + dt.timedelta(days=5), ("copilot", ALL))
    counts = served(sandbox)  # before this test asks the API itself
    run_end = THURSDAY + dt.timedelta(days=6)

    weeks = api_trends(sandbox, MONDAY, SUNDAY + dt.timedelta(days=1), "week")
    assert landed(sync, "week") == {
        key: [(MONDAY, SUNDAY, *(p[m] for m in METRICS)) for p in entity["series"]]
        for key, entity in weeks.items()
    }
    window = api_trends(sandbox, THURSDAY, run_end, "day")
    assert landed(sync, "window") == {
        key: [(THURSDAY, run_end - dt.timedelta(days=1), *(entity["totals"][m] for m in METRICS))]
        for key, entity in window.items()
    }
    days_landed = landed(sync, "day")
    assert all(len(points) == 6 and all(p[0] == p[1] for p in points) for points in days_landed.values())

    # what it cost: one day call (series and totals) and one week call per brand and engine
    inputs = workspace_inputs(sandbox)
    cells = {(d, e) for d in days(THURSDAY, 6) for e in ("copilot", ALL)}
    calls = plan_competitor_trends(cells, inputs).calls
    pairs = sum(1 + ("copilot" in b.engines) for b in inputs)
    assert sum(c.granularity == "day" for c in calls) == pairs
    assert sum(c.granularity == "week" for c in calls) == pairs
    checked = brands_checked(result)
    assert counts[Endpoint.COMPETITOR_TRENDS] == 2 * pairs + checked
    assert metadata(result, "competitor_trends")["calls_planned"] == {Endpoint.COMPETITOR_TRENDS: 2 * pairs}
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations["keys_unique"] and evaluations["share_of_voice_sums_to_100"]


def test_a_run_without_a_sunday_asks_for_no_week(sync: Sync, sandbox: SandboxHandle) -> None:
    sandbox.reset_stats()
    monday_to_friday = (SUNDAY + dt.timedelta(days=1), SUNDAY + dt.timedelta(days=5))
    result = sync.run(["competitor_trends"], *monday_to_friday, (ALL,))
    brands = len(workspace_inputs(sandbox))
    assert served(sandbox)[Endpoint.COMPETITOR_TRENDS] == brands + brands_checked(result)  # day calls only
    assert {r[0] for r in sync.query("SELECT DISTINCT granularity FROM competitor_trends")} == {
        "day",
        "window",
    }


def test_rerunning_gives_the_same_table_and_a_later_window_replaces_the_earlier_one(sync: Sync) -> None:
    first = (THURSDAY, SUNDAY)
    sync.run(["competitor_trends"], *first, (ALL,))
    before = sync.query(ROWS)
    sync.run(["competitor_trends"], *first, (ALL,))
    assert sync.query(ROWS) == before
    keys = sync.query(
        "SELECT COUNT(*), COUNT(DISTINCT (brand_id, engine, granularity, brand_name, date)) "
        "FROM competitor_trends"
    )
    assert keys[0][0] == keys[0][1] > 0

    # a later run over Saturday and Sunday: its window ends on the same Sunday and replaces the first
    sync.run(["competitor_trends"], SUNDAY - dt.timedelta(days=1), SUNDAY, (ALL,))
    windows = sync.query(
        "SELECT DISTINCT period_start, date FROM competitor_trends WHERE granularity = 'window'"
    )
    assert windows == [(SUNDAY - dt.timedelta(days=1), SUNDAY)]
    # a run over Sunday and Monday ends later: the window that ended on Sunday is gone with its day
    sync.run(["competitor_trends"], SUNDAY, SUNDAY + dt.timedelta(days=1), (ALL,))
    windows = sync.query(
        "SELECT DISTINCT period_start, date FROM competitor_trends WHERE granularity = 'window'"
    )
    assert windows == [(SUNDAY, SUNDAY + dt.timedelta(days=1))]
    # the week still belongs to its Sunday, fetched again by the run that held it
    assert sync.query(
        "SELECT DISTINCT period_start, date FROM competitor_trends WHERE granularity = 'week'"
    ) == [(MONDAY, SUNDAY)]


def test_a_backfill_of_two_weeks_costs_one_week_call_per_brand_and_engine(
    sync: Sync, sandbox: SandboxHandle
) -> None:
    """The figure docs/TABLES.md gives: weeks add one call per brand and engine, whatever their number."""
    first, last = MONDAY - dt.timedelta(days=7), SUNDAY
    sandbox.reset_stats()
    result = sync.run(["competitor_trends"], first, last, ENGINES[:6], tags={"dagster/backfill": "bf-weeks"})
    inputs = workspace_inputs(sandbox)
    pairs = sum(len(b.engines & set(ENGINES[:6])) for b in inputs)
    assert metadata(result, "competitor_trends")["calls_planned"] == {Endpoint.COMPETITOR_TRENDS: 2 * pairs}
    assert served(sandbox)[Endpoint.COMPETITOR_TRENDS] == 2 * pairs  # no `all`: the totals check stays quiet
    weeks = sync.query("SELECT DISTINCT period_start, date FROM competitor_trends WHERE granularity = 'week'")
    assert sorted(weeks) == [(MONDAY - dt.timedelta(days=7), SUNDAY - dt.timedelta(days=7)), (MONDAY, SUNDAY)]
