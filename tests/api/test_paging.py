"""The paging state machine: opaque cursors, clean stops, and no endless loops."""

from __future__ import annotations

from typing import Any

import pytest

from resources.api.errors import PagingError, ResponseShapeError
from resources.api.paging import complete_set, iterate_pages

EP = "GET /v1/brands"


def _fetcher(pages: dict[str | None, dict[str, Any]], sent: list[str | None]):
    def fetch(cursor: str | None) -> tuple[dict[str, Any], str | None]:
        sent.append(cursor)
        return pages[cursor], f"req-{len(sent)}"

    return fetch


def test_walk_passes_cursors_back_untouched_and_stops_on_has_more_false() -> None:
    odd = "a/b+c==%2F?x=1&y=ü"  # anything a service may put in an opaque cursor
    pages = {
        None: {"data": [{"id": 1}, {"id": 2}], "has_more": True, "next_cursor": odd},
        odd: {"data": [{"id": 3}], "has_more": True, "next_cursor": "c2"},
        "c2": {"data": [{"id": 4}], "has_more": False, "next_cursor": "ignored"},
    }
    sent: list[str | None] = []
    rows = list(iterate_pages(EP, _fetcher(pages, sent)))
    assert [r["id"] for r in rows] == [1, 2, 3, 4]
    assert sent == [None, odd, "c2"]


def test_last_page_may_be_empty_and_null_has_more_means_done() -> None:
    sent: list[str | None] = []
    pages = {None: {"data": [], "has_more": None, "next_cursor": None}}
    assert list(iterate_pages(EP, _fetcher(pages, sent))) == []
    assert sent == [None]


def test_repeated_cursor_is_a_paging_error_not_a_loop() -> None:
    pages = {
        None: {"data": [{"id": 1}], "has_more": True, "next_cursor": "c1"},
        "c1": {"data": [{"id": 2}], "has_more": True, "next_cursor": "c2"},
        "c2": {"data": [{"id": 3}], "has_more": True, "next_cursor": "c1"},
    }
    sent: list[str | None] = []
    with pytest.raises(PagingError) as caught:
        list(iterate_pages(EP, _fetcher(pages, sent)))
    assert "already used" in str(caught.value)
    assert "req-3" in str(caught.value) and EP in str(caught.value)
    assert sent == [None, "c1", "c2"]


def test_cursor_equal_to_the_one_just_sent_is_a_paging_error() -> None:
    pages = {
        None: {"data": [{"id": 1}], "has_more": True, "next_cursor": "c1"},
        "c1": {"data": [{"id": 2}], "has_more": True, "next_cursor": "c1"},
    }
    sent: list[str | None] = []
    with pytest.raises(PagingError, match="already used"):
        list(iterate_pages(EP, _fetcher(pages, sent)))
    assert sent == [None, "c1"]  # stopped on the answer, not after asking for the same page again


def test_empty_page_with_has_more_is_a_paging_error() -> None:
    pages = {None: {"data": [], "has_more": True, "next_cursor": "c1"}}
    with pytest.raises(PagingError, match="empty"):
        list(iterate_pages(EP, _fetcher(pages, [])))


@pytest.mark.parametrize("cursor", [None, "", 17])
def test_has_more_without_a_usable_cursor_is_a_paging_error(cursor: Any) -> None:
    pages = {None: {"data": [{"id": 1}], "has_more": True, "next_cursor": cursor}}
    with pytest.raises(PagingError, match="next_cursor"):
        list(iterate_pages(EP, _fetcher(pages, [])))


@pytest.mark.parametrize(
    ("body", "field"),
    [({"data": {"id": 1}, "has_more": False}, "data"), ({"data": [], "has_more": "no"}, "has_more")],
)
def test_malformed_envelope_is_a_shape_error_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ResponseShapeError, match=field):
        list(iterate_pages(EP, _fetcher({None: body}, [])))


def test_rows_are_validated_lazily_one_page_at_a_time() -> None:
    sent: list[str | None] = []
    pages = {
        None: {"data": [{"id": 1}], "has_more": True, "next_cursor": "c1"},
        "c1": {"data": [{"id": 2}], "has_more": False},
    }
    rows = iterate_pages(EP, _fetcher(pages, sent), lambda page, _: [{**row, "seen": True} for row in page])
    assert next(rows) == {"id": 1, "seen": True}
    assert sent == [None]  # the second page is not fetched before it is needed


def test_complete_set_surfaces_total_count_capped_and_total_citations() -> None:
    body = {"data": [{"url": "u"}], "total_count": 5, "capped": True, "total_citations": 99}
    answer = complete_set(body, EP, with_citations=True)
    assert (len(answer.rows), answer.total_count, answer.capped, answer.total_citations) == (1, 5, True, 99)


def test_complete_set_derives_capped_when_absent() -> None:
    answer = complete_set({"data": [{}], "total_count": 3}, EP)
    assert answer.capped is True and answer.total_citations is None
    assert complete_set({"data": [{}], "total_count": 1}, EP).capped is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"data": [], "total_count": "3", "capped": False}, "total_count"),
        ({"data": [], "total_count": True, "capped": False}, "total_count"),
        ({"data": [], "total_count": 0, "capped": "no"}, "capped"),
        ({"data": None, "total_count": 0, "capped": False}, "data"),
    ],
)
def test_complete_set_wrong_types_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ResponseShapeError, match=field):
        complete_set(body, EP)
