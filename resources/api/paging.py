"""The two answer envelopes: cursor paging (``iterate_pages``) and complete sets.

A broken service ends a walk with a ``PagingError`` (endpoint, pages read, request id) instead of an
endless loop: on a repeated cursor, a page repeating an earlier page's rows (also under invented
ids), ``has_more`` on an empty page or without a cursor, more pages than the walk's first
``total_count`` allows (plus ``TOTAL_COUNT_SLACK_PAGES``) or than ``max_pages``, or the sync's
request budget spent. Cursors and pages are remembered as 16-byte digests.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from resources.api import json_body
from resources.api.endpoints import json_kind, valid_int64
from resources.api.errors import PagingError, RequestBudgetExceeded, ResponseShapeError

Row = dict[str, Any]
Body = dict[str, Any]

#: Most pages of one walk (a brand's answers over a year is some tens of thousands).
DEFAULT_MAX_PAGES = 100_000
#: Pages allowed beyond ``ceil(total_count / limit)``: rows may be added while the walk runs.
TOTAL_COUNT_SLACK_PAGES = 2


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _text(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _page_digest(rows: list[Any]) -> bytes:
    """What identifies a page: its rows' ids (the whole row when it has none)."""
    parts = []
    for row in rows:
        key = row.get("id") if isinstance(row, dict) else None
        parts.append(_text(key) if isinstance(key, str) else json_body.canonical(row))
    return _digest(b"\x1f".join(parts))


def _content_digest(rows: list[Any]) -> bytes | None:
    """A page's rows without their ``id``: equal for a page served again under invented ids
    (None when no row has an id and other fields: ``_page_digest`` already covers the rows)."""
    if not any(isinstance(row, dict) and "id" in row and len(row) > 1 for row in rows):
        return None
    without_ids = [
        {k: v for k, v in row.items() if k != "id"} if isinstance(row, dict) else row for row in rows
    ]
    return _digest(json_body.canonical(without_ids))


@dataclass
class WalkPosition:
    """Where one walk stands, for a caller that resumes it (``sync.resume``): the walk starts from
    ``start_cursor`` and, after each page whose rows were all yielded, records the next page's
    ``cursor`` (None when over) and counts ``pages``."""

    start_cursor: str | None = None
    cursor: str | None = None
    pages: int = 0
    #: set by the consumer: the position its last yielded batch ended at (None: mid-page)
    emitted: str | None = None


#: Fetches one page: takes the cursor (None first) and returns (body, request id).
PageFetcher = Callable[[str | None], tuple[Body, str | None]]
#: Turns one page's rows into the rows to yield (validation, filtering), given the request id.
PageHandler = Callable[[list[Row], str | None], list[Row]]


def _spent_mid_walk(
    exc: RequestBudgetExceeded, pages: int, rows_read: int, endpoint: str, request_id: str | None
) -> RequestBudgetExceeded:
    """The budget's refusal, saying how far the walk it cut short had got."""
    return RequestBudgetExceeded(
        f"{exc.detail}; this walk had read {pages} page(s) and {rows_read} row(s), "
        "the last still with has_more=true",
        requests=exc.requests,
        pages=pages,
        endpoint=endpoint,
        request_id=request_id,
    )


def _page_rows(body: Body, endpoint: str, request_id: str | None) -> tuple[list[Row], bool | None]:
    """A page's ``data`` and ``has_more``, refused when the envelope has the wrong shape."""
    rows = body.get("data")
    if not isinstance(rows, list):
        raise ResponseShapeError(
            "field 'data' must be an array on a paging endpoint",
            field="data",
            endpoint=endpoint,
            request_id=request_id,
        )
    has_more = body.get("has_more")
    if has_more is not None and not isinstance(has_more, bool):
        raise ResponseShapeError(
            f"field 'has_more' must be a boolean, got {type(has_more).__name__}",
            field="has_more",
            endpoint=endpoint,
            request_id=request_id,
        )
    return rows, has_more


def iterate_pages(
    endpoint: str,
    fetch: PageFetcher,
    on_page: PageHandler | None = None,
    *,
    limit: int | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
    walk: WalkPosition | None = None,
) -> Iterator[Row]:
    """Yield every row of a paging endpoint, lazily, one page request at a time; ``on_page`` checks
    and filters each page's rows. The cursor sent is the last ``next_cursor``, byte for byte; ``limit``
    (the page size) lets the service's ``total_count`` bound the walk."""
    page_size = limit if limit is not None and limit > 0 else 1
    cursor = walk.start_cursor if walk is not None else None  # a walk resumed where a killed one stopped
    seen_cursors: set[bytes] = set()
    #: digests of the pages read (their ids, and their rows without ids) -> page number
    seen_pages: dict[bytes, int] = {}
    seen_contents: dict[bytes, int] = {}
    pages = rows_read = 0
    page_bound: int | None = None  # the most pages the first ``total_count`` allows
    request_id: str | None = None

    def stop(why: str) -> PagingError:
        return PagingError(
            f"{why}; stopped after {pages} page(s) and {rows_read} row(s) instead of looping",
            pages=pages,
            endpoint=endpoint,
            request_id=request_id,
        )

    while True:
        try:
            body, request_id = fetch(cursor)
        except RequestBudgetExceeded as exc:
            if pages == 0:
                raise
            raise _spent_mid_walk(exc, pages, rows_read, endpoint, request_id) from None
        rows, has_more = _page_rows(body, endpoint, request_id)
        pages += 1
        rows_read += len(rows)
        if has_more:
            next_cursor = body.get("next_cursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                raise stop(f"page {pages} has has_more=true but no usable next_cursor")
            if not rows:
                raise stop(f"page {pages} is empty but has has_more=true")
            if _digest(_text(next_cursor)) in seen_cursors or next_cursor == cursor:
                raise stop(f"page {pages} returned a cursor already used in this walk")
            for seen, digest, how in (
                (seen_pages, _page_digest(rows), "a new cursor"),
                (seen_contents, _content_digest(rows), "new ids and a new cursor"),
            ):
                if digest is not None and (earlier := seen.setdefault(digest, pages)) != pages:
                    raise stop(f"page {pages} repeats the rows of page {earlier} under {how}")
            total = body.get("total_count")
            if page_bound is None and valid_int64(total) and total >= 0:
                # the first count bounds the walk: one that grows with every page must not move it
                page_bound = max(1, math.ceil(total / page_size)) + TOTAL_COUNT_SLACK_PAGES
            if page_bound is not None and pages >= page_bound:
                raise stop(
                    f"page {pages} still has has_more=true, but the service's total_count allows at most "
                    f"{page_bound - TOTAL_COUNT_SLACK_PAGES} page(s) of {page_size} row(s)"
                )
            if pages >= max_pages:
                raise stop(f"page {pages} still has has_more=true, the cap of a walk")
            if cursor is not None:
                seen_cursors.add(_digest(_text(cursor)))
            cursor = next_cursor
        yield from rows if on_page is None else on_page(rows, request_id)
        if walk is not None:
            walk.cursor = cursor if has_more else None
            walk.pages += 1
        if not has_more:
            return


@dataclass(frozen=True)
class CompleteSet:
    """A non-paging, possibly truncated answer (generations, citation URLs): check ``capped``
    before treating ``rows`` as complete."""

    rows: list[Row]
    total_count: int
    capped: bool
    total_citations: int | None = None  # citation URLs only


def complete_set(
    body: Body, endpoint: str, *, request_id: str | None = None, with_citations: bool = False
) -> CompleteSet:
    """A complete-set body's ``data``, ``total_count``, ``capped`` (derived from ``total_count``
    versus the rows when missing, as the spec defines it) and ``total_citations``, each checked."""

    def wrong(name: str, expected: str) -> ResponseShapeError:
        return ResponseShapeError(
            f"field '{name}' must be {expected}, got {json_kind(body.get(name))}",
            field=name,
            endpoint=endpoint,
            request_id=request_id,
        )

    rows = body.get("data")
    if not isinstance(rows, list):
        raise wrong("data", "an array")
    total_count = body.get("total_count")
    if not valid_int64(total_count):
        raise wrong("total_count", "a 64-bit integer")
    capped = body.get("capped")
    if capped is None:
        capped = total_count > len(rows)
    elif not isinstance(capped, bool):
        raise wrong("capped", "a boolean")
    total_citations = body.get("total_citations") if with_citations else None
    if total_citations is not None and not valid_int64(total_citations):
        raise wrong("total_citations", "a 64-bit integer")
    return CompleteSet(rows, total_count, capped, total_citations)
