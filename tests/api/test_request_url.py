"""The client builds each request's URL itself (one parse instead of httpx's three): the same URL."""

from __future__ import annotations

import contextlib
import random

import httpx
import pytest

from resources.api import endpoints as ep
from resources.api.client import VisibilityClient
from resources.api.errors import ResponseShapeError

KEY = "vsk_0123456789abcdef0123456789abcdef"
#: characters a path segment or a query value may hold, escaped or not
ALPHABET = "abcXYZ019-_.~ %+/=&?#:@!$'()*,;[]\\é🙂\"<>^`{|}"


def httpx_url(client: VisibilityClient, path: str, params: dict[str, object] | None) -> httpx.URL:
    """What httpx sends for a path relative to the client's base URL."""
    return client._transport.http.build_request("GET", path, params=params).url


def random_text(rng: random.Random, longest: int = 12) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, longest)))


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:9", "http://127.0.0.1:9/api/", "https://example.com:8443/x/y", "http://[::1]:9"],
)
def test_the_url_built_for_a_request_is_the_one_httpx_builds(base_url: str) -> None:
    rng = random.Random(21)
    with VisibilityClient(base_url, KEY) as client:
        covered = 0
        for _ in range(3000):
            segment = random_text(rng)
            path = rng.choice(
                [
                    ep.GET_BRAND.path(id=segment),
                    ep.LIST_ANSWERS.path(id=segment),
                    "/v1/" + segment,
                    segment,
                    "/" + segment + "/" + random_text(rng),
                ]
            )
            params = rng.choice(
                [
                    None,
                    {},
                    {"limit": rng.randint(1, 500)},
                    {"cursor": random_text(rng, 40), "limit": 100, "from": "2026-11-01"},
                    {random_text(rng, 5) or "k": random_text(rng), "engine": ["a", random_text(rng)]},
                ]
            )
            try:
                expected = httpx_url(client, path, params)
            except httpx.InvalidURL:  # refused as httpx refuses it (or left to httpx)
                with contextlib.suppress(httpx.InvalidURL):
                    assert client._transport.url(path, params) is None
                continue
            built = client._transport.url(path, params)
            if built is None:  # left to httpx
                assert path[:1] != "/" or "?" in path or "#" in path or "/." in path or path[:2] == "//"
                continue
            covered += 1
            assert built == expected and str(built) == str(expected), (path, params)
            assert built.raw_path == expected.raw_path
        assert covered > 1500  # the shortcut serves the paths the client's methods build


def test_a_path_the_shortcut_leaves_to_httpx_is_still_sent_as_httpx_builds_it() -> None:
    with VisibilityClient("http://127.0.0.1:9/api", KEY) as client:
        for path in ["/v1/audits/a1?step=2", "/v1/brands/../x", "//other.example/v1", "v1/brands", "/v1/a#b"]:
            assert client._transport.url(path, {"limit": 1}) is None
            assert client._transport.url(path, None) is None


@pytest.mark.parametrize(
    "poll", ["https://elsewhere.example/v1/audit-reports/a1", "//elsewhere.example/a1", "a1"]
)
def test_an_audit_poll_that_is_not_a_path_is_refused_before_any_request(poll: str) -> None:
    with VisibilityClient("http://127.0.0.1:9", KEY) as client:
        with pytest.raises(ResponseShapeError, match="must be a path starting with '/'"):
            client.poll_audit(poll)
        assert client.stats.total_requests == 0
