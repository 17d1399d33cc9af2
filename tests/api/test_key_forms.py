"""The key in the forms a service may copy it in (base64 at any offset, hex, reversed, dashed) stays
out of every error text, and the whole key (plain or base64) out of every row; names are looked up
as the service spells them, scrubbed only where they are printed or stored. Against a real HTTP
server on loopback (``proxies.fake_service``)."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from resources.api import write_operations as ops
from resources.api.client import VisibilityClient
from resources.api.errors import BadRequestError
from resources.api.redaction import scrub
from tests.api.proxies import Seen, fake_service

KEY = "vsk_f00dfeed0123456789abcdef42424242"
SECRET = KEY.removeprefix("vsk_")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


#: The key as a hostile 400 quotes it (each form on its own).
QUOTED_FORMS = {
    "base64": _b64(KEY),
    "base64 after one character": _b64("x" + KEY)[2:],
    "base64 after two characters": _b64("xy" + KEY)[3:],
    "url-safe base64": base64.urlsafe_b64encode(("?>" + KEY).encode()).decode(),
    "hex": KEY.encode().hex(),
    "HEX": KEY.encode().hex().upper(),
    "reversed": KEY[::-1],
    "dashed": "-".join(SECRET[i : i + 4] for i in range(0, len(SECRET), 4)),
    "spaced": " ".join(SECRET[i : i + 2] for i in range(0, len(SECRET), 2)),
}


def client(url: str) -> VisibilityClient:
    return VisibilityClient(url, KEY, retry_deadline_seconds=1.0, backoff_base_seconds=0.01)


@pytest.mark.parametrize("form", sorted(QUOTED_FORMS))
def test_a_400_quoting_the_key_encoded_carries_no_form_of_it(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    quoted = QUOTED_FORMS[form]
    body = {"error": {"code": "invalid_request", "message": f"the key {quoted} is not allowed here"}}
    with (
        caplog.at_level(logging.DEBUG),
        fake_service(lambda seen: (400, {}, body)) as service,
        client(service.url) as api,
        pytest.raises(BadRequestError) as caught,
    ):
        list(api.list_brands())
    texts = [str(caught.value), repr(caught.value), caught.value.detail, caplog.text]
    assert "[redacted]" in str(caught.value)
    for text in texts:
        assert quoted not in text
        assert SECRET[:8] not in text


def test_scrub_finds_the_key_in_base64_wherever_it_starts_in_the_encoded_text() -> None:
    VisibilityClient("http://127.0.0.1:9", KEY).close()  # registers the key
    for prefix in ("", "a", "ab", "abc", "abcd"):
        encoded = _b64(prefix + KEY + " and more")
        assert "[redacted]" in scrub(encoded), prefix


def test_rows_echoing_the_whole_key_are_scrubbed_and_a_url_holding_eight_of_its_characters_is_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"https://example.com/{SECRET[:8]}/page"
    rows = [
        {"id": "b1", "name": "One", "note": f"sent with {KEY}", "token": _b64(KEY), "url": url},
        {"id": "b2", "name": "Two", f"x_{KEY}": 1, "aliases": [f"Bearer {KEY}"]},
    ]
    page = {"data": rows, "has_more": False, "next_cursor": None}
    with (
        caplog.at_level(logging.WARNING),
        fake_service(lambda seen: (200, {}, page)) as service,
        client(service.url) as api,
    ):
        landed = list(api.list_brands())
    assert landed[0]["note"] == "sent with [redacted]"
    assert landed[0]["token"] == "[redacted]"
    assert landed[0]["url"] == url
    assert landed[1]["aliases"] == ["Bearer [redacted]"] and "x_[redacted]" in landed[1]
    assert KEY not in repr(landed) and _b64(KEY) not in repr(landed)
    assert "holds the API key" in caplog.text


def _workspace(topics: list[dict[str, Any]], patched: list[Seen]) -> Any:
    """A service with one brand named after eight characters of the key, and ``topics``."""
    brand = {"id": "b1", "name": f"Echo Wise FP{SECRET[:8]}FP"}

    def script(seen: Seen) -> tuple[int, dict[str, str], Any]:
        if seen.path == "/v1/brands":
            return 200, {}, {"data": [brand], "has_more": False, "next_cursor": None}
        if seen.path == "/v1/brands/b1/topics":
            return 200, {}, {"data": topics, "has_more": False, "next_cursor": None}
        if seen.method == "PATCH":
            patched.append(seen)
            return 200, {}, {"data": {"id": "t1", "name": "renamed"}}
        return 404, {}, {"error": {"code": "not_found", "message": "no such thing"}}

    return script


def test_a_brand_named_with_eight_characters_of_the_key_is_found_by_that_name() -> None:
    with fake_service(_workspace([], [])) as service, client(service.url) as api:
        found = ops.resolve_brand(api, f"Echo Wise FP{SECRET[:8]}FP")
    assert found.id == "b1"
    assert str(found) == "'Echo Wise FP[redacted]FP' (b1)"  # what is printed stays scrubbed


@pytest.mark.parametrize(
    "current, new",
    [
        (f"Plans FP{SECRET[:8]}FP", "Plans FP[redacted]FP"),  # scrubbed, the two looked equal
        ("Fo\u200bo", "Fo?o"),  # sanitized, the zero-width space looked like '?'
    ],
)
def test_a_rename_compares_the_raw_names_and_sends_the_patch(current: str, new: str) -> None:
    patched: list[Seen] = []
    with (
        fake_service(_workspace([{"id": "t1", "name": current}], patched)) as service,
        client(service.url) as api,
    ):
        plan = ops.plan_rename_topic(api, "b1", "t1", new)
        assert plan.changes
        outcome = ops.rename_topic(api, plan)
    assert outcome.action == "renamed"
    assert len(patched) == 1
    assert SECRET[:8] not in outcome.describe() and SECRET[:8] not in str(outcome.metadata())
