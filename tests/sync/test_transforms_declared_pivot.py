"""Rows read with their columns' declared types (msgspec's check, then Arrow's conversion) give the
table, or the error, that Arrow's type inference gives: for every hostile value of every column type,
missing and extra fields, mixed types across rows, empty pages and rows that are not dicts.

The reference is the same call with the declared pivot switched off: the inference path as it was.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import UserDict
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from resources.warehouse.contract import Column, TableSpec
from sync import tables, transforms
from sync.transforms import rows_to_table
from tests.hostile_values import HOSTILE

#: Every column type the tables declare, a required text and a required date among them.
PROBE = TableSpec(
    name="probe",
    description="Every declared column type.",
    columns=(
        Column("id", tables.STRING, "required text", nullable=False),
        Column("brand_id", tables.STRING, "a constant", nullable=False),
        Column("text", tables.STRING, "text"),
        Column("count", tables.INT, "BIGINT"),
        Column("score", tables.FLOAT, "DOUBLE"),
        Column("flag", tables.BOOL, "BOOLEAN"),
        Column("day", tables.DATE, "required DATE", nullable=False),
        Column("at", tables.TIMESTAMP, "TIMESTAMP"),
        Column("tags", tables.STRINGS, "list of strings"),
    ),
    key=("id",),
    kind="snapshot",
)
BASE: dict[str, Any] = {
    "id": "r1",
    "text": "t",
    "count": 3,
    "score": 0.5,
    "flag": False,
    "day": "2024-03-01",
    "at": "2024-03-01T10:00:00Z",
}
CONSTANTS = {"brand_id": "b1"}

#: Fewer values, for the pairs of them across rows.
MIXED: list[Any] = [None, True, 1, 2**63, 1.0, 1.5, "x", "2024-03-01", b"x", ["a"], {"a": 1}, Decimal("1")]


def outcome(build: Callable[[], pa.Table | pa.Array]) -> tuple[Any, ...]:
    """What a call gives: the table or array (schema or type, values with their Python types, NaN
    included), or the error (class, message, and the attributes a TransformError carries)."""
    try:
        result = build()
    except Exception as exc:  # any error: compared with the reference's
        attrs = tuple(getattr(exc, a, None) for a in ("table", "column", "endpoint", "request_id"))
        return ("error", type(exc), str(exc), attrs)
    shape = result.schema if isinstance(result, pa.Table) else result.type
    try:
        values = repr(result.to_pylist())
    except OverflowError:  # a timestamp Python's datetime cannot hold: Arrow's own rendering
        values = result.to_string()
    return ("table", shape, values, result)


def inferred_outcome(build: Callable[[], pa.Table]) -> tuple[Any, ...]:
    """The outcome of the path before the declared pivot: Arrow's inference only."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(transforms, "_declared_pivot", lambda spec, rows: None)
        return outcome(build)


def disagree(first: tuple[Any, ...], second: tuple[Any, ...]) -> bool:
    """Two outcomes differ (Arrow's ``equals`` too, but NaN never equals itself there)."""
    if first[:3] != second[:3]:
        return True
    return first[0] == "table" and "nan" not in first[2] and not first[3].equals(second[3])


def same(build: Callable[[], pa.Table]) -> str | None:
    """None when both paths agree, else a description of the difference."""
    fast, reference = outcome(build), inferred_outcome(build)
    return f"declared {fast[:3]} != inferred {reference[:3]}" if disagree(fast, reference) else None


def differences(spec: TableSpec, batches: Sequence[list[Any]], **kwargs: Any) -> list[str]:
    found = []
    for rows in batches:
        difference = same(lambda rows=rows: rows_to_table(spec, rows, **kwargs))  # type: ignore[misc]
        if difference is not None:
            found.append(f"{rows!r}: {difference}")
    return found


def declared(spec: TableSpec, rows: list[Any]) -> bool:
    return transforms._declared_pivot(spec, rows) is not None


@pytest.mark.parametrize("column", [c for c in BASE] + ["tags"])
def test_a_hostile_value_in_any_column_gives_the_inferred_table_or_error(column: str) -> None:
    batches = []
    for value in HOSTILE:
        row = {**BASE, column: value}
        batches += [[row], [BASE, row], [row, BASE]]
    assert differences(PROBE, batches, constants=CONSTANTS) == []


@pytest.mark.parametrize("column", list(BASE))
def test_mixed_types_across_rows_give_the_inferred_table_or_error(column: str) -> None:
    batches = [
        [{**BASE, column: first}, {**BASE, column: second}, {**BASE, column: None}]
        for first, second in itertools.product(MIXED, repeat=2)
    ]
    assert differences(PROBE, batches, constants=CONSTANTS) == []


def test_missing_fields_and_empty_pages_give_the_inferred_table_or_error() -> None:
    without = [{k: v for k, v in BASE.items() if k != column} for column in BASE]
    batches: list[list[Any]] = [[], [{}], [{}, {}], [BASE, {}], [{"id": "r1"}], *([row] for row in without)]
    batches += [[BASE, row] for row in without] + [[row, BASE] for row in without]
    assert differences(PROBE, batches, constants=CONSTANTS) == []
    assert differences(PROBE, batches) == []  # no brand_id: a required column missing
    assert differences(PROBE, batches, constants={"brand_id": 5}) == []  # a constant of another type


def test_extra_fields_keep_their_handling() -> None:
    extras: list[Any] = [None, 1, 2**70, 1.5, "x", True, ["a"], ["a", None], [1], {"a": 1}, b"x"]
    batches = [[{**BASE, "extra": value}] for value in extras]
    batches += [[BASE, {**BASE, "extra": value}] for value in extras]
    pairs = itertools.product(extras[:6], repeat=2)
    batches += [[{**BASE, "extra": a}, {**BASE, "extra": b}] for a, b in pairs]
    assert differences(PROBE, batches, constants=CONSTANTS) == []


def test_constants_present_in_rows_and_rows_that_are_not_dicts() -> None:
    batches: list[list[Any]] = [
        [{**BASE, "brand_id": "own"}],
        [{**BASE, "brand_id": None}],
        [{**BASE, "brand_id": 7}],
        [BASE, {**BASE, "brand_id": "own"}],
        [BASE, None],
        [BASE, UserDict(BASE)],
        [BASE, ("r1",)],
        [BASE, ["id"]],
        [BASE, "id"],
        [{**BASE, 1: "x"}],
    ]
    assert differences(PROBE, batches, constants=CONSTANTS) == []


def mention(i: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"m{i}",
        "response_id": f"a{i}",
        "brand_name": "Acme",
        "position": i,
        "sentiment": 0.25 * i,
        "prompt_id": "p1",
        "engine": "chatgpt",
        "checked_on": "2024-03-01",
        **fields,
    }


def answer(i: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"a{i}",
        "prompt_id": "p1",
        "engine": "chatgpt",
        "checked_on": "2024-03-01",
        "brand_mentioned": i % 2 == 0,
        "brand_position": None if i % 3 else i,
        "mention_count": i,
        "citation_count": 2 * i,
        **fields,
    }


def cited_page(i: int, **fields: Any) -> dict[str, Any]:
    return {
        "url": f"https://example.com/{i}",
        "domain": "example.com",
        "root_domain": "example.com",
        "citation_count": 10 - i,
        "avg_position": 1.5,
        "citation_share": 0.1,
        **fields,
    }


def cited_pages(rows: list[Any]) -> pa.Table:
    return transforms.cited_pages_table(
        rows,
        brand_id="b1",
        day=dt.date(2024, 3, 1),
        engine="chatgpt",
        total_count=len(rows),
        total_citations=100,
        capped=False,
    )


@pytest.mark.parametrize(
    ("make", "transform"),
    [
        (mention, lambda rows: transforms.mentions_table(rows, "b1")),
        (answer, lambda rows: transforms.answers_table(rows, "b1")),
        (cited_page, cited_pages),
    ],
    ids=["mentions", "answers", "cited_pages"],
)
def test_the_landed_tables_give_the_inferred_table_or_error(
    make: Callable[..., dict[str, Any]], transform: Callable[[list[Any]], pa.Table]
) -> None:
    clean = [make(i) for i in range(1, 6)]
    found = []
    batches = [clean, clean[:1]]
    batches += [[*clean, make(9, **{column: value})] for column in clean[0] for value in HOSTILE]
    for rows in batches:
        difference = same(lambda rows=rows: transform(rows))  # type: ignore[misc]
        if difference is not None:
            found.append(f"{rows[-1]!r}: {difference}")
    assert found == []


def test_clean_pages_of_the_landed_tables_take_the_declared_pivot() -> None:
    """Not a vacuous comparison: the common batches do go the declared way, hostile ones do not."""
    assert declared(tables.PROMPT_MENTIONS, [mention(i) for i in range(3)])
    assert declared(tables.ANSWERS, [answer(i) for i in range(3)])
    assert declared(tables.CITED_PAGES, [cited_page(i) for i in range(3)])
    assert declared(PROBE, [BASE, {**BASE, "score": 1, "count": None}, {"id": "r2", "day": "2024-03-02"}])
    for column, value in [
        ("count", 2.0),  # Arrow would truncate a float to BIGINT
        ("count", 1.5),
        ("count", True),
        ("count", 2**63),
        ("score", True),  # Arrow would read a boolean as DOUBLE
        ("score", 2**53 + 1),
        ("score", Decimal("1")),
        ("text", b"x"),  # Arrow would read bytes as text
        ("text", 1),
        ("day", dt.date(2024, 3, 1)),
        ("flag", 1),
        ("tags", ["a"]),  # a list column keeps the inference
        ("extra", "x"),  # an unknown field too
    ]:
        assert not declared(PROBE, [BASE, {**BASE, column: value}]), (column, value)
    assert not declared(PROBE, [BASE, UserDict(BASE)])


@pytest.mark.parametrize("column", PROBE.columns, ids=lambda c: c.name)
def test_a_value_the_connector_sets_is_read_once_with_the_same_result(column: Column) -> None:
    """An override is converted once and repeated: the column, or the error, of converting it on
    every row; a constant repeated is the array of it on every row."""
    found = []
    for value, length in itertools.product(HOSTILE, (0, 1, 3)):
        once = outcome(lambda: transforms._given(PROBE, column, value, length))  # noqa: B023
        every_row = outcome(lambda: transforms._converted(PROBE, column, [value] * length))  # noqa: B023
        if disagree(once, every_row):
            found.append(f"override {value!r} x{length}: {once[:3]} != {every_row[:3]}")
        if length:
            once = outcome(lambda: transforms._repeated(pa.array([value], type=column.type), length))  # noqa: B023
            every_row = outcome(lambda: pa.array([value] * length, type=column.type))  # noqa: B023
            if disagree(once, every_row):
                found.append(f"constant {value!r} x{length}: {once[:3]} != {every_row[:3]}")
    assert found == []
