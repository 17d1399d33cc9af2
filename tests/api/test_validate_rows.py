"""A page validated at once (msgspec's check, then the per-row loop on a doubt) gives what validating
each row gives: the same rows, or the same error (message, field, endpoint, request id), first
wrong row first, for every hostile value of every field of every endpoint."""

from __future__ import annotations

import itertools
from collections import OrderedDict, UserDict
from decimal import Decimal
from typing import Any

import pytest

from resources.api import endpoints as ep
from resources.api.errors import ResponseShapeError
from tests.hostile_values import HOSTILE

GOOD: dict[str, Any] = {
    "string": "s",
    "integer": 3,
    "number": 1.5,
    "boolean": True,
    "strings": ["a"],
    "array": [],
    "object": {},
}
MISSING = object()
#: A missing field among the values.
FIELD_VALUES: list[Any] = [MISSING, *HOSTILE]
ALL_ENDPOINTS = [e for e in vars(ep).values() if isinstance(e, ep.Endpoint)]
ROW_ENDPOINTS = [e for e in ALL_ENDPOINTS if e.rows]


def base_row(endpoint: ep.Endpoint, i: int = 1) -> dict[str, Any]:
    fields = {**endpoint.typed, **endpoint.required}
    row = {name: GOOD[kind] for name, kind in fields.items() if "." not in name and "[]" not in name}
    if "id" in row:
        row["id"] = f"r{i}"
    return row


def with_value(row: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    changed = {k: v for k, v in row.items() if k != name}
    if value is not MISSING:
        changed[name] = value
    return changed


def outcome(call: Any) -> tuple[Any, ...]:
    try:
        rows = call()
    except ResponseShapeError as exc:
        return ("error", type(exc), str(exc), exc.field, exc.endpoint, exc.request_id)
    return ("rows", type(rows), [id(row) for row in rows])


def difference(endpoint: ep.Endpoint, rows: list[Any]) -> str | None:
    at_once = outcome(lambda: endpoint.validate_rows(rows, request_id="req-1"))
    row_by_row = outcome(lambda: [endpoint.validate(row, request_id="req-1") for row in rows])
    return None if at_once == row_by_row else f"{rows!r}: {at_once} != {row_by_row}"


@pytest.mark.parametrize("endpoint", ROW_ENDPOINTS, ids=lambda e: e.key)
def test_a_hostile_value_in_any_field_gives_the_row_by_row_result(endpoint: ep.Endpoint) -> None:
    first, second = base_row(endpoint, 1), base_row(endpoint, 2)
    found = []
    for name, value in itertools.product([*first, "unknown"], FIELD_VALUES):
        changed, huge = with_value(second, name, value), with_value(first, name, 2**70)
        for rows in ([changed], [first, changed], [changed, first], [changed, huge]):
            found.append(difference(endpoint, rows))
    assert [f for f in found if f is not None] == []


@pytest.mark.parametrize("endpoint", ALL_ENDPOINTS, ids=lambda e: e.key)
def test_pages_of_odd_rows_give_the_row_by_row_result(endpoint: ep.Endpoint) -> None:
    row = base_row(endpoint)
    pages: list[list[Any]] = [
        [],
        [row],
        [row, row],
        [{}],
        [row, None],
        [row, "row"],
        [row, [row]],
        [row, UserDict(row)],
        [OrderedDict(row)],
        [{**row, 1: "x"}],
    ]
    assert [d for d in (difference(endpoint, page) for page in pages) if d is not None] == []


def test_clean_pages_are_checked_at_once_and_doubts_go_to_the_loop() -> None:
    """Not a vacuous comparison: the common pages pass msgspec's check, doubtful ones do not."""
    for endpoint in (ep.LIST_PROMPT_MENTIONS, ep.LIST_ANSWERS, ep.CITATION_URLS, ep.LIST_GENERATIONS):
        page = [base_row(endpoint, i) for i in range(3)]
        assert endpoint._passes_at_once(page), endpoint.key  # type: ignore[attr-defined]
    mention = base_row(ep.LIST_PROMPT_MENTIONS)
    assert ep.LIST_PROMPT_MENTIONS._passes_at_once([{**mention, "position": 2, "brand_name": None}])  # type: ignore[attr-defined]
    for doubt in [
        {**mention, "position": Decimal("1")},  # msgspec would take it as a number, the check does not
        {**mention, "position": 2**63},  # a number the check takes, msgspec's int does not
        {**mention, "position": True},
        {**mention, "id": None},
        UserDict(mention),
    ]:
        assert not ep.LIST_PROMPT_MENTIONS._passes_at_once([mention, doubt]), doubt  # type: ignore[attr-defined]
    tracked = base_row(ep.LIST_TRACKED_COMPETITORS)  # lists of strings: always the loop
    assert not ep.LIST_TRACKED_COMPETITORS._passes_at_once([tracked])  # type: ignore[attr-defined]
