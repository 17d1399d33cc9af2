"""Tracked pages and topics: their citation trends and every trend's summary land in citation_trends.

Real Dagster runs against the sandbox into a DuckDB file, with ``VISIBILITY_CITATION_URLS`` and
``VISIBILITY_CITATION_TOPICS`` set in the run's environment.
"""

from __future__ import annotations

import datetime as dt

import pytest

from resources.api.endpoints import ALL
from resources.api.resource import VisibilityAPIResource
from sandbox.testing import SandboxHandle
from settings import ConfigError, load_citation_target_settings
from tests.assets.conftest import Sync, days

D = dt.date(2026, 10, 20)


def test_tracked_pages_and_topics_land_with_each_trends_summary(
    sync: Sync, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    dates = days(D, 3)
    sync.run(["topics", "cited_pages"], dates[0], dates[-1], (ALL,))
    [(brand_id, url)] = sync.query(
        "SELECT brand_id, url FROM cited_pages WHERE engine = 'all' ORDER BY citation_count DESC, url LIMIT 1"
    )
    [(topic_id, topic_name)] = sync.query(
        "SELECT id, name FROM topics WHERE brand_id = ? ORDER BY name LIMIT 1", [brand_id]
    )
    monkeypatch.setenv("VISIBILITY_CITATION_URLS", url)
    monkeypatch.setenv("VISIBILITY_CITATION_TOPICS", topic_name.upper())  # names match case-insensitively
    sync.run(["citation_trends"], dates[0], dates[-1], (ALL,))

    pages = sync.query(
        "SELECT date, citations FROM citation_trends WHERE brand_id = ? AND target_type = 'url' "
        "AND target_value = ? AND granularity = 'day' ORDER BY date",
        [brand_id, url],
    )
    assert [d for d, _ in pages] == dates and sum(c for _, c in pages) > 0
    topical = sync.query(
        "SELECT DISTINCT target_type, is_own_domain FROM citation_trends WHERE brand_id = ? AND topic_id = ?",
        [brand_id, topic_id],
    )
    assert topical == [("domain", True)]

    # each target's summary: one `window` row on the window's last day, the API's own numbers
    summaries = sync.query(
        "SELECT target_type, target_value, topic_id, period_start, date, citations, avg_position, share, "
        "brand_total_citations, change_absolute, change_percentage FROM citation_trends "
        "WHERE brand_id = ? AND granularity = 'window' ORDER BY target_type, target_value, topic_id",
        [brand_id],
    )
    assert {(r[3], r[4]) for r in summaries} == {(dates[0], dates[-1])}
    resource = VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"])
    with resource.get_client() as client:
        for target_type, value, topic, *landed in summaries:
            asked = {"url": value} if target_type == "url" else {"domain": value}
            answer = client.citation_trends(
                brand_id,
                **asked,
                topic_id=None if topic == "all" else topic,
                start=dates[0],
                end=dates[-1] + dt.timedelta(days=1),
            )["summary"]
            expected = [
                answer["citations"],
                answer["avg_position"],
                answer["share"],
                answer["brand_total_citations"],
                answer["change"]["absolute"],
                answer["change"]["percentage"],
            ]
            assert landed[2:] == pytest.approx(expected), (target_type, value, topic)
    assert {(r[0], r[2]) for r in summaries} >= {("url", "all"), ("domain", topic_id), ("domain", "all")}


def test_citation_target_settings_refuse_what_is_not_a_page() -> None:
    with pytest.raises(ConfigError, match="VISIBILITY_CITATION_URLS"):
        load_citation_target_settings({"VISIBILITY_CITATION_URLS": "acme.com/pricing"})
    read = load_citation_target_settings(
        {
            "VISIBILITY_CITATION_URLS": "https://a.io/x, https://a.io/x https://b.io",
            "VISIBILITY_CITATION_TOPICS": "Pricing, ,t1",
        }
    )
    assert (read.urls, read.topics) == (["https://a.io/x", "https://b.io"], ["Pricing", "t1"])
