"""Invariants of the served metrics, checked over HTTP against the raw rows the sandbox also serves."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sandbox.testing import SandboxHandle
from sandbox.world import Brand
from tests.sandbox.helpers import client, data

WINDOW = {"from": "2026-09-28", "to": "2026-11-01"}


@pytest.fixture(scope="module")
def api(sandbox: SandboxHandle) -> Iterator[httpx.Client]:
    with client(sandbox) as c:
        yield c


@pytest.fixture(scope="module")
def brand(sandbox: SandboxHandle) -> Brand:
    return sandbox.world.brands[0]


def entities(trend: dict[str, Any]) -> list[dict[str, Any]]:
    return [trend["brand"], *trend["competitors"]]


@pytest.mark.parametrize("granularity", ["day", "week"])
@pytest.mark.parametrize("engine", [None, "chatgpt", "perplexity"])
def test_share_of_voice_sums_to_100_on_every_bucket_with_mentions(
    api: httpx.Client, brand: Brand, granularity: str, engine: str | None
) -> None:
    params = {**WINDOW, "granularity": granularity, **({"engine": engine} if engine else {})}
    trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=params))
    listed = entities(trend)
    assert trend["brand"]["series"]
    for i in range(len(trend["brand"]["series"])):
        mentions = sum(e["series"][i]["mention_count"] for e in listed)
        total = sum(e["series"][i]["share_of_voice"] for e in listed)
        assert total == pytest.approx(100.0, abs=0.01) if mentions else total == 0
    assert sum(e["totals"]["share_of_voice"] for e in listed) == pytest.approx(100.0, abs=0.01)


def test_all_engine_rollup_is_derived_from_counts_not_from_engine_rates(
    api: httpx.Client, brand: Brand
) -> None:
    path = f"/v1/brands/{brand.id}/competitors/trends"
    rollup = data(api.get(path, params=WINDOW))["brand"]["totals"]
    per_engine = [
        data(api.get(path, params={**WINDOW, "engine": e}))["brand"]["totals"] for e in brand.engines
    ]
    answered = sum(t["responses_answered"] for t in per_engine)
    with_brand = sum(t["responses_with_brand"] for t in per_engine)
    assert rollup["responses_answered"] == answered
    assert rollup["responses_with_brand"] == with_brand
    assert rollup["detection_rate"] == pytest.approx(100 * with_brand / answered, abs=1e-3)
    assert rollup["detection_rate"] != pytest.approx(sum(t["detection_rate"] for t in per_engine))
    mean = sum(t["detection_rate"] for t in per_engine) / len(per_engine)
    assert rollup["detection_rate"] != pytest.approx(mean, abs=1e-6)


def test_weekly_buckets_start_on_monday_and_sum_the_daily_counts(api: httpx.Client, brand: Brand) -> None:
    path = f"/v1/brands/{brand.id}/competitors/trends"
    daily = data(api.get(path, params=WINDOW))["brand"]["series"]
    weekly = data(api.get(path, params={**WINDOW, "granularity": "week"}))["brand"]["series"]
    for point in weekly:
        start = dt.date.fromisoformat(point["date"])
        assert start.weekday() == 0
        days = [p for p in daily if start <= dt.date.fromisoformat(p["date"]) < start + dt.timedelta(days=7)]
        assert point["responses_answered"] == sum(p["responses_answered"] for p in days)
        assert point["mention_count"] == sum(p["mention_count"] for p in days)


def test_totals_are_the_sum_of_the_series_counts(api: httpx.Client, brand: Brand) -> None:
    trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=WINDOW))
    for entity in entities(trend):
        for field in ("responses_answered", "responses_with_brand", "mention_count", "citation_count"):
            assert entity["totals"][field] == sum(p[field] for p in entity["series"])


def test_trend_counts_match_the_raw_mention_rows(api: httpx.Client, brand: Brand) -> None:
    day = {"from": "2026-10-20", "to": "2026-10-21", "engine": "gemini"}
    trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=day))
    mentions = [
        m
        for p in brand.prompts
        for m in data(api.get(f"/v1/prompts/{p.id}/mentions", params={**day, "limit": 999}))
    ]
    answers = data(api.get(f"/v1/brands/{brand.id}/answers", params={**day, "limit": 100}))
    for entity in entities(trend):
        named = [m for m in mentions if m["brand_name"] == entity["brand_name"]]
        totals = entity["totals"]
        assert totals["mention_count"] == len(named)
        assert totals["responses_answered"] == len(answers)
        if named:
            assert totals["avg_position"] == pytest.approx(
                sum(m["position"] for m in named) / len(named), abs=1e-3
            )
            wins = sum(1 for m in named if m["position"] == 1)
            assert totals["win_rate"] == pytest.approx(100 * wins / len(answers), abs=1e-3)


def no_run_day(sandbox: SandboxHandle, brand: Brand, start: dt.date, end: dt.date) -> dt.date:
    day = start
    while day < end:
        if not sandbox.world.ran(brand, day):
            return day
        day += dt.timedelta(days=1)
    raise AssertionError("seed 7 has a no-run day in the window")


def test_citation_trends_omit_days_the_brand_did_not_run(
    sandbox: SandboxHandle, api: httpx.Client, brand: Brand
) -> None:
    start, end = dt.date.fromisoformat(WINDOW["from"]), dt.date.fromisoformat(WINDOW["to"])
    skipped = no_run_day(sandbox, brand, start, end)
    series = data(api.get(f"/v1/brands/{brand.id}/citations/trends", params=WINDOW))["series"]
    dates = {p["date"] for p in series}
    assert skipped.isoformat() not in dates
    ran = {d.isoformat() for d in sandbox.world.days(start, end) if sandbox.world.ran(brand, d)}
    assert dates == ran
    trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=WINDOW))
    assert skipped.isoformat() not in {p["date"] for p in trend["brand"]["series"]}


def test_citation_trends_show_zero_on_run_days_without_citations_of_the_target(
    api: httpx.Client, brand: Brand
) -> None:
    urls = data(api.get(f"/v1/brands/{brand.id}/citations/urls", params={**WINDOW, "limit": 2000}))
    rare = min(urls, key=lambda r: r["citation_count"])  # cited on few days
    series = data(api.get(f"/v1/brands/{brand.id}/citations/trends", params={**WINDOW, "url": rare["url"]}))[
        "series"
    ]
    zero_days = [p for p in series if p["citations"] == 0]
    assert zero_days, "the rare page is not cited on some run days"
    assert all(p["brand_total_citations"] > 0 and p["share"] == 0 for p in zero_days)
    assert sum(p["citations"] for p in series) == rare["citation_count"]


def test_citation_share_is_citations_over_the_brands_total(api: httpx.Client, brand: Brand) -> None:
    trend = data(api.get(f"/v1/brands/{brand.id}/citations/trends", params=WINDOW))
    for point in trend["series"]:
        assert point["share"] == pytest.approx(point["citations"] / point["brand_total_citations"], abs=1e-4)
    summary = trend["summary"]
    assert summary["brand_total_citations"] == sum(p["brand_total_citations"] for p in trend["series"])


def test_citation_change_compares_the_halves_of_the_window(api: httpx.Client, brand: Brand) -> None:
    trend = data(api.get(f"/v1/brands/{brand.id}/citations/trends", params=WINDOW))
    midpoint = dt.date.fromisoformat(WINDOW["from"]) + dt.timedelta(days=17)
    earlier = sum(p["citations"] for p in trend["series"] if dt.date.fromisoformat(p["date"]) < midpoint)
    later = trend["summary"]["citations"] - earlier
    assert trend["summary"]["change"]["absolute"] == later - earlier
    assert trend["summary"]["change"]["percentage"] == pytest.approx(
        100 * (later - earlier) / earlier, abs=1e-3
    )


def test_competitor_citation_count_is_citations_of_its_own_site(api: httpx.Client, brand: Brand) -> None:
    trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=WINDOW))
    urls = data(api.get(f"/v1/brands/{brand.id}/citations/urls", params={**WINDOW, "limit": 2000}))
    for entity in entities(trend):
        own = sum(r["citation_count"] for r in urls if r["root_domain"] in entity["domains"])
        assert entity["totals"]["citation_count"] == own
