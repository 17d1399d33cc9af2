"""The planner: widest windows per endpoint, engines skipped where a brand is not measured."""

from __future__ import annotations

import dataclasses
import datetime as dt

from resources.api.endpoints import ENGINES, ENGINES_WITH_ALL
from sync import catalog
from sync.planning import (
    ALL,
    Box,
    BrandInput,
    CitationTarget,
    Window,
    boxes,
    citation_targets,
    date_runs,
    expected_requests,
)
from tests.endpoint_keys import Endpoint

#: the shipped tables' planners, as their catalog entries declare them
plan_mentions = catalog.PROMPT_MENTIONS.planner
plan_answers = catalog.ANSWERS.planner
plan_competitor_trends = catalog.COMPETITOR_TRENDS.planner
plan_citation_trends = catalog.CITATION_TRENDS.planner
plan_citation_urls = catalog.CITED_PAGES.planner

D0 = dt.date(2024, 3, 1)


def days(n: int, start: dt.date = D0) -> list[dt.date]:
    return [start + dt.timedelta(days=i) for i in range(n)]


def cells(dates: list[dt.date], engines: tuple[str, ...] | list[str]) -> set[tuple[dt.date, str]]:
    return {(d, e) for d in dates for e in engines}


FULL = BrandInput(
    "b1",
    frozenset(ENGINES),
    domain="acme.com",
    prompt_ids=("p1", "p2", "p3"),
    competitor_domains=("rival.com", "other.io", "rival.com", "ACME.com"),
)
TWO = BrandInput("b2", frozenset({"chatgpt", "claude"}), domain="two.com", prompt_ids=("q1",))


def test_date_runs_merge_consecutive_days_and_split_at_gaps() -> None:
    ds = [*days(3), *days(2, D0 + dt.timedelta(days=5))]
    assert date_runs(ds) == [
        Window(D0, D0 + dt.timedelta(days=3)),
        Window(D0 + dt.timedelta(days=5), D0 + dt.timedelta(days=7)),
    ]


def test_a_rectangular_run_is_one_write_box() -> None:
    run = cells(days(30), ENGINES)
    assert boxes(run, ENGINES) == (Box(Window(D0, D0 + dt.timedelta(days=30)), ENGINES),)


def test_boxes_cover_a_ragged_run_exactly() -> None:
    run = cells(days(3), ["chatgpt", "claude"]) | cells(days(2, D0 + dt.timedelta(days=3)), ["claude"])
    covered = [cells(days(b.window.days, b.window.start), b.engines) for b in boxes(run, ENGINES)]
    assert set().union(*covered) == run


def test_mentions_are_one_unfiltered_call_per_prompt_when_the_run_covers_every_engine() -> None:
    plan = plan_mentions(cells(days(30), ENGINES), [FULL], ENGINES)
    assert len(plan.calls) == 3
    assert {c.prompt_id for c in plan.calls} == {"p1", "p2", "p3"}
    assert all(c.engine is None and c.window == Window(D0, D0 + dt.timedelta(days=30)) for c in plan.calls)


def test_mentions_filter_by_engine_when_the_run_covers_only_some_engines() -> None:
    plan = plan_mentions(cells(days(10), ["chatgpt", "gemini"]), [FULL], ENGINES)
    assert sorted((c.prompt_id, c.engine) for c in plan.calls) == sorted(
        (p, e) for p in ("p1", "p2", "p3") for e in ("chatgpt", "gemini")
    )
    assert all(c.window.days == 10 for c in plan.calls)


def test_a_brand_measured_on_fewer_engines_needs_no_filter_when_all_of_its_engines_are_covered() -> None:
    plan = plan_mentions(cells(days(5), ["chatgpt", "claude", "gemini"]), [TWO], ENGINES)
    assert [(c.prompt_id, c.engine) for c in plan.calls] == [("q1", None)]
    assert "gemini" in plan.skipped["b2"]


def test_engines_a_brand_is_not_measured_on_are_skipped() -> None:
    plan = plan_mentions(cells(days(5), ["perplexity"]), [TWO], ENGINES)
    assert plan.calls == ()
    assert plan.skipped == {"b2": ["perplexity"]}


def test_mentions_of_a_non_contiguous_run_use_one_call_per_date_run() -> None:
    ds = [*days(2), *days(3, D0 + dt.timedelta(days=10))]
    plan = plan_mentions(cells(ds, ENGINES), [TWO], ENGINES)
    assert sorted(c.window.days for c in plan.calls) == [2, 3]


def test_answers_are_per_brand_and_per_engine_only_when_partial() -> None:
    full = plan_answers(cells(days(7), ENGINES), [FULL, TWO], ENGINES)
    assert sorted((c.brand_id, c.engine) for c in full.calls) == [("b1", None), ("b2", None)]
    partial = plan_answers(cells(days(7), ["claude"]), [FULL, TWO], ENGINES)
    assert sorted((c.brand_id, c.engine) for c in partial.calls) == [("b1", "claude"), ("b2", "claude")]


def test_competitor_trends_are_one_day_call_per_brand_and_engine_with_all_as_the_omitted_engine() -> None:
    plan = plan_competitor_trends(cells(days(30), ENGINES_WITH_ALL), [FULL, TWO], ENGINES_WITH_ALL)
    day_calls = [c for c in plan.calls if c.granularity == "day"]
    assert len(day_calls) == 8 + 3
    assert all(c.window.days == 30 for c in day_calls)
    assert sum(c.engine is None for c in day_calls) == 2
    assert {c.landed_engine for c in day_calls if c.brand_id == "b2"} == {"chatgpt", "claude", ALL}


def test_trend_calls_span_the_hull_of_a_non_contiguous_run() -> None:
    ds = [D0, D0 + dt.timedelta(days=8)]  # a Friday and the Saturday after next: no Sunday, no weeks
    plan = plan_competitor_trends(cells(ds, [ALL]), [FULL], ENGINES_WITH_ALL)
    assert [(c.window, c.granularity) for c in plan.calls] == [(Window(D0, D0 + dt.timedelta(days=9)), "day")]


def test_citation_targets_are_the_own_domain_then_distinct_competitor_domains() -> None:
    assert citation_targets(FULL) == [
        CitationTarget(),
        CitationTarget(domain="rival.com"),
        CitationTarget(domain="other.io"),
    ]


def test_tracked_pages_and_topics_are_citation_targets_of_their_own_calls() -> None:
    brand = dataclasses.replace(
        FULL,
        citation_urls=("https://acme.com/guide", "https://rival.com/x", "https://acme.com/guide"),
        citation_topic_ids=("t1",),
    )
    assert citation_targets(brand)[3:] == [
        CitationTarget(url="https://acme.com/guide"),
        CitationTarget(url="https://rival.com/x"),
        CitationTarget(topic_id="t1"),
    ]
    plan = plan_citation_trends(cells(days(3), ["chatgpt", ALL]), [brand], ENGINES_WITH_ALL)
    assert len(plan.calls) == 6 * 2
    topic_calls = [c for c in plan.calls if c.topic_id == "t1"]
    assert {(c.engine, c.domain, c.url) for c in topic_calls} == {("chatgpt", None, None), (None, None, None)}
    assert {c.url for c in plan.calls if c.url} == {"https://acme.com/guide", "https://rival.com/x"}


def test_citation_trends_are_one_call_per_brand_target_and_engine() -> None:
    plan = plan_citation_trends(cells(days(30), ENGINES_WITH_ALL), [FULL], ENGINES_WITH_ALL)
    assert len(plan.calls) == 3 * 8
    assert {c.domain for c in plan.calls} == {None, "rival.com", "other.io"}


def test_citation_urls_are_one_call_per_brand_engine_and_day() -> None:
    plan = plan_citation_urls(cells(days(4), ["chatgpt", ALL, "copilot"]), [FULL, TWO], ENGINES_WITH_ALL)
    assert expected_requests(plan) == {str(Endpoint.CITATION_URLS): 4 * 3 + 4 * 2}
    assert all(c.window.days == 1 for c in plan.calls)


def test_expected_requests_counts_calls_by_endpoint_template() -> None:
    plan = plan_mentions(cells(days(3), ENGINES), [FULL, TWO], ENGINES)
    assert expected_requests(plan) == {"GET /v1/prompts/{id}/mentions": 4}


def test_an_empty_run_plans_nothing() -> None:
    plan = plan_citation_urls(set(), [FULL], ENGINES_WITH_ALL)
    assert plan.calls == () and plan.boxes == () and plan.window is None


def test_a_table_without_a_rollup_does_not_report_all_as_an_unmeasured_engine() -> None:
    plan = plan_mentions(cells(days(2), ENGINES_WITH_ALL), [FULL], ENGINES_WITH_ALL)
    assert plan.skipped == {}
    assert all(call.engine is None for call in plan.calls)  # every engine of the brand: no filter


SUNDAY = dt.date(2024, 3, 3)


def test_weeks_are_fetched_whole_for_the_sundays_of_the_run_one_call_per_brand_and_engine() -> None:
    # Thursday to the second Tuesday after: the Sundays of March 3 and 10 own their weeks
    run = cells(days(13, SUNDAY - dt.timedelta(days=3)), ["claude", ALL])
    plan = plan_competitor_trends(run, [FULL, TWO], ENGINES_WITH_ALL)
    weeks = sorted((c.brand_id, c.landed_engine, c.window) for c in plan.calls if c.granularity == "week")
    whole_weeks = Window(SUNDAY - dt.timedelta(days=6), SUNDAY + dt.timedelta(days=8))
    assert weeks == [(b, e, whole_weeks) for b in ("b1", "b2") for e in (ALL, "claude")]
    assert whole_weeks.start.weekday() == 0 and whole_weeks.days == 14
    # the day calls are unchanged: one per brand and engine over the run's hull
    assert len([c for c in plan.calls if c.granularity == "day"]) == 4
    assert expected_requests(plan) == {str(Endpoint.COMPETITOR_TRENDS): 8}


def test_a_run_without_a_sunday_asks_for_no_week() -> None:
    run = cells(days(6, SUNDAY + dt.timedelta(days=1)), ENGINES_WITH_ALL)  # Monday to Saturday
    plan = plan_competitor_trends(run, [FULL], ENGINES_WITH_ALL)
    assert {c.granularity for c in plan.calls} == {"day"}


def test_a_week_call_skips_engines_the_brand_is_not_measured_on() -> None:
    plan = plan_competitor_trends(cells([SUNDAY], ["gemini", "claude"]), [TWO], ENGINES_WITH_ALL)
    assert [(c.engine, c.granularity) for c in plan.calls if c.granularity == "week"] == [("claude", "week")]
