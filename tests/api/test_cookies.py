"""The client sends no cookie back: the service authenticates by key alone, and a cookie a server (or
a proxy in front of it) sets must not ride along on later requests (nor cost CPU to keep)."""

from __future__ import annotations

from typing import Any

from resources.api.client import VisibilityClient
from tests.api.conftest import FAST
from tests.api.proxies import Seen, fake_service

KEY = "vk_test_cookies_0123456789"


def test_a_cookie_the_server_sets_is_never_sent_back() -> None:
    def setting_a_cookie(seen: Seen) -> tuple[int, dict[str, str], Any]:
        body = {"data": [{"id": "a", "name": "Brand a"}], "has_more": False, "next_cursor": None}
        return 200, {"Set-Cookie": "session=abc123; Path=/"}, body

    with fake_service(setting_a_cookie) as service, VisibilityClient(service.url, KEY, **FAST) as api:
        first, second = list(api.list_brands()), list(api.list_brands())
    assert first == second == [{"id": "a", "name": "Brand a"}]
    assert len(service.seen) == 2
    assert [{name.lower() for name in seen.headers} & {"cookie", "cookie2"} for seen in service.seen] == [
        set(),
        set(),
    ]
