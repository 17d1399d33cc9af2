"""Cursor paging as a small state machine, and the envelope of complete-set endpoints.

The state machine is pure (it never does I/O) so that every way a service can break paging, a
repeated cursor or an empty page that claims more, is tested without a server, and so that a
broken service ends a sync with an error instead of an endless loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from resources.api.errors import PagingError, ResponseShapeError

Row = dict[str, Any]
Body = dict[str, Any]


class CursorPaginator:
    """Tracks one paging walk: which cursor to send next and whether the walk is over.

    The cursor is opaque: it is copied from ``next_cursor`` and sent back byte for byte.
    """

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._seen: set[str] = set()
        self._next: str | None = None
        self._done = False
        self.pages = 0

    @property
    def done(self) -> bool:
        return self._done

    @property
    def cursor(self) -> str | None:
        """The cursor for the next request (``None`` for the first page)."""
        if self._done:
            raise RuntimeError("the paging walk is over")
        return self._next

    def feed(self, body: Body, *, request_id: str | None = None) -> list[Row]:
        """Take one page's body; return its rows and move to the next state."""
        if self._done:
            raise RuntimeError("the paging walk is over")
        rows = body.get("data")
        if not isinstance(rows, list):
            raise ResponseShapeError(
                "field 'data' must be an array on a paging endpoint",
                endpoint=self.endpoint,
                request_id=request_id,
            )
        has_more = body.get("has_more", False)
        if has_more is None:
            has_more = False
        if not isinstance(has_more, bool):
            raise ResponseShapeError(
                f"field 'has_more' must be a boolean, got {type(has_more).__name__}",
                endpoint=self.endpoint,
                request_id=request_id,
            )
        self.pages += 1
        if not has_more:
            self._done = True
            return rows
        next_cursor = body.get("next_cursor")
        if not isinstance(next_cursor, str) or not next_cursor:
            raise PagingError(
                f"page {self.pages} has has_more=true but no usable next_cursor",
                endpoint=self.endpoint,
                request_id=request_id,
            )
        if not rows:
            raise PagingError(
                f"page {self.pages} is empty but has has_more=true; stopping instead of looping",
                endpoint=self.endpoint,
                request_id=request_id,
            )
        if next_cursor in self._seen or next_cursor == self._next:
            raise PagingError(
                f"page {self.pages} returned a cursor already used in this walk; stopping instead of looping",
                endpoint=self.endpoint,
                request_id=request_id,
            )
        if self._next is not None:
            self._seen.add(self._next)
        self._next = next_cursor
        return rows


#: Fetches one page: takes the cursor (None first) and returns (body, request id).
PageFetcher = Callable[[str | None], tuple[Body, str | None]]


def iterate_pages(
    endpoint: str, fetch: PageFetcher, validate: Callable[[Row], Row] | None = None
) -> Iterator[Row]:
    """Yield every row of a paging endpoint, lazily, one page request at a time."""
    paginator = CursorPaginator(endpoint)
    while not paginator.done:
        body, request_id = fetch(paginator.cursor)
        rows = paginator.feed(body, request_id=request_id)
        for row in rows:
            yield validate(row) if validate is not None else row


def _require_int(body: Body, name: str, endpoint: str, request_id: str | None) -> int:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResponseShapeError(
            f"field '{name}' must be an integer, got {type(value).__name__}",
            endpoint=endpoint,
            request_id=request_id,
        )
    return value


def complete_set_fields(
    body: Body, endpoint: str, *, request_id: str | None = None, with_citations: bool = False
) -> tuple[list[Row], int, bool, int | None]:
    """Read ``data``/``total_count``/``capped`` (and ``total_citations``) of a complete-set body.

    ``capped`` may be missing: it is then derived from ``total_count`` versus the rows returned,
    which is exactly how the spec defines it.
    """
    rows = body.get("data")
    if not isinstance(rows, list):
        raise ResponseShapeError("field 'data' must be an array", endpoint=endpoint, request_id=request_id)
    total_count = _require_int(body, "total_count", endpoint, request_id)
    capped = body.get("capped")
    if capped is None:
        capped = total_count > len(rows)
    elif not isinstance(capped, bool):
        raise ResponseShapeError(
            f"field 'capped' must be a boolean, got {type(capped).__name__}",
            endpoint=endpoint,
            request_id=request_id,
        )
    total_citations: int | None = None
    if with_citations and body.get("total_citations") is not None:
        total_citations = _require_int(body, "total_citations", endpoint, request_id)
    return rows, total_count, capped, total_citations
