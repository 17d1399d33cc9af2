"""``Warehouse.query`` takes ``:name`` parameters on every engine, and the read queries use them."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from resources.warehouse import queries
from resources.warehouse.base import Warehouse, bind_parameters
from resources.warehouse.contract import Column, TableSpec
from tests.fixtures_bigquery import BigQueryTarget
from tests.warehouse.conftest import D1, D2, D3, MENTIONS, Case, mention_rows, scope

QUOTED = 'O\'Brien "&" 100% -- not a comment; :not_a_parameter'
VALUES: dict[str, Any] = {"day": dt.date(2026, 2, 28), "text": QUOTED, "n": 41, "nothing": None}
#: The same query on every engine: a date, a string holding quotes, an int and a NULL.
TYPED = (
    "SELECT CAST(:day AS DATE) AS day, :text AS text, :n + 1 AS n, "
    "CAST(:nothing AS VARCHAR) IS NULL AS is_null, 'a:b' AS literal"
)
TOTALS = ("responses_answered", "responses_with_brand", "mention_count", "citation_count")
TYPED_ROW = {"day": VALUES["day"], "text": QUOTED, "n": 42, "is_null": True, "literal": "a:b"}


def _dollar(name: str) -> str:
    return f"${name}"


@pytest.mark.parametrize(
    ("sql", "native"),
    [
        ("SELECT :a, x::INT, :a::DATE", "SELECT $a, x::INT, $a::DATE"),
        (
            "SELECT ':a', \":a\", `:a` -- :a\n/* :a */ FROM t",
            "SELECT ':a', \":a\", `:a` -- :a\n/* :a */ FROM t",
        ),
        ("SELECT 'it''s :a' || :a_2", "SELECT 'it''s :a' || $a_2"),
        ("SELECT list[1:2], 12:30", "SELECT list[1:2], 12:30"),
    ],
)
def test_only_named_parameters_outside_quotes_and_comments_are_translated(sql: str, native: str) -> None:
    assert bind_parameters(sql, {"a": 1, "a_2": 2}, _dollar) == native


def test_a_parameter_without_a_value_is_named_before_the_query_runs() -> None:
    with pytest.raises(ValueError, match=r":since has no value \(given: \['until'\]\)"):
        bind_parameters("SELECT 1 WHERE d >= :since", {"until": 1}, _dollar)


def test_percent_signs_are_doubled_only_for_drivers_that_read_them_and_only_with_parameters() -> None:
    sql = "SELECT :a WHERE url LIKE '%x%'"
    assert bind_parameters(sql, {"a": 1}, lambda n: f"%({n})s", escape_percent=True) == (
        "SELECT %(a)s WHERE url LIKE '%%x%%'"
    )
    assert bind_parameters("SELECT 'x%'", {}, lambda n: f"%({n})s", escape_percent=True) == "SELECT 'x%'"


def _typed_row(warehouse: Warehouse) -> dict[str, Any]:
    return warehouse.query(TYPED, VALUES).to_pylist()[0]


def test_a_date_a_quoted_string_an_int_and_a_null_travel_as_parameters(case: Case) -> None:
    case.warehouse.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    assert _typed_row(case.warehouse) == TYPED_ROW


def test_parameters_filter_landed_rows_without_reaching_the_sql(case: Case) -> None:
    wh = case.warehouse
    rows = mention_rows("b1", [D1, D2], name=QUOTED)
    wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D3), "run-1")
    sql = (
        f"SELECT COUNT(*) AS n FROM {wh.table_ref('mentions')} "
        "WHERE checked_on >= :since AND brand_name = :name AND mentions < :most "
        "AND (CAST(:engine AS VARCHAR) IS NULL OR engine = :engine)"
    )
    params: dict[str, Any] = {"since": D2, "name": QUOTED, "most": 1, "engine": None}
    assert wh.query(sql, params).to_pylist() == [{"n": 2}]
    assert wh.query(sql, params | {"engine": "claude"}).to_pylist() == [{"n": 1}]


def test_bigquery_takes_the_same_parameters(bigquery_target: BigQueryTarget) -> None:
    wh = bigquery_target.warehouse()
    spec = dataclasses.replace(MENTIONS, name=bigquery_target.prefix + "mentions")
    wh.replace_partitions(spec, mention_rows("b1", [D1, D2], name=QUOTED), scope(("b1",), D1, D3), "run-1")
    assert _typed_row(wh) == TYPED_ROW
    sql = (
        f"SELECT COUNT(*) AS n FROM {wh.table_ref(spec.name)} "
        "WHERE checked_on >= :since AND brand_name = :name AND mentions < :most LIMIT :max_rows"
    )
    assert wh.query(sql, {"since": D2, "name": QUOTED, "most": 1, "max_rows": 5}).to_pylist() == [{"n": 2}]


BRAND = "0b6f0d5e-4a55-4f4b-9b8e-6a2f6f3b1c2d"
TRENDS = TableSpec(
    name="competitor_trends",
    description="The columns of competitor_trends the checks read.",
    columns=(
        Column("brand_id", pa.string(), "Brand.", nullable=False),
        Column("engine", pa.string(), "Engine.", nullable=False),
        Column("granularity", pa.string(), "day or week.", nullable=False),
        Column("date", pa.date32(), "Day.", nullable=False),
        Column("brand_name", pa.string(), "Entity.", nullable=False),
        *(Column(c, pa.int64(), c) for c in TOTALS),
    ),
    key=("brand_id", "engine", "granularity", "date", "brand_name"),
    kind="partitioned",
    date_column="date",
)


def _trend_rows() -> pa.Table:
    cells = [("day", D1, 1), ("day", D2, 2), ("week", D2, 100)]
    return pa.table(
        {
            "brand_id": [BRAND] * 3,
            "engine": ["all"] * 3,
            "granularity": [g for g, _, _ in cells],
            "date": [d for _, d, _ in cells],
            "brand_name": [QUOTED] * 3,
            **{c: [n for *_, n in cells] for c in TOTALS},
        },
        schema=TRENDS.arrow_schema,
    )


def test_read_queries_pass_their_dates_ids_and_engines_as_parameters(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(TRENDS, _trend_rows(), scope((BRAND,), D1, D3, ("all",)), "run-1")
    assert queries.trend_windows(wh, end_before=D3, days=7) == [(BRAND, D1, D3)]
    totals = queries.competitor_series_totals(wh, brand_id=BRAND, engine="all", start=D2, end=D3)
    assert totals == {QUOTED: dict.fromkeys(TOTALS, 2.0)}
    injected = "x' OR '1'='1"
    assert queries.competitor_series_totals(wh, brand_id=BRAND, engine=injected, start=D1, end=D3) == {}
