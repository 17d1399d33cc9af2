"""A value the connector sets (an override, a constant) is converted once and repeated: the column,
or the error, that converting it on every row gives, for every hostile value of every column type."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from resources.warehouse.contract import Column, TableSpec
from sync import tables, transforms
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


def outcome(build: Callable[[], pa.Table | pa.Array]) -> tuple[Any, ...]:
    """What a call gives: the table or array (schema or type, values with their Python types, NaN
    included), or the error (class, message, and the attributes a TransformError carries)."""
    try:
        result = build()
    except Exception as exc:  # any error: compared with the other way's
        attrs = tuple(getattr(exc, a, None) for a in ("table", "column", "endpoint", "request_id"))
        return ("error", type(exc), str(exc), attrs)
    shape = result.schema if isinstance(result, pa.Table) else result.type
    try:
        values = repr(result.to_pylist())
    except OverflowError:  # a timestamp Python's datetime cannot hold: Arrow's own rendering
        values = result.to_string()
    return ("table", shape, values, result)


def disagree(first: tuple[Any, ...], second: tuple[Any, ...]) -> bool:
    """Two outcomes differ (Arrow's ``equals`` too, but NaN never equals itself there)."""
    if first[:3] != second[:3]:
        return True
    return first[0] == "table" and "nan" not in first[2] and not first[3].equals(second[3])


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
