"""Helpers shared by the API client's tests: clients on the sandbox, and checks of the key's secrecy."""

from __future__ import annotations

import contextlib
import html
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from resources.api.client import VisibilityClient
from sandbox.testing import SandboxHandle

#: Small backoff steps and deadlines keep faulted tests short; behaviour is the same as in production.
FAST: dict[str, Any] = {
    "backoff_base_seconds": 0.02,
    "backoff_max_seconds": 0.5,
    "retry_deadline_seconds": 30.0,
}


def make_client(handle: SandboxHandle, role: str = "workspace", **options: Any) -> VisibilityClient:
    return VisibilityClient(handle.url, handle.keys[role], **{**FAST, **options})


def sandbox_total(stats: dict[str, dict[str, int]], status: str | None = None) -> int:
    """Requests the sandbox counted (optionally only those answered with ``status``)."""
    return sum(n for by_status in stats.values() for code, n in by_status.items() if status in (None, code))


class StripAuthorization(httpx.HTTPTransport):
    """A real HTTP transport that drops the Authorization header: the only way to meet missing_api_key."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        del request.headers["authorization"]
        return super().handle_request(request)


@pytest.fixture
def client(sandbox: SandboxHandle) -> Iterator[VisibilityClient]:
    with make_client(sandbox) as api:
        yield api


@pytest.fixture
def workspace_brand_ids(client: VisibilityClient) -> list[str]:
    return [row["id"] for row in client.list_brands()]


@pytest.fixture
def assert_no_key() -> Callable[..., None]:
    """Assert that no text (message, repr, log) carries any of the sandbox's keys."""

    def check(keys: dict[str, str], *texts: str) -> None:
        for text in texts:
            for role, key in keys.items():
                assert key not in text, f"the {role} key leaked"

    return check


def key_parts_in(text: str, key: str, run: int = 8) -> list[str]:
    """Runs of ``run`` characters of the key's secret part (after ``vsk_``) that ``text`` holds, in
    any case, also once URL- or JSON-unescaped: what a scrubbed text must not hold."""
    secret = key.split("_", 1)[-1].lower()
    views = [text, urllib.parse.unquote(urllib.parse.unquote(text)), html.unescape(text)]
    with contextlib.suppress(UnicodeDecodeError):
        views.append(text.encode("latin-1", "backslashreplace").decode("unicode_escape"))
    found = []
    for view in views:
        lowered = view.lower()
        found += [secret[i : i + run] for i in range(len(secret) - run + 1) if secret[i : i + run] in lowered]
    return found
