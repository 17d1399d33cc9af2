"""Arrow -> engine type mapping and the type-change rules (pure)."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from resources.warehouse.types import (
    BigQueryType,
    Kind,
    SqlType,
    UnsupportedTypeError,
    bigquery_type,
    duckdb_type,
    from_bigquery_type,
    from_duckdb_type,
    from_postgres_type,
    is_compatible,
    postgres_type,
    sql_type,
)

S = SqlType


@pytest.mark.parametrize(
    ("arrow", "expected"),
    [
        (pa.bool_(), S(Kind.BOOLEAN)),
        (pa.int64(), S(Kind.BIGINT)),
        (pa.float64(), S(Kind.DOUBLE)),
        (pa.string(), S(Kind.VARCHAR)),
        (pa.date32(), S(Kind.DATE)),
        (pa.timestamp("us", tz="UTC"), S(Kind.TIMESTAMPTZ)),
        (pa.list_(pa.string()), S(Kind.VARCHAR, is_list=True)),
        (pa.list_(pa.int64()), S(Kind.BIGINT, is_list=True)),
        (pa.list_(pa.null()), S(Kind.VARCHAR, is_list=True)),
        (pa.null(), None),
    ],
)
def test_arrow_types_map_to_one_logical_type(arrow: pa.DataType, expected: SqlType | None) -> None:
    assert sql_type(arrow) == expected


@pytest.mark.parametrize(
    "arrow",
    [
        pa.int32(),
        pa.uint64(),
        pa.large_string(),
        pa.timestamp("us"),
        pa.timestamp("ns", tz="UTC"),
        pa.decimal128(10, 2),
        pa.binary(),
        pa.time64("us"),
        pa.duration("s"),
        pa.struct([("a", pa.int64())]),
        pa.list_(pa.struct([("a", pa.int64())])),
        pa.map_(pa.string(), pa.int64()),
    ],
)
def test_types_the_transforms_never_produce_are_refused(arrow: pa.DataType) -> None:
    with pytest.raises(UnsupportedTypeError, match=re.escape(str(arrow))):
        sql_type(arrow)


def test_engine_names_round_trip_through_the_catalog_spellings() -> None:
    scalars = [S(k) for k in Kind] + [S(k, is_list=True) for k in Kind]
    for st in scalars:
        assert from_duckdb_type(duckdb_type(st)) == st
        assert from_postgres_type(postgres_type(st)) == st
        bq = bigquery_type(st)
        assert from_bigquery_type(bq.field_type, bq.mode) == st
    assert from_duckdb_type("TIMESTAMP WITH TIME ZONE") == S(Kind.TIMESTAMPTZ)
    assert from_postgres_type("timestamp with time zone[]") == S(Kind.TIMESTAMPTZ, is_list=True)
    assert from_bigquery_type("INTEGER") == S(Kind.BIGINT)


def test_engine_names() -> None:
    assert duckdb_type(S(Kind.VARCHAR, is_list=True)) == "VARCHAR[]"
    assert postgres_type(S(Kind.TIMESTAMPTZ)) == "timestamp with time zone"
    assert bigquery_type(S(Kind.TIMESTAMPTZ)) == BigQueryType("TIMESTAMP", "NULLABLE")
    assert bigquery_type(S(Kind.VARCHAR, is_list=True)) == BigQueryType("STRING", "REPEATED")


def test_foreign_engine_types_are_not_claimed() -> None:
    assert from_duckdb_type("INTEGER") is None
    assert from_postgres_type("numeric(10,2)") is None
    assert from_bigquery_type("RECORD") is None
    assert from_duckdb_type("JSON") is None


@pytest.mark.parametrize(
    ("existing", "incoming", "ok"),
    [
        (S(Kind.BIGINT), S(Kind.BIGINT), True),
        (S(Kind.DOUBLE), S(Kind.BIGINT), True),  # int into double: widening
        (S(Kind.BIGINT), S(Kind.DOUBLE), False),  # double into int: lossy
        (S(Kind.BIGINT), S(Kind.VARCHAR), False),
        (S(Kind.VARCHAR), S(Kind.BIGINT), False),
        (S(Kind.TIMESTAMPTZ), S(Kind.DATE), False),
        (S(Kind.DOUBLE, True), S(Kind.BIGINT, True), True),
        (S(Kind.VARCHAR, True), S(Kind.VARCHAR), False),
        (S(Kind.DATE), None, True),  # an all-null column fits anything
    ],
)
def test_type_change_rules(existing: SqlType, incoming: SqlType | None, ok: bool) -> None:
    assert is_compatible(existing, incoming) is ok
