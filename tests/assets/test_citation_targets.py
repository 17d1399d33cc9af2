"""Tracked pages and topics: their citation trends and every trend's summary land in citation_trends.

Real Dagster runs against the sandbox into a DuckDB file, with ``VISIBILITY_CITATION_URLS`` and
``VISIBILITY_CITATION_TOPICS`` read once into the settings, whose ``api`` resource the run is given.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from resources.api.endpoints import ALL
from resources.api.resource import VisibilityAPIResource
from sandbox.testing import SandboxHandle
from settings import ConfigError, load_settings
from tests.assets.conftest import Sync, days

D = dt.date(2026, 10, 20)


def test_tracked_pages_and_topics_land_with_each_trends_summary(sync: Sync, sandbox: SandboxHandle) -> None:
    from pipelines.resources import api_resource

    dates = days(D, 3)
    sync.run(["topics", "cited_pages"], dates[0], dates[-1], (ALL,))
    [(brand_id, url)] = sync.query(
        "SELECT brand_id, url FROM cited_pages WHERE engine = 'all' ORDER BY citation_count DESC, url LIMIT 1"
    )
    [(topic_id, topic_name)] = sync.query(
        "SELECT id, name FROM topics WHERE brand_id = ? ORDER BY name LIMIT 1", [brand_id]
    )
    settings = load_settings(
        {
            "VISIBILITY_API_URL": sandbox.url,
            "VISIBILITY_API_KEY": sandbox.keys["workspace"],
            "VISIBILITY_CITATION_URLS": url,
            "VISIBILITY_CITATION_TOPICS": topic_name.upper(),  # names match case-insensitively
        }
    )
    assert run_with_config(sync, dates[0], dates[-1], {}, api=api_resource(settings)).success  # type: ignore[attr-defined]

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
        load_settings({"VISIBILITY_CITATION_URLS": "acme.com/pricing"})
    read = load_settings(
        {
            "VISIBILITY_CITATION_URLS": "https://a.io/x, https://a.io/x https://b.io",
            "VISIBILITY_CITATION_TOPICS": "Pricing, ,t1",
        }
    )
    assert read.citation_urls == ["https://a.io/x", "https://b.io"]
    assert read.citation_topics == ["Pricing", "t1"]


def run_with_config(
    sync: Sync,
    first: dt.date,
    last: dt.date,
    config: dict[str, object],
    tables: tuple[str, ...] = (),
    api: VisibilityAPIResource | None = None,
) -> object:
    from dagster import materialize

    from pipelines.schedules import range_tags
    from tests.assets.conftest import QUIET, selecting

    defs, selection = selecting([*tables, "citation_trends"])
    return materialize(
        defs,
        selection=selection,
        instance=sync.instance,
        resources={**sync.resources(), **({"api": api} if api is not None else {})},
        tags=range_tags(first, last, (ALL,)),
        run_config={**QUIET, "ops": {"sync_daily": {"config": config}}},
        raise_on_error=False,
    )


def test_a_runs_config_picks_its_own_tracked_pages_instead_of_the_setting(
    sync: Sync, sandbox: SandboxHandle
) -> None:
    dates = days(D, 2)
    sync.run(["cited_pages"], dates[0], dates[-1], (ALL,))
    [(brand_id, url)] = sync.query(
        "SELECT brand_id, url FROM cited_pages WHERE engine = 'all' ORDER BY citation_count DESC, url LIMIT 1"
    )
    setting = VisibilityAPIResource(
        api_url=sandbox.url,
        api_key=sandbox.keys["workspace"],
        citation_urls=["https://not-this-one.example/page"],
    )

    result = run_with_config(sync, dates[0], dates[-1], {"citation_urls": [url]}, api=setting)

    assert result.success  # type: ignore[attr-defined]
    pages = sync.query("SELECT DISTINCT target_value FROM citation_trends WHERE target_type = 'url'")
    assert pages == [(url,)]
    assert (
        sync.query(
            "SELECT COUNT(*) FROM citation_trends WHERE brand_id = ? AND target_value = ?", [brand_id, url]
        )[0][0]
        > 0
    )


@pytest.mark.parametrize(
    "tables", [(), ("tracked_competitors",)], ids=["daily step alone", "snapshot step first"]
)
def test_a_bad_page_in_a_runs_config_fails_naming_the_field_before_any_request(
    sync: Sync, sandbox: SandboxHandle, tables: tuple[str, ...]
) -> None:
    sandbox.reset_stats()

    result = run_with_config(sync, D, D, {"citation_urls": ["acme.com/pricing"]}, tables)

    assert not result.success  # type: ignore[attr-defined]
    failure = next(e for e in result.all_events if e.is_step_failure)  # type: ignore[attr-defined]
    assert failure.step_key == ("sync_snapshots" if tables else "sync_daily")
    assert "config citation_urls: 'acme.com/pricing' is not an absolute http(s) URL" in str(
        failure.step_failure_data.error
    )
    assert sum(sum(s.values()) for s in sandbox.stats().values()) == 0


def test_the_command_lines_head_start_asks_for_the_targets_its_runs_ask_for(tmp_path: Path) -> None:
    """The head start is taken only by a run asking for the same selection, targets included."""
    from assets.builders import DailySyncConfig
    from pipelines.cli import first_run_selection
    from pipelines.resources import api_resource

    settings = load_settings(
        {
            "VISIBILITY_API_URL": "https://api.example.com",
            "VISIBILITY_API_KEY": "vsk_0f9e8d7c6b5a49382716",
            "VISIBILITY_CITATION_URLS": "https://a.io/x https://a.io/x,https://b.io/",
            "VISIBILITY_CITATION_TOPICS": "Pricing, t1",
        }
    )
    one_day = (D, D + dt.timedelta(days=1))
    selection = first_run_selection(*one_day, ("chatgpt", "chatgpt"), {}, tmp_path, settings)
    runs = DailySyncConfig().citation_targets(api_resource(settings))
    assert selection.targets == runs
    assert runs.urls == ("https://a.io/x", "https://b.io/") and runs.topics == ("Pricing", "t1")


def test_a_sync_resolving_citation_topics_lists_each_brands_topics_once(
    sync: Sync, sandbox: SandboxHandle
) -> None:
    """The topics table and the citation targets read one listing of the sync (``Discovery.topics``)."""
    from pipelines.resources import api_resource

    resource = VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"])
    with resource.get_client() as client:
        brands = [str(b["id"]) for b in client.list_brands()]
        listed = {b: list(client.list_topics(b)) for b in brands}
    topic_name = next(t["name"] for rows in listed.values() for t in rows)
    settings = load_settings(
        {
            "VISIBILITY_API_URL": sandbox.url,
            "VISIBILITY_API_KEY": sandbox.keys["workspace"],
            "VISIBILITY_CITATION_TOPICS": topic_name,
        }
    )
    sandbox.reset_stats()

    result = run_with_config(sync, D, D, {}, ("topics",), api=api_resource(settings))

    assert result.success  # type: ignore[attr-defined]
    topics_requests = sandbox.stats()["GET /v1/brands/{id}/topics"]
    assert topics_requests == {"200": len(brands)}  # one page per brand: each lists a few topics
    landed = sync.query("SELECT brand_id, id, name FROM topics ORDER BY ALL")
    assert landed == sorted((b, str(t["id"]), t["name"]) for b, rows in listed.items() for t in rows)
    assert sync.query("SELECT COUNT(*) FROM citation_trends WHERE topic_id <> 'all'")[0][0] > 0
