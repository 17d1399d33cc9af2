"""Paging that never ends on its own: a cursor that changes on every page. The walk must stop at a
bound derived from the answers (repeated rows, total_count, the cap) with a PagingError naming the
endpoint, the pages read and the request id; first against a real misbehaving server, then pure."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest

from resources.api.client import VisibilityClient
from resources.api.errors import PagingError
from resources.api.paging import TOTAL_COUNT_SLACK_PAGES, iterate_pages
from tests.api.conftest import FAST
from tests.api.proxies import Seen, fake_service

KEY = "vk_test_paging_0123456789"
EP = "GET /v1/brands"


def _brands(ids: list[str]) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"Brand {i}"} for i in ids]


def test_a_cursor_that_changes_on_every_page_over_the_same_rows_stops_at_the_second_page() -> None:
    def same_rows_new_cursor(seen: Seen) -> tuple[int, dict[str, str], Any]:
        body = {"data": _brands(["a", "b"]), "has_more": True, "next_cursor": uuid.uuid4().hex}
        return 200, {"X-Request-Id": f"req-{len(service.seen)}"}, body

    with (
        fake_service(same_rows_new_cursor) as service,
        VisibilityClient(service.url, KEY, **FAST) as api,
        pytest.raises(PagingError) as caught,
    ):
        list(api.list_brands(limit=2))
    error = caught.value
    assert len(service.seen) == 2 and error.pages == 2
    assert "repeats the rows of page 1" in str(error) and "stopped after 2 page(s)" in str(error)
    assert error.endpoint == EP and EP in str(error) and error.request_id == "req-2"


def test_new_rows_forever_stop_at_the_bound_of_the_services_own_total_count() -> None:
    counter = itertools.count()

    def inventing(seen: Seen) -> tuple[int, dict[str, str], Any]:
        rows = _brands([f"r{next(counter)}" for _ in range(5)])
        return 200, {}, {"data": rows, "has_more": True, "next_cursor": uuid.uuid4().hex, "total_count": 10}

    with (
        fake_service(inventing) as service,
        VisibilityClient(service.url, KEY, **FAST) as api,
        pytest.raises(PagingError, match="total_count allows at most 2 page"),
    ):
        list(api.list_brands(limit=5))
    assert len(service.seen) == 2 + TOTAL_COUNT_SLACK_PAGES


def test_new_rows_forever_without_a_total_stop_at_the_clients_page_cap() -> None:
    counter = itertools.count()

    def inventing(seen: Seen) -> tuple[int, dict[str, str], Any]:
        return (
            200,
            {},
            {"data": _brands([f"r{next(counter)}"]), "has_more": True, "next_cursor": f"c{next(counter)}"},
        )

    with fake_service(inventing) as service, VisibilityClient(service.url, KEY, max_pages=25, **FAST) as api:
        rows = api.list_brands(limit=1)
        with pytest.raises(PagingError, match="the cap of a walk") as caught:
            for _ in rows:
                pass
    assert len(service.seen) == 25 and caught.value.pages == 25


# --- pure -----------------------------------------------------------------------------------------


def test_a_page_repeating_an_earlier_one_is_found_even_pages_later() -> None:
    pages = iter(
        [
            {"data": [{"id": "a"}], "has_more": True, "next_cursor": "1"},
            {"data": [{"id": "b"}], "has_more": True, "next_cursor": "2"},
            {"data": [{"id": "a"}], "has_more": True, "next_cursor": "3"},
        ]
    )
    with pytest.raises(PagingError, match="page 3 repeats the rows of page 1"):
        list(iterate_pages(EP, lambda cursor: (next(pages), "r")))


def _served(bodies: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
    """The rows of a walk whose pages are ``bodies``, in order."""
    pages = iter(bodies)
    return list(iterate_pages(EP, lambda cursor: (next(pages), "r"), **options))


def test_rows_without_ids_are_compared_whole() -> None:
    bodies = [{"data": [{"v": v}], "has_more": True, "next_cursor": str(n)} for n, v in enumerate([1, 2, 1])]
    with pytest.raises(PagingError, match="page 3 repeats"):
        _served(bodies)


def test_a_walk_within_its_total_count_ends_normally() -> None:
    bodies = [
        {"data": [{"id": f"{page}-{i}"} for i in range(2)], "has_more": True, "next_cursor": f"c{page}"}
        for page in range(3)
    ]
    bodies = [{**body, "total_count": 7} for body in bodies]
    bodies.append({"data": [{"id": "last"}], "has_more": False, "total_count": 7})
    assert len(_served(bodies, limit=2)) == 7


def test_a_walk_stops_at_its_page_cap() -> None:
    with pytest.raises(PagingError, match="the cap of a walk"):
        _served([{"data": [{"id": "a"}], "has_more": True, "next_cursor": "1"}], max_pages=1)
