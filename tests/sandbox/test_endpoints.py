"""One test per endpoint rule of the spec (and DESIGN.md's assumed endpoints), over real HTTP."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from sandbox.testing import SandboxHandle
from sandbox.world import ENGINES, Brand, root_domain
from tests.sandbox.helpers import assert_error, client, data

WINDOW = {"from": "2026-10-01", "to": "2026-11-01"}


@pytest.fixture(scope="module")
def api(sandbox: SandboxHandle) -> Any:
    with client(sandbox) as c:
        yield c


@pytest.fixture(scope="module")
def brand(sandbox: SandboxHandle) -> Brand:
    return sandbox.world.brands[0]


def pages(api: httpx.Client, path: str, **params: Any) -> list[list[dict[str, Any]]]:
    """Every page of a cursor-paged list, following ``next_cursor`` until ``has_more`` is false."""
    out = []
    cursor = None
    while True:
        query = dict(params, **({"cursor": cursor} if cursor else {}))
        body = api.get(path, params=query).json()
        out.append(body["data"])
        assert (body["next_cursor"] is not None) == body["has_more"]
        if not body["has_more"]:
            return out
        cursor = body["next_cursor"]


# -- rule 1, 2: brands ------------------------------------------------------------------------------


def test_brands_carry_engines_and_country_and_differ_between_brands(api: httpx.Client) -> None:
    brands = data(api.get("/v1/brands"))
    assert {tuple(b["engines"]) for b in brands} and len({tuple(b["engines"]) for b in brands}) > 1
    assert len({b["country"] for b in brands}) > 1
    for b in brands:
        assert set(b) == {"id", "name", "domain", "category", "aliases", "engines", "country", "created_at"}
        assert set(b["engines"]) <= set(ENGINES)


def test_brands_list_pages_with_cursor_until_has_more_is_false(api: httpx.Client) -> None:
    everything = data(api.get("/v1/brands"))
    chunks = pages(api, "/v1/brands", limit=1)
    assert len(chunks) == len(everything)
    assert [row for chunk in chunks for row in chunk] == everything


def test_get_brand_returns_the_listed_brand(api: httpx.Client, brand: Brand) -> None:
    listed = next(b for b in data(api.get("/v1/brands")) if b["id"] == brand.id)
    assert data(api.get(f"/v1/brands/{brand.id}")) == listed


def test_unknown_and_malformed_brand_ids_are_404(api: httpx.Client) -> None:
    assert_error(api.get("/v1/brands/00000000-0000-4000-8000-000000000000"), 404, "not_found")
    assert_error(api.get("/v1/brands/not-a-uuid"), 404, "not_found")


def test_a_tampered_or_foreign_cursor_is_400_invalid_request(api: httpx.Client, brand: Brand) -> None:
    first = api.get(f"/v1/brands/{brand.id}/prompts", params={"limit": 2}).json()
    assert_error(
        api.get(f"/v1/brands/{brand.id}/prompts", params={"cursor": "bm9wZQ"}), 400, "invalid_request"
    )
    foreign = api.get("/v1/brands", params={"cursor": first["next_cursor"]})
    assert_error(foreign, 400, "invalid_request")


# -- topics and prompts (DESIGN.md's assumed lists) -------------------------------------------------


def test_prompts_list_pages_and_some_prompts_have_no_topic(api: httpx.Client, brand: Brand) -> None:
    rows = [r for chunk in pages(api, f"/v1/brands/{brand.id}/prompts", limit=10) for r in chunk]
    assert len(rows) == len(brand.prompts) == len({r["id"] for r in rows})
    assert {"id", "text", "topic_id", "created_at"} <= set(rows[0])
    assert any(r["topic_id"] is None for r in rows) and any(r["topic_id"] for r in rows)


def test_topic_prompt_count_matches_the_prompts_filed_under_it(api: httpx.Client, brand: Brand) -> None:
    topics = data(api.get(f"/v1/brands/{brand.id}/topics"))
    prompts = data(api.get(f"/v1/brands/{brand.id}/prompts", params={"limit": 999}))
    for topic in topics:
        assert topic["prompt_count"] == sum(1 for p in prompts if p["topic_id"] == topic["id"])
        assert set(topic) == {"id", "name", "prompt_count", "created_at", "updated_at"}


# -- rule 3: mentions ------------------------------------------------------------------------------


def test_mentions_name_other_brands_and_match_answer_ids(api: httpx.Client, brand: Brand) -> None:
    prompt = brand.prompts[0]
    mentions = [
        r for chunk in pages(api, f"/v1/prompts/{prompt.id}/mentions", limit=500, **WINDOW) for r in chunk
    ]
    assert {m["brand_name"] for m in mentions} - {brand.name}, "other brands are named too"
    assert all(m["prompt_id"] == prompt.id for m in mentions)
    answers = [
        r for chunk in pages(api, f"/v1/brands/{brand.id}/answers", limit=100, **WINDOW) for r in chunk
    ]
    answer_ids = {a["id"] for a in answers if a["prompt_id"] == prompt.id}
    assert {m["response_id"] for m in mentions} <= answer_ids
    assert set(mentions[0]) == {
        "id",
        "response_id",
        "brand_name",
        "position",
        "sentiment",
        "prompt_id",
        "engine",
        "checked_on",
    }


def test_mentions_respect_engine_and_window(api: httpx.Client, brand: Brand) -> None:
    rows = data(
        api.get(
            f"/v1/prompts/{brand.prompts[1].id}/mentions",
            params={"engine": "claude", "from": "2026-10-10", "to": "2026-10-12", "limit": 999},
        )
    )
    assert rows and {r["engine"] for r in rows} == {"claude"}
    assert {r["checked_on"] for r in rows} <= {"2026-10-10", "2026-10-11"}


def test_mentions_of_an_engine_the_brand_is_not_measured_on_are_empty(sandbox: SandboxHandle) -> None:
    brand = next(b for b in sandbox.world.brands if len(b.engines) < len(ENGINES) and b.prompts)
    missing = next(e for e in ENGINES if e not in brand.engines)
    with client(sandbox) as api:
        rows = data(api.get(f"/v1/prompts/{brand.prompts[0].id}/mentions", params={"engine": missing}))
    assert rows == []


def test_mention_pages_cover_the_whole_list_exactly_once(api: httpx.Client, brand: Brand) -> None:
    path = f"/v1/prompts/{brand.prompts[2].id}/mentions"
    whole = data(api.get(path, params={**WINDOW, "limit": 999}))
    paged = [r for chunk in pages(api, path, limit=37, **WINDOW) for r in chunk]
    assert paged == whole and len({r["id"] for r in paged}) == len(paged)


def test_answers_page_size_is_capped_at_100(api: httpx.Client, brand: Brand) -> None:
    assert len(data(api.get(f"/v1/brands/{brand.id}/answers", params={"limit": 100}))) == 100
    assert_error(api.get(f"/v1/brands/{brand.id}/answers", params={"limit": 101}), 400, "invalid_request")


def test_answers_only_on_engines_the_brand_is_measured_on(sandbox: SandboxHandle) -> None:
    brand = next(b for b in sandbox.world.brands if len(b.engines) < len(ENGINES) and b.prompts)
    with client(sandbox) as api:
        rows = [r for chunk in pages(api, f"/v1/brands/{brand.id}/answers", limit=100) for r in chunk]
    assert rows and {r["engine"] for r in rows} <= set(brand.engines)


# -- rule 4: generations ----------------------------------------------------------------------------


def test_generations_are_newest_first_and_capped_by_limit(api: httpx.Client, brand: Brand) -> None:
    body = api.get(f"/v1/brands/{brand.id}/generations", params={"limit": 10}).json()
    assert len(body["data"]) == 10 and body["total_count"] > 10 and body["capped"] is True
    assert body["has_more"] is False and body["next_cursor"] is None
    created = [g["created_at"] for g in body["data"]]
    assert created == sorted(created, reverse=True)
    assert not {"brief_md", "draft_md", "slug", "meta_title", "meta_description"} & set(body["data"][0])


def test_generations_with_a_limit_above_the_total_are_not_capped(api: httpx.Client, brand: Brand) -> None:
    body = api.get(f"/v1/brands/{brand.id}/generations", params={"limit": 999}).json()
    assert len(body["data"]) == body["total_count"] and body["capped"] is False


def test_single_generation_fetch_includes_the_markdown(api: httpx.Client, brand: Brand) -> None:
    row = data(api.get(f"/v1/brands/{brand.id}/generations", params={"limit": 1}))[0]
    full = data(api.get(f"/v1/brands/{brand.id}/generations/{row['id']}"))
    assert {"brief_md", "draft_md", "slug", "meta_title", "meta_description"} <= set(full)
    assert {k: full[k] for k in row} == row


# -- rule 5: citation trends -----------------------------------------------------------------------


def test_citation_trends_default_to_the_brands_own_domain(api: httpx.Client, brand: Brand) -> None:
    trend = data(api.get(f"/v1/brands/{brand.id}/citations/trends", params=WINDOW))
    assert trend["target"] == {"type": "domain", "value": root_domain(brand.domain), "is_own_domain": True}
    assert trend["summary"]["citations"] == sum(p["citations"] for p in trend["series"])


def test_citation_trends_domain_rolls_up_subdomains(api: httpx.Client, brand: Brand) -> None:
    sub_pages = [p for p in brand.pages if p.owner == 0]
    assert {p.domain for p in sub_pages} - {brand.domain}, "the brand is cited on subdomains"
    whole = data(
        api.get(f"/v1/brands/{brand.id}/citations/trends", params={**WINDOW, "domain": brand.domain})
    )
    by_sub = data(
        api.get(
            f"/v1/brands/{brand.id}/citations/trends", params={**WINDOW, "domain": f"blog.{brand.domain}"}
        )
    )
    assert by_sub["target"]["value"] == brand.domain
    assert by_sub["series"] == whole["series"]
    urls = data(api.get(f"/v1/brands/{brand.id}/citations/urls", params={**WINDOW, "limit": 2000}))
    own = sum(r["citation_count"] for r in urls if r["root_domain"] == brand.domain)
    assert whole["summary"]["citations"] == own


def test_citation_trends_url_selects_one_exact_page(api: httpx.Client, brand: Brand) -> None:
    top = data(api.get(f"/v1/brands/{brand.id}/citations/urls", params={**WINDOW, "limit": 1}))[0]
    trend = data(api.get(f"/v1/brands/{brand.id}/citations/trends", params={**WINDOW, "url": top["url"]}))
    assert trend["target"]["type"] == "url" and trend["target"]["value"] == top["url"]
    assert trend["summary"]["citations"] == top["citation_count"]
    assert trend["target"]["is_own_domain"] == (
        root_domain(urlsplit(top["url"]).hostname or "") == brand.domain
    )


def test_citation_trends_with_domain_and_url_is_400_invalid_request(api: httpx.Client, brand: Brand) -> None:
    response = api.get(
        f"/v1/brands/{brand.id}/citations/trends", params={"domain": "a.com", "url": "https://a.com/x"}
    )
    assert_error(response, 400, "invalid_request")


def test_topic_filter_restricts_citations_to_prompts_of_the_topic(api: httpx.Client, brand: Brand) -> None:
    topic = data(api.get(f"/v1/brands/{brand.id}/topics"))[0]
    path = f"/v1/brands/{brand.id}/citations/urls"
    everything = api.get(path, params={**WINDOW, "limit": 2000}).json()
    filtered = api.get(path, params={**WINDOW, "limit": 2000, "topic_id": topic["id"]}).json()
    assert 0 < filtered["total_citations"] < everything["total_citations"]
    trend = data(
        api.get(f"/v1/brands/{brand.id}/citations/trends", params={**WINDOW, "topic_id": topic["id"]})
    )
    full = data(api.get(f"/v1/brands/{brand.id}/citations/trends", params=WINDOW))
    assert trend["summary"]["brand_total_citations"] == filtered["total_citations"]
    assert trend["summary"]["citations"] < full["summary"]["citations"]


def test_unknown_topic_filter_is_404_and_malformed_is_400(api: httpx.Client, brand: Brand) -> None:
    path = f"/v1/brands/{brand.id}/citations/urls"
    assert_error(api.get(path, params={"topic_id": "00000000-0000-4000-8000-000000000000"}), 404, "not_found")
    assert_error(api.get(path, params={"topic_id": "nope"}), 400, "invalid_request")


# -- rule 6: citation URLs ---------------------------------------------------------------------------


def test_citation_urls_are_ranked_with_totals_and_shares(api: httpx.Client, brand: Brand) -> None:
    body = api.get(f"/v1/brands/{brand.id}/citations/urls", params={**WINDOW, "limit": 5}).json()
    rows = body["data"]
    counts = [r["citation_count"] for r in rows]
    assert counts == sorted(counts, reverse=True) and len(rows) == 5
    assert body["capped"] is True and body["total_count"] > 5
    assert body["has_more"] is False and body["next_cursor"] is None
    for r in rows:
        assert r["citation_share"] == pytest.approx(r["citation_count"] / body["total_citations"], abs=1e-6)
        assert r["root_domain"] == root_domain(r["domain"])
    complete = api.get(f"/v1/brands/{brand.id}/citations/urls", params={**WINDOW, "limit": 2000}).json()
    assert complete["capped"] is False and len(complete["data"]) == complete["total_count"]
    assert sum(r["citation_count"] for r in complete["data"]) == complete["total_citations"]


def test_citation_urls_limit_above_2000_is_400(api: httpx.Client, brand: Brand) -> None:
    response = api.get(f"/v1/brands/{brand.id}/citations/urls", params={"limit": 2001})
    assert_error(response, 400, "invalid_request")


# -- rules 7, 8: tracked competitors and competitor trends -----------------------------------------


def test_trends_contain_the_brand_and_exactly_the_tracked_competitors(
    api: httpx.Client, brand: Brand
) -> None:
    tracked = data(api.get(f"/v1/brands/{brand.id}/tracked-competitors"))
    trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=WINDOW))
    assert trend["brand"]["is_your_brand"] is True and trend["brand"]["id"] is None
    assert [c["id"] for c in trend["competitors"]] == [t["id"] for t in tracked]
    assert all(c["is_your_brand"] is False for c in trend["competitors"])
    assert {"id", "brand_name", "aliases", "domains", "history_from", "tracked_since"} == set(tracked[0])


def test_trends_granularity_defaults_to_day_and_rejects_others(api: httpx.Client, brand: Brand) -> None:
    trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=WINDOW))
    assert trend["granularity"] == "day" and trend["engine"] is None
    assert (trend["from"], trend["to"]) == (WINDOW["from"], WINDOW["to"])
    response = api.get(f"/v1/brands/{brand.id}/competitors/trends", params={"granularity": "month"})
    assert_error(response, 400, "invalid_request")


def test_default_window_is_the_30_days_before_tomorrow(
    sandbox: SandboxHandle, api: httpx.Client, brand: Brand
) -> None:
    trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends"))
    tomorrow = sandbox.world.today + dt.timedelta(days=1)
    assert trend["to"] == tomorrow.isoformat()
    assert trend["from"] == (tomorrow - dt.timedelta(days=30)).isoformat()
    assert all(p["date"] < sandbox.world.today.isoformat() for p in trend["brand"]["series"])


# -- rule 9: audits --------------------------------------------------------------------------------


def test_audit_creation_returns_202_pending_with_a_poll_path(api: httpx.Client, brand: Brand) -> None:
    created = data(
        api.post("/v1/audit-reports", json={"url": "https://www.example.com/page", "brand_id": brand.id}), 202
    )
    assert created["status"] == "pending" and created["brand_id"] == brand.id
    assert created["url"] == "https://www.example.com/page"
    assert created["poll"] == f"/v1/audit-reports/{created['id']}"
    polled = data(api.get(created["poll"]))
    assert polled["id"] == created["id"] and polled["status"] in ("pending", "complete")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"brand_id": "00000000-0000-4000-8000-000000000000"}, "missing_parameter"),
        ({"url": "https://example.com"}, "missing_parameter"),
        ({"url": "ftp://example.com", "brand_id": "00000000-0000-4000-8000-000000000000"}, "invalid_request"),
        ({"url": "https://example.com", "brand_id": "nope"}, "invalid_request"),
    ],
)
def test_audit_body_errors_are_400(api: httpx.Client, body: dict[str, str], code: str) -> None:
    assert_error(api.post("/v1/audit-reports", json=body), 400, code)


def test_audit_for_an_unknown_brand_is_404(api: httpx.Client) -> None:
    body = {"url": "https://example.com", "brand_id": "00000000-0000-4000-8000-000000000000"}
    assert_error(api.post("/v1/audit-reports", json=body), 404, "not_found")


def test_audit_of_another_workspace_is_404(sandbox: SandboxHandle, api: httpx.Client, brand: Brand) -> None:
    created = data(
        api.post("/v1/audit-reports", json={"url": "https://a.example/", "brand_id": brand.id}), 202
    )
    with client(sandbox, "other_workspace") as other:
        assert_error(other.get(created["poll"]), 404, "not_found")


# -- rules 11, 12 and the remaining 400 codes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/v1/brands"),
        ("DELETE", "/v1/brands/{brand}"),
        ("POST", "/v1/brands/{brand}/competitors/trends"),
        ("GET", "/v1/audit-reports"),
        ("PATCH", "/v1/brands/{brand}/tracked-competitors"),
    ],
)
def test_undeclared_verbs_are_405_method_not_allowed(
    api: httpx.Client, brand: Brand, method: str, path: str
) -> None:
    assert_error(api.request(method, path.format(brand=brand.id)), 405, "method_not_allowed")


def test_bodies_must_be_json(api: httpx.Client, brand: Brand) -> None:
    response = api.post(
        f"/v1/brands/{brand.id}/topics", content="name=x", headers={"Content-Type": "text/plain"}
    )
    assert_error(response, 400, "invalid_request")
    response = api.post(
        f"/v1/brands/{brand.id}/topics", content="{not json", headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "invalid_request")


def test_topic_without_name_is_400_missing_parameter(api: httpx.Client, brand: Brand) -> None:
    assert_error(api.post(f"/v1/brands/{brand.id}/topics", json={}), 400, "missing_parameter")


def test_unknown_engine_is_400_invalid_engine(api: httpx.Client, brand: Brand) -> None:
    for path in ("competitors/trends", "citations/trends", "citations/urls", "answers"):
        response = api.get(f"/v1/brands/{brand.id}/{path}", params={"engine": "gpt-4o"})
        assert_error(response, 400, "invalid_engine")
    assert_error(
        api.get(f"/v1/prompts/{brand.prompts[0].id}/mentions", params={"engine": "bard"}),
        400,
        "invalid_engine",
    )


@pytest.mark.parametrize(
    "params",
    [
        {"from": "2026-13-01"},
        {"to": "yesterday"},
        {"from": "2026-10-10", "to": "2026-10-10"},
        {"from": "20261001"},
    ],
)
def test_bad_dates_are_400_invalid_date(api: httpx.Client, brand: Brand, params: dict[str, str]) -> None:
    assert_error(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=params), 400, "invalid_date")


@pytest.mark.parametrize("limit", ["0", "1000", "-1", "ten"])
def test_limit_out_of_bounds_is_400_invalid_request(api: httpx.Client, brand: Brand, limit: str) -> None:
    assert_error(api.get("/v1/brands", params={"limit": limit}), 400, "invalid_request")
    assert_error(
        api.get(f"/v1/prompts/{brand.prompts[0].id}/mentions", params={"limit": limit}),
        400,
        "invalid_request",
    )


def test_limit_999_is_accepted_on_lists(api: httpx.Client, brand: Brand) -> None:
    assert api.get("/v1/brands", params={"limit": 999}).status_code == 200
    assert api.get(f"/v1/brands/{brand.id}/generations", params={"limit": 999}).status_code == 200


def test_documented_trigger_answers_500_internal_error_quoting_the_request_id(api: httpx.Client) -> None:
    response = api.get("/v1/brands", headers={"X-Sandbox-Fail": "1"})
    assert_error(response, 500, "internal_error")
    assert response.headers["x-request-id"] in response.json()["error"]["message"]


def test_unknown_path_is_404_not_found_envelope(api: httpx.Client) -> None:
    assert_error(api.get("/v1/nothing/here"), 404, "not_found")


def test_every_v1_response_carries_rate_limit_headers(api: httpx.Client, brand: Brand) -> None:
    for response in (api.get("/v1/brands"), api.get("/v1/brands/not-a-uuid"), api.put("/v1/brands")):
        assert {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"} <= set(response.headers)


def test_answer_pages_cover_the_whole_list_exactly_once_across_engines(
    api: httpx.Client, brand: Brand
) -> None:
    path = f"/v1/brands/{brand.id}/answers"
    day = {"from": "2026-10-20", "to": "2026-10-22"}
    by_100 = [r for chunk in pages(api, path, limit=100, **day) for r in chunk]
    by_7 = [r for chunk in pages(api, path, limit=7, **day) for r in chunk]
    assert by_7 == by_100 and len({r["id"] for r in by_7}) == len(by_7) > 100
    assert {r["engine"] for r in by_7} == set(brand.engines)
    order = [(r["checked_on"], ENGINES.index(r["engine"])) for r in by_7]
    assert order == sorted(order)


@pytest.mark.parametrize("resource", ["topics", "tracked-competitors", "prompts"])
def test_brand_lists_page_with_cursors(api: httpx.Client, brand: Brand, resource: str) -> None:
    path = f"/v1/brands/{brand.id}/{resource}"
    whole = data(api.get(path, params={"limit": 999}))
    paged = [r for chunk in pages(api, path, limit=1) for r in chunk]
    assert len(whole) > 1 and paged == whole
