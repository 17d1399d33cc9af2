"""The client against the real sandbox (no faults): every method, paging, and every error code."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from resources.api import endpoints as ep
from resources.api.client import VisibilityClient
from resources.api.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    NotFoundError,
    PermissionDeniedError,
    ResponseShapeError,
    SubscriptionRequiredError,
    TransportError,
    VisibilityAPIError,
)
from resources.api.paging import CompleteSet
from sandbox.testing import SandboxHandle
from tests.api.conftest import StripAuthorization, make_client
from tests.fixtures_sandbox import SANDBOX_TODAY

WEEK_START = SANDBOX_TODAY - dt.timedelta(days=7)


def _brand_of_role(sandbox: SandboxHandle, role: str) -> str:
    workspace_id = sandbox.world.keys[sandbox.keys[role]].workspace_id
    return next(b.id for b in sandbox.world.brands if b.workspace_id == workspace_id)


# --- reads ---------------------------------------------------------------------------------------


def test_list_brands_walks_every_page_and_sends_one_request_per_page(
    sandbox: SandboxHandle, client: VisibilityClient, workspace_brand_ids: list[str]
) -> None:
    with make_client(sandbox) as paged:
        ids = [row["id"] for row in paged.list_brands(limit=1)]
        assert paged.stats.requests_by_endpoint == {"GET /v1/brands": len(workspace_brand_ids)}
    assert ids == workspace_brand_ids
    expected = [
        b.id
        for b in sandbox.world.brands
        if b.workspace_id == sandbox.world.keys[sandbox.keys["workspace"]].workspace_id
    ]
    assert sorted(ids) == sorted(expected)


def test_brand_reads_return_rows_with_their_fields(
    client: VisibilityClient, workspace_brand_ids: list[str]
) -> None:
    brand_id = workspace_brand_ids[0]
    brand = client.get_brand(brand_id)
    assert brand["id"] == brand_id and isinstance(brand["engines"], list)
    topics = list(client.list_topics(brand_id, limit=2))
    assert topics and all({"id", "name", "prompt_count"} <= row.keys() for row in topics)
    prompts = list(client.list_prompts(brand_id, limit=10))
    assert len(prompts) == len({p["id"] for p in prompts}) == 25
    assert client.stats.requests_by_endpoint["GET /v1/brands/{id}/prompts"] == 3


def test_answers_and_mentions_page_to_the_end_with_the_same_rows_as_one_big_page(
    client: VisibilityClient, workspace_brand_ids: list[str]
) -> None:
    brand_id = workspace_brand_ids[0]
    window = {"start": SANDBOX_TODAY - dt.timedelta(days=2), "end": SANDBOX_TODAY}
    small = list(client.list_answers(brand_id, engine="chatgpt", limit=7, **window))
    large = list(client.list_answers(brand_id, engine="chatgpt", limit=100, **window))
    assert [r["id"] for r in small] == [r["id"] for r in large]
    assert len(small) > 7 and len({r["id"] for r in small}) == len(small)
    assert {r["engine"] for r in small} == {"chatgpt"}
    assert {r["checked_on"] for r in small} <= {"2026-10-30", "2026-10-31"}

    prompt_id = next(iter(client.list_prompts(brand_id)))["id"]
    mentions = list(client.list_prompt_mentions(prompt_id, start=WEEK_START, end=SANDBOX_TODAY, limit=5))
    whole = list(client.list_prompt_mentions(prompt_id, start=WEEK_START, end=SANDBOX_TODAY))
    assert [m["id"] for m in mentions] == [m["id"] for m in whole]
    assert len(mentions) > 5 and all(m["prompt_id"] == prompt_id for m in mentions)


def test_complete_sets_surface_capped_total_count_and_total_citations(
    client: VisibilityClient, workspace_brand_ids: list[str]
) -> None:
    brand_id = workspace_brand_ids[0]
    generations = client.list_generations(brand_id, limit=2)
    assert isinstance(generations, CompleteSet)
    assert len(generations.rows) == 2 and generations.capped and generations.total_count > 2
    everything = client.list_generations(brand_id)
    assert not everything.capped and len(everything.rows) == everything.total_count

    urls = client.citation_urls(brand_id, start=WEEK_START, end=SANDBOX_TODAY, limit=3)
    assert len(urls.rows) == 3 and urls.capped and urls.total_count > 3
    assert isinstance(urls.total_citations, int) and urls.total_citations >= sum(
        r["citation_count"] for r in urls.rows
    )


def test_trend_endpoints_return_their_objects(
    client: VisibilityClient, workspace_brand_ids: list[str]
) -> None:
    brand_id = workspace_brand_ids[0]
    trend = client.citation_trends(brand_id, start=WEEK_START, end=SANDBOX_TODAY, engine="claude")
    assert trend["target"]["type"] == "domain" and len(trend["series"]) <= 7
    competitors = list(client.list_tracked_competitors(brand_id))
    assert competitors and all("history_from" in row for row in competitors)
    weekly = client.competitor_trends(brand_id, start=WEEK_START, end=SANDBOX_TODAY, granularity="week")
    assert weekly["granularity"] == "week" and weekly["brand"]["is_your_brand"] is True
    assert {c["id"] for c in weekly["competitors"]} == {c["id"] for c in competitors}


def test_topic_filter_is_sent_as_topic_id(client: VisibilityClient, workspace_brand_ids: list[str]) -> None:
    brand_id = workspace_brand_ids[0]
    with pytest.raises(NotFoundError) as caught:  # the sandbox checks the topic exists: it was sent
        client.citation_urls(brand_id, topic_id=str(uuid.uuid4()))
    assert caught.value.code == "not_found"
    topic_id = next(iter(client.list_topics(brand_id)))["id"]
    narrowed = client.citation_urls(brand_id, topic_id=topic_id, start=WEEK_START, end=SANDBOX_TODAY)
    assert narrowed.total_citations is not None


# --- every error code ------------------------------------------------------------------------------


def _error_cases(
    sandbox: SandboxHandle,
) -> list[tuple[str, str, type[VisibilityAPIError], str, Callable[..., Any]]]:
    own = _brand_of_role(sandbox, "workspace")
    other = _brand_of_role(sandbox, "other_workspace")
    out_of_scope = sorted(
        b.id
        for b in sandbox.world.brands
        if b.workspace_id == sandbox.world.keys[sandbox.keys["workspace"]].workspace_id
        and b.id not in (sandbox.world.keys[sandbox.keys["scoped"]].brand_scope or ())
    )[0]
    create_brand = ep.Endpoint("POST", "/v1/brands")
    delete_brand = ep.Endpoint("DELETE", "/v1/brands/{id}")
    return [
        (
            "workspace",
            "invalid_engine",
            BadRequestError,
            "400",
            lambda c: list(c.list_answers(own, engine="bing")),
        ),
        (
            "workspace",
            "invalid_date",
            BadRequestError,
            "400",
            lambda c: c.competitor_trends(own, start=SANDBOX_TODAY, end=WEEK_START),
        ),
        (
            "workspace",
            "invalid_request",
            BadRequestError,
            "400",
            lambda c: c.citation_trends(own, domain="example.com", url="https://example.com/a"),
        ),
        ("workspace", "missing_parameter", BadRequestError, "400", lambda c: c.create_topic(own, None)),
        ("revoked", "invalid_api_key", AuthenticationError, "401", lambda c: list(c.list_brands())),
        (
            "past_due",
            "subscription_required",
            SubscriptionRequiredError,
            "402",
            lambda c: list(c.list_brands()),
        ),
        ("no_api_plan", "plan_not_eligible", PermissionDeniedError, "403", lambda c: list(c.list_brands())),
        (
            "trialing",
            "forbidden",
            PermissionDeniedError,
            "403",
            lambda c: c.create_audit("https://example.com/", _brand_of_role(sandbox, "trialing")),
        ),
        (
            "scoped",
            "brand_scope_forbidden",
            PermissionDeniedError,
            "403",
            lambda c: c._object(create_brand, "/v1/brands", body={"name": "X", "domain": "x.com"}),
        ),
        ("workspace", "not_found", NotFoundError, "404", lambda c: c.get_brand(str(uuid.uuid4()))),
        ("workspace", "not_found", NotFoundError, "404", lambda c: c.get_brand(other)),
        ("scoped", "not_found", NotFoundError, "404", lambda c: c.get_brand(out_of_scope)),
        (
            "workspace",
            "method_not_allowed",
            VisibilityAPIError,
            "405",
            lambda c: c._object(delete_brand, delete_brand.path(id=own)),
        ),
    ]


ERROR_CASE_IDS = [
    "invalid_engine",
    "invalid_date",
    "invalid_request",
    "missing_parameter",
    "invalid_api_key",
    "subscription_required",
    "plan_not_eligible",
    "forbidden",
    "brand_scope_forbidden",
    "not_found-unknown",
    "not_found-other_workspace",
    "not_found-out_of_scope",
    "method_not_allowed",
]


@pytest.mark.parametrize("case", range(len(ERROR_CASE_IDS)), ids=ERROR_CASE_IDS)
def test_every_error_code_maps_to_its_exception_at_once(
    sandbox: SandboxHandle, case: int, assert_no_key: Callable[..., None]
) -> None:
    role, code, error_type, status, call = _error_cases(sandbox)[case]
    with make_client(sandbox, role) as api:
        with pytest.raises(error_type) as caught:
            call(api)
        stats = api.stats
    error = caught.value
    assert (error.code, str(error.status)) == (code, status)
    assert error.request_id and uuid.UUID(error.request_id)
    text = str(error)
    assert code in text and error.request_id in text and error.hint in text
    assert stats.total_requests == 1 and stats.retries_by_cause == {}  # never retried
    assert stats.errors_by_code == {code: 1}
    assert_no_key(sandbox.keys, text, repr(error))


def test_missing_api_key_maps_to_authentication_error(sandbox: SandboxHandle) -> None:
    api = VisibilityClient(sandbox.url, sandbox.keys["workspace"], transport=StripAuthorization())
    with api, pytest.raises(AuthenticationError) as caught:
        list(api.list_brands())
    assert caught.value.code == "missing_api_key" and caught.value.status == 401
    assert "VISIBILITY_API_KEY" in str(caught.value)


def test_trialing_workspace_reads_normally(sandbox: SandboxHandle) -> None:
    with make_client(sandbox, "trialing") as api:
        assert [row["id"] for row in api.list_brands()] == [_brand_of_role(sandbox, "trialing")]


# --- safety ----------------------------------------------------------------------------------------


def test_poll_path_to_another_origin_is_refused_before_any_request(sandbox: SandboxHandle) -> None:
    with make_client(sandbox) as api:
        for target in ("https://evil.example/v1/audit-reports/x", "//evil.example/v1/x", "v1/audit-reports"):
            with pytest.raises(ResponseShapeError):
                api.poll_audit(target)
        assert api.stats.total_requests == 0


def test_unreachable_service_retries_until_the_deadline_then_names_the_cause(
    sandbox: SandboxHandle, assert_no_key: Callable[..., None]
) -> None:
    import socket

    with socket.socket() as sock:  # a loopback port with nobody listening
        sock.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with VisibilityClient(
        dead_url, sandbox.keys["workspace"], retry_deadline_seconds=0.5, backoff_base_seconds=0.02
    ) as api:
        with pytest.raises(TransportError) as caught:
            list(api.list_brands())
        stats = api.stats
    assert "connect_error" in str(caught.value) and "gave up after" in str(caught.value)
    assert stats.retries_by_cause["connect_error"] >= 1
    assert stats.total_requests == stats.retries_by_cause["connect_error"] + 1
    assert_no_key(sandbox.keys, str(caught.value))


@pytest.mark.parametrize(
    ("url", "setting"),
    [
        ("http://api.example.com", "VISIBILITY_API_URL"),
        ("https://user:pw@api.example.com", "VISIBILITY_API_URL"),
    ],
)
def test_bad_settings_fail_before_any_request(url: str, setting: str) -> None:
    with pytest.raises(ConfigurationError, match=setting):
        VisibilityClient(url, "vk_secret_value_1")
    with pytest.raises(ConfigurationError, match="VISIBILITY_API_KEY"):
        VisibilityClient("https://api.example.com", "  ")


def test_key_never_reaches_logs_reprs_or_errors_at_debug_level(
    sandbox: SandboxHandle, caplog: pytest.LogCaptureFixture, assert_no_key: Callable[..., None]
) -> None:
    texts: list[str] = []
    with caplog.at_level(logging.DEBUG):
        for role in ("workspace", "revoked", "past_due"):
            with make_client(sandbox, role) as api:
                texts += [repr(api), str(api), repr(api._transport.http.headers)]
                try:
                    brand_id = next(iter(api.list_brands()))["id"]
                    api.get_brand(brand_id)
                    list(api.list_answers(brand_id, engine="nope"))
                except VisibilityAPIError as exc:
                    texts += [str(exc), repr(exc)]
                texts.append(repr(api.stats))
    assert any("HTTP Request" in r.getMessage() for r in caplog.records)  # httpx did log at DEBUG/INFO
    assert any(r.name.startswith("httpcore") for r in caplog.records)
    assert any("GET /v1/brands" in r.getMessage() for r in caplog.records if r.name == "visibility.api")
    record_texts = [f"{r.getMessage()} {r.args!r}" for r in caplog.records]
    assert_no_key(sandbox.keys, caplog.text, *record_texts, *texts)
