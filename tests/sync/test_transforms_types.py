"""A value of another type than its column declares is an error naming table, column and endpoint,
never a silent conversion or a column of another type: a later correct run must still land."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from resources.api import endpoints as ep
from resources.api.errors import ResponseShapeError, VisibilityAPIError
from resources.warehouse.contract import PartitionScope
from resources.warehouse.duckdb import DuckDBWarehouse
from sync import tables
from sync.catalog import ANSWERS
from sync.fetching import naming_source
from sync.transforms import TransformError, answers_table, mentions_table, rows_to_table

DAY = "2024-03-01"


def answer_row(i: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"a{i}",
        "prompt_id": "p1",
        "engine": "chatgpt",
        "checked_on": DAY,
        "brand_mentioned": True,
        "brand_position": 2,
        "mention_count": 3,
        "citation_count": 1,
        **fields,
    }


def mention_row(**fields: Any) -> dict[str, Any]:
    return {
        "id": "m1",
        "response_id": "a1",
        "brand_name": "Acme",
        "position": 1,
        "sentiment": 0.5,
        "prompt_id": "p1",
        "engine": "chatgpt",
        "checked_on": DAY,
        **fields,
    }


@pytest.mark.parametrize(("column", "value"), [("mention_count", "3"), ("citation_count", "first")])
def test_a_string_count_on_answers_names_table_column_and_endpoint(column: str, value: str) -> None:
    with pytest.raises(TransformError) as caught, naming_source(ANSWERS):
        answers_table([answer_row(1), answer_row(2, **{column: value})], "b1")
    error = caught.value
    assert isinstance(error, ResponseShapeError) and isinstance(error, VisibilityAPIError)
    assert isinstance(error, ValueError)  # as before
    assert (error.table, error.column, error.field) == ("answers", column, column)
    assert f"answers.{column}" in str(error) and repr(value) in str(error)
    assert error.endpoint == ep.LIST_ANSWERS.key and ep.LIST_ANSWERS.key in str(error)


def test_a_numeric_string_is_not_read_as_a_number() -> None:
    with pytest.raises(TransformError, match=r"prompt_mentions\.position: .*string '3'"):
        mentions_table([mention_row(position="3")], "b1")


def test_an_integer_beyond_64_bits_names_its_column_not_an_overflow() -> None:
    with pytest.raises(TransformError, match=r"answers\.mention_count: .*outside the 64-bit range"):
        answers_table([answer_row(1, mention_count=2**70)], "b1")


def test_an_unknown_field_beyond_64_bits_names_the_field() -> None:
    with pytest.raises(TransformError, match="unknown field 'huge'") as caught:
        answers_table([answer_row(1, huge=2**70)], "b1")
    assert caught.value.column == "huge"


def test_a_number_column_still_takes_a_large_integer() -> None:
    table = mentions_table([mention_row(position=2**70)], "b1")
    assert table.column("position").to_pylist() == [float(2**70)]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("name", 5, "number 5 where a string was expected"),
        ("aliases", [1, "A"], "where an array of strings was expected"),
        ("engines", "chatgpt", "where an array of strings was expected"),
        ("created_at", 1709251200, "where an ISO 8601 date-time was expected"),
    ],
)
def test_other_declared_types_are_strict_too(field: str, value: object, expected: str) -> None:
    row = {"id": "b1", "name": "Acme", "aliases": [], "engines": ["claude"], field: value}
    with pytest.raises(TransformError, match=expected):
        rows_to_table(tables.BRANDS, [row])


def test_a_date_sent_as_a_number_is_refused() -> None:
    with pytest.raises(TransformError, match=r"checked_on: .*number 20240301 where a date"):
        mentions_table([mention_row(checked_on=20240301)], "b1")


def test_every_answer_field_has_its_declared_type_even_when_all_null() -> None:
    table = answers_table([answer_row(1, mention_count=None, brand_position=None)], "b1")
    types = {f.name: f.type for f in table.schema}
    assert types["mention_count"] == pa.int64() and types["brand_position"] == pa.int64()
    assert types["brand_mentioned"] == pa.bool_() and types["citation_count"] == pa.int64()


def test_a_wrongly_typed_batch_writes_nothing_and_the_next_correct_run_lands(tmp_path: Path) -> None:
    warehouse = DuckDBWarehouse(tmp_path / "w.duckdb", "visibility")
    day = dt.date.fromisoformat(DAY)
    scope = PartitionScope(("b1",), day, day + dt.timedelta(days=1), ("chatgpt",))
    warehouse.replace_partitions(tables.ANSWERS, answers_table([answer_row(1)], "b1"), scope, "run-1")

    def land(rows: list[dict[str, Any]], run_id: str) -> None:
        warehouse.replace_partitions(tables.ANSWERS, answers_table(rows, "b1"), scope, run_id)

    with pytest.raises(TransformError):
        land([answer_row(2, mention_count="3")], "run-2")
    land([answer_row(3, mention_count=7)], "run-3")
    rows = warehouse.query(
        f"SELECT id, mention_count, typeof(mention_count) AS t FROM {warehouse.table_ref('answers')}"
    ).to_pylist()
    assert [(r["id"], r["mention_count"], r["t"]) for r in rows] == [("a3", 7, "BIGINT")]
