"""Pure policy: what each answer means, backoff bounds, endpoint shapes, settings validation."""

from __future__ import annotations

from typing import Any

import pytest

from resources.api import endpoints as ep
from resources.api.config import is_loopback_host, validate_api_key, validate_base_url
from resources.api.errors import ConfigurationError, ResponseShapeError
from resources.api.retry import Action, classify, full_jitter, may_retry_after_ambiguous_failure


@pytest.mark.parametrize(
    ("status", "code", "action"),
    [
        (200, None, Action.SUCCESS),
        (202, None, Action.SUCCESS),
        (429, "rate_limited", Action.WAIT_GLOBAL),
        (429, "endpoint_rate_limited", Action.WAIT_ENDPOINT),
        (429, "concurrency_limited", Action.SHED_CONCURRENCY),
        (429, "quota_exceeded", Action.QUOTA),
        (429, None, Action.WAIT_GLOBAL),
        (429, "something_new", Action.WAIT_GLOBAL),
        (500, "internal_error", Action.RETRY),
        (502, None, Action.RETRY),
        (503, None, Action.RETRY),
        (408, None, Action.RETRY),
        (400, "invalid_engine", Action.FAIL),
        (401, "invalid_api_key", Action.FAIL),
        (402, "subscription_required", Action.FAIL),
        (403, "plan_not_eligible", Action.FAIL),
        (404, "not_found", Action.FAIL),
        (405, "method_not_allowed", Action.FAIL),
        (409, None, Action.FAIL),
    ],
)
def test_answers_are_classified_by_status_and_code(status: int, code: str | None, action: Action) -> None:
    assert classify(status, code).action is action


def test_only_reads_repeat_after_an_ambiguous_failure() -> None:
    assert may_retry_after_ambiguous_failure("GET")
    assert not may_retry_after_ambiguous_failure("patch")  # read back instead (write_operations.py)
    assert not may_retry_after_ambiguous_failure("DELETE")
    assert not may_retry_after_ambiguous_failure("POST")


def test_full_jitter_spans_zero_to_the_capped_exponential() -> None:
    assert full_jitter(0, base_seconds=0.5, cap_seconds=30, rand=lambda: 0.0) == 0.0
    assert full_jitter(3, base_seconds=0.5, cap_seconds=30, rand=lambda: 1.0) == 4.0
    assert full_jitter(20, base_seconds=0.5, cap_seconds=30, rand=lambda: 1.0) == 30.0
    assert full_jitter(10_000, base_seconds=0.5, cap_seconds=30, rand=lambda: 1.0) == 30.0


def test_unknown_fields_are_kept_and_optional_fields_may_be_null() -> None:
    row = {"id": "b1", "name": "Acme", "domain": None, "x_new": {"nested": [1]}}
    assert ep.LIST_BRANDS.validate(row) is row


@pytest.mark.parametrize(
    ("endpoint", "obj", "field"),
    [
        (ep.LIST_BRANDS, {"id": 7, "name": "Acme"}, "'id' must be string, got number"),
        (ep.LIST_BRANDS, {"name": "Acme"}, "'id' is missing"),
        (ep.LIST_BRANDS, {"id": None, "name": "Acme"}, "'id' is missing or null"),
        (ep.CITATION_URLS, {"url": "u", "citation_count": 1.5}, "'citation_count' must be integer"),
        (ep.CITATION_URLS, {"url": "u", "citation_count": True}, "'citation_count' must be integer"),
        (ep.UNTRACK_COMPETITOR, {"id": "c", "untracked": "yes"}, "'untracked' must be boolean"),
        (
            ep.COMPETITOR_TRENDS,
            {
                "brand": {"brand_name": "A", "series": []},
                "competitors": [{"brand_name": "B", "series": [{}]}],
            },
            "'competitors[0].series[0].date' is missing",
        ),
        (ep.CITATION_TRENDS, {"target": "acme.com", "series": []}, "'target' must be object"),
    ],
)
def test_wrong_required_field_names_endpoint_and_field(endpoint: ep.Endpoint, obj: Any, field: str) -> None:
    with pytest.raises(ResponseShapeError) as caught:
        endpoint.validate(obj, request_id="req-1")
    text = str(caught.value)
    assert field in text
    assert endpoint.key in text and "req-1" in text


def test_path_ids_cannot_escape_their_segment() -> None:
    assert ep.GET_BRAND.path(id="../../admin?x=1") == "/v1/brands/..%2F..%2Fadmin%3Fx%3D1"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.9.8.7", "::1", "[::1]", "localhost", "LOCALHOST."])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["example.com", "10.0.0.1", "128.0.0.1", "localhost.example.com", "::2"])
def test_non_loopback_hosts(host: str) -> None:
    assert not is_loopback_host(host)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.example.com", "https://api.example.com"),
        ("https://api.example.com/", "https://api.example.com"),
        ("https://api.example.com/v1/", "https://api.example.com"),
        ("https://api.example.com/base", "https://api.example.com/base"),
        ("http://127.0.0.1:8765", "http://127.0.0.1:8765"),
        ("http://localhost:8765/", "http://localhost:8765"),
        ("http://[::1]:8765", "http://[::1]:8765"),
    ],
)
def test_valid_base_urls_are_normalised(url: str, expected: str) -> None:
    assert validate_base_url(url) == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://api.example.com", "https://"),
        ("http://10.0.0.1:80", "https://"),
        ("", "empty"),
        ("ftp://api.example.com", "http(s)"),
        ("api.example.com", "http(s)"),
        ("https://user:pw@api.example.com", "user name"),
        ("https://api.example.com/?k=v", "query"),
    ],
)
def test_invalid_base_urls_name_the_setting(url: str, reason: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        validate_base_url(url)
    assert "VISIBILITY_API_URL" in str(caught.value) and reason in str(caught.value)


@pytest.mark.parametrize("key", ["", "   ", "Bearer abc", "ab c", "ab\x00c"])
def test_invalid_keys_name_the_setting_without_echoing_the_key(key: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        validate_api_key(key)
    text = str(caught.value)
    assert "VISIBILITY_API_KEY" in text
    if key.strip():
        assert key.strip() not in text


def test_valid_key_is_stripped() -> None:
    assert validate_api_key("  vk_live_0123456789ab  ") == "vk_live_0123456789ab"


def test_log_guard_redacts_bearer_tokens_in_http_library_records(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from resources.api.redaction import install

    install()
    with caplog.at_level(logging.DEBUG, logger="httpcore.http11"):
        logging.getLogger("httpcore.http11").debug("headers=%s", [(b"authorization", b"Bearer vk_SECRET1")])
    assert "vk_SECRET1" not in caplog.text
    assert "[redacted]" in caplog.text
