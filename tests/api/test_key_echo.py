"""A service (or proxy) that echoes the key back: in X-Request-Id, in error messages and codes, in the
reason phrase. The key must reach no exception text, no log record and no metadata; every quoted
server text is also free of control characters and bounded."""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Callable

import httpx
import pytest

from resources.api.client import VisibilityClient
from resources.api.errors import BadRequestError, NotFoundError, PagingError, ServerError, VisibilityAPIError
from resources.api.redaction import MAX_TOKEN_CHARS, sanitize, scrub
from sandbox.testing import SandboxHandle
from tests.api.conftest import FAST, key_parts_in
from tests.api.proxies import RewritingProxy, answer, bearer_of


def echoing_client(sandbox: SandboxHandle, rewrite: Callable[..., httpx.Response], **options: object):
    return VisibilityClient(
        sandbox.url,
        sandbox.keys["workspace"],
        transport=RewritingProxy(rewrite),
        **{**FAST, "retry_deadline_seconds": 0.5, **options},  # type: ignore[arg-type]
    )


def echo_everywhere(request: httpx.Request, original: httpx.Response) -> httpx.Response:
    """X-Request-Id, the error message and code, and the reason phrase all carry the key."""
    key = bearer_of(request)
    headers = {"X-Request-Id": f"req-{key}-Bearer {key}"}
    if original.status_code >= 400:
        body = original.json()
        body["error"]["message"] = f"bad key {key}; Authorization: Bearer {key}"
        return answer(original, headers=headers, body=body, reason=key.encode())
    return answer(original, headers=headers, reason=key.encode())


def _texts_of(error: BaseException) -> list[str]:
    return [str(error), repr(error), str(error.args), str(vars(error))]


def test_a_key_echoed_in_request_id_message_and_reason_reaches_no_error_log_or_metadata(
    sandbox: SandboxHandle, caplog: pytest.LogCaptureFixture, assert_no_key: Callable[..., None]
) -> None:
    texts: list[str] = []
    with caplog.at_level(logging.DEBUG), echoing_client(sandbox, echo_everywhere) as api:
        brand_id = next(iter(api.list_brands()))["id"]
        with pytest.raises(NotFoundError) as caught:
            api.get_brand("0000-not-a-brand")
        texts += _texts_of(caught.value)
        with pytest.raises(BadRequestError) as bad:
            list(api.list_answers(brand_id, engine="nope"))
        texts += _texts_of(bad.value)
        metadata = api.stats.to_metadata()
    error = caught.value
    assert error.request_id and "[redacted]" in error.request_id  # quoted, but scrubbed
    assert "bad key [redacted]" in str(error)
    assert any("HTTP Request" in r.getMessage() for r in caplog.records)  # httpx logged the reason
    records = [f"{r.getMessage()} {r.args!r}" for r in caplog.records]
    assert_no_key(sandbox.keys, *texts, *records, caplog.text, str(metadata))


def test_a_key_echoed_by_a_failing_service_stays_out_of_retry_logs_and_the_final_error(
    sandbox: SandboxHandle, caplog: pytest.LogCaptureFixture, assert_no_key: Callable[..., None]
) -> None:
    def fail_with_the_key(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        key = bearer_of(request)
        body = {"error": {"code": "internal_error", "message": f"upstream said {key}"}}
        return answer(original, status=500, headers={"X-Request-Id": key}, body=body)

    with caplog.at_level(logging.DEBUG), echoing_client(sandbox, fail_with_the_key) as api:
        with pytest.raises(ServerError) as caught:
            api.get_brand(sandbox.world.brands[0].id)
        metadata = api.stats.to_metadata()
    assert caught.value.request_id == "[redacted]"
    assert any(r.name == "visibility.api" and r.levelno == logging.WARNING for r in caplog.records)
    assert_no_key(sandbox.keys, *_texts_of(caught.value), caplog.text, str(metadata))


def test_a_key_sent_back_as_the_error_code_is_not_a_metadata_key(
    sandbox: SandboxHandle, assert_no_key: Callable[..., None]
) -> None:
    def code_is_the_key(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        body = {"error": {"code": bearer_of(request), "message": "no"}}
        return answer(original, status=400, body=body)

    with echoing_client(sandbox, code_is_the_key) as api:
        with pytest.raises(VisibilityAPIError) as caught:
            list(api.list_brands())
        metadata = api.stats.to_metadata()
    assert metadata["errors_by_code"] == {"[redacted]": 1}
    assert_no_key(sandbox.keys, *_texts_of(caught.value), str(metadata), repr(api.stats))


def test_a_paging_error_quotes_a_scrubbed_request_id(
    sandbox: SandboxHandle, assert_no_key: Callable[..., None]
) -> None:
    def endless_empty_pages(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        body = {"data": [], "has_more": True, "next_cursor": "c"}
        return answer(original, headers={"X-Request-Id": bearer_of(request)}, body=body)

    with echoing_client(sandbox, endless_empty_pages) as api, pytest.raises(PagingError) as caught:
        list(api.list_brands())
    assert "[redacted]" in str(caught.value)
    assert_no_key(sandbox.keys, *_texts_of(caught.value))


def test_request_ids_with_control_characters_are_sanitized_and_bounded(sandbox: SandboxHandle) -> None:
    forged = "abc\x1b[31m\tFORGED LOG LINE" + "x" * 5000

    def hostile_request_id(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        return answer(original, headers={"X-Request-Id": forged})

    with echoing_client(sandbox, hostile_request_id) as api, pytest.raises(NotFoundError) as caught:
        api.get_brand("0000-not-a-brand")
    request_id = caught.value.request_id
    assert request_id is not None and request_id.startswith("abc?[31m?FORGED LOG LINE")
    assert len(request_id) <= MAX_TOKEN_CHARS
    assert request_id.isprintable() and "\x1b" not in str(caught.value)


def test_scrub_removes_the_exact_key_anywhere_and_sanitize_cuts_after_scrubbing() -> None:
    key = "vk_live_0123456789abcdef"
    from resources.api.redaction import register_secret

    register_secret(key)
    assert scrub(f"id={key}&x") == "id=[redacted]&x"
    assert scrub(f"{key[:8]}") == key[:8]  # a part of the key is not the key
    cut = sanitize("x" * 10 + key, 15)
    assert key[:4] not in cut and len(cut) <= 15


def test_a_key_echoed_in_a_wrongly_typed_body_field_is_not_quoted(
    sandbox: SandboxHandle, assert_no_key: Callable[..., None]
) -> None:
    def key_as_a_field(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        body = original.json()
        for row in body["data"]:
            row["engines"] = bearer_of(request)  # a string where an array of strings belongs
            row["id"] = f"id-{bearer_of(request)}"
        return answer(original, body=body)

    with echoing_client(sandbox, key_as_a_field) as api, pytest.raises(VisibilityAPIError) as caught:
        list(api.list_brands())
    assert caught.value.field == "engines" and "'[redacted]'" in str(caught.value)  # type: ignore[attr-defined]
    assert_no_key(sandbox.keys, *_texts_of(caught.value))


def test_scrubbing_a_text_again_leaves_the_mask_as_it_was() -> None:
    from resources.api.redaction import REDACTED, register_secret, scrub

    key = "vsk_" + "k" * 32
    register_secret(key)
    once = scrub(f"(Authorization: Bearer {key})")
    assert once == f"(Authorization: Bearer {REDACTED})"
    assert scrub(scrub(once)) == once


def _echo_forms(key: str) -> dict[str, str]:
    """How a server may quote the key without its prefix: what the client must still scrub."""
    tail = key.split("_", 1)[1]
    return {
        "tail": tail,
        "tail_upper": tail.upper(),
        "tail_part": tail[5:21],
        "url_escaped": urllib.parse.quote(key, safe="").replace("_", "%5F"),
        "url_escaped_every_char": "".join(f"%{ord(ch):02X}" for ch in tail),
        "url_escaped_twice": "".join(f"%25{ord(ch):02X}" for ch in tail),
        "json_escaped": "".join(f"\\u{ord(ch):04x}" for ch in tail),
        "json_in_json": json.dumps({"k": "".join(f"\\u{ord(ch):04x}" for ch in tail)}),
        "html_entities": "".join(f"&#{ord(ch)};" for ch in tail),
    }


@pytest.mark.parametrize("form", list(_echo_forms("vsk_0123456789abcdef0123456789abcdef")))
def test_a_key_echoed_without_its_prefix_or_escaped_reaches_no_error_log_or_metadata(
    sandbox: SandboxHandle, caplog: pytest.LogCaptureFixture, form: str
) -> None:
    def echo_form(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        quoted = _echo_forms(bearer_of(request))[form]
        headers = {"X-Request-Id": f"req-{quoted}"}
        if original.status_code >= 400:
            body = {"error": {"code": f"bad_{quoted}", "message": f"key {quoted} is not valid here"}}
            return answer(original, headers=headers, body=body, reason=quoted.encode())
        return answer(original, headers=headers, reason=quoted.encode())

    key = sandbox.keys["workspace"]
    with caplog.at_level(logging.DEBUG), echoing_client(sandbox, echo_form) as api:
        list(api.list_brands())
        with pytest.raises(NotFoundError) as caught:
            api.get_brand("0000-not-a-brand")
        metadata = api.stats.to_metadata()
    texts = [*_texts_of(caught.value), caplog.text, str(metadata)]
    texts += [f"{r.getMessage()} {r.args!r}" for r in caplog.records]
    assert "[redacted]" in str(caught.value)
    assert not [part for text in texts for part in key_parts_in(text, key)]


def test_runs_of_the_key_are_scrubbed_but_words_it_shares_with_ordinary_text_are_not() -> None:
    from resources.api.redaction import register_secret

    register_secret("vk_test_deadline_0123456789")
    assert scrub("past the 1s retry deadline") == "past the 1s retry deadline"
    assert scrub("tail deadline_0123456789!") == "tail [redacted]!"
    assert scrub("part 1234567 and 12345678") == "part 1234567 and [redacted]"  # 8 characters or more
