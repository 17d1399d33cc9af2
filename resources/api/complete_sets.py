"""The envelope of the non-paging, possibly truncated endpoints (generations, citation URLs):
``data``, ``total_count``, ``capped`` (derived when missing, as the spec defines it) and
``total_citations``, each checked before a row is used."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from resources.api.endpoints import INT64_MAX, INT64_MIN
from resources.api.errors import ResponseShapeError

Row = dict[str, Any]
Body = dict[str, Any]


@dataclass(frozen=True)
class CompleteSet:
    """A non-paging, possibly truncated answer (generations, citation URLs)."""

    rows: list[Row]
    total_count: int
    capped: bool
    total_citations: int | None = None  # citation URLs only


def _require_int(body: Body, name: str, endpoint: str, request_id: str | None) -> int:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResponseShapeError(
            f"field '{name}' must be an integer, got {type(value).__name__}",
            field=name,
            endpoint=endpoint,
            request_id=request_id,
        )
    if not INT64_MIN <= value <= INT64_MAX:
        raise ResponseShapeError(
            f"field '{name}' is outside the 64-bit integer range",
            field=name,
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
        raise ResponseShapeError(
            "field 'data' must be an array", field="data", endpoint=endpoint, request_id=request_id
        )
    total_count = _require_int(body, "total_count", endpoint, request_id)
    capped = body.get("capped")
    if capped is None:
        capped = total_count > len(rows)
    elif not isinstance(capped, bool):
        raise ResponseShapeError(
            f"field 'capped' must be a boolean, got {type(capped).__name__}",
            field="capped",
            endpoint=endpoint,
            request_id=request_id,
        )
    total_citations: int | None = None
    if with_citations and body.get("total_citations") is not None:
        total_citations = _require_int(body, "total_citations", endpoint, request_id)
    return rows, total_count, capped, total_citations
