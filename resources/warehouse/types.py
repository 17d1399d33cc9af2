"""Arrow types -> the logical column types every engine lands (:class:`Kind`), their names in
DuckDB, Postgres and BigQuery, and the rules for changing a column's type.

Only the Arrow types the transforms produce are landed; any other is an :class:`UnsupportedTypeError`.
A column may only widen (BIGINT into DOUBLE, all-null into any): anything else raises
``SchemaMismatchError``, because an incompatible change needs a deliberate migration, not a silent cast.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pyarrow as pa


class UnsupportedTypeError(TypeError):
    """An Arrow type the warehouse does not land (see the module docstring)."""


class Kind(enum.StrEnum):
    BOOLEAN = "BOOLEAN"
    BIGINT = "BIGINT"
    DOUBLE = "DOUBLE"
    VARCHAR = "VARCHAR"
    DATE = "DATE"
    TIMESTAMPTZ = "TIMESTAMPTZ"


@dataclass(frozen=True)
class SqlType:
    """An engine-independent column type: a scalar kind, or a list of one."""

    kind: Kind
    is_list: bool = False

    def __str__(self) -> str:
        return f"{self.kind.value}[]" if self.is_list else self.kind.value


@dataclass(frozen=True)
class BigQueryType:
    """A BigQuery field type and mode (lists are ``REPEATED`` fields of the item type)."""

    field_type: str
    mode: str  # "NULLABLE" or "REPEATED"


#: The Arrow type of each kind: what the transforms produce and the writers load.
_SCALAR_ARROW: dict[Kind, pa.DataType] = {
    Kind.BOOLEAN: pa.bool_(),
    Kind.BIGINT: pa.int64(),
    Kind.DOUBLE: pa.float64(),
    Kind.VARCHAR: pa.string(),
    Kind.DATE: pa.date32(),
    Kind.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
}

_POSTGRES: dict[Kind, str] = {
    Kind.BOOLEAN: "boolean",
    Kind.BIGINT: "bigint",
    Kind.DOUBLE: "double precision",
    Kind.VARCHAR: "text",
    Kind.DATE: "date",
    Kind.TIMESTAMPTZ: "timestamp with time zone",
}

_BIGQUERY: dict[Kind, str] = {
    Kind.BOOLEAN: "BOOL",
    Kind.BIGINT: "INT64",
    Kind.DOUBLE: "FLOAT64",
    Kind.VARCHAR: "STRING",
    Kind.DATE: "DATE",
    Kind.TIMESTAMPTZ: "TIMESTAMP",
}

# Names the engines' catalogs report for the types above: DuckDB's canonical names (whatever alias
# created the column), Postgres' format_type(), and BigQuery's, legacy spellings included.
_DUCKDB_NAMES: dict[str, Kind] = {k.value: k for k in Kind} | {"TIMESTAMP WITH TIME ZONE": Kind.TIMESTAMPTZ}
_POSTGRES_NAMES: dict[str, Kind] = {v: k for k, v in _POSTGRES.items()}
_BIGQUERY_NAMES: dict[str, Kind] = {
    **{v: k for k, v in _BIGQUERY.items()},
    "BOOLEAN": Kind.BOOLEAN,
    "INTEGER": Kind.BIGINT,
    "FLOAT": Kind.DOUBLE,
}


_KIND_OF_ARROW: dict[pa.DataType, Kind] = {t: k for k, t in _SCALAR_ARROW.items()}


def sql_type(t: pa.DataType) -> SqlType | None:
    """The column type an Arrow type lands as; None for the ``null`` type (fits any column)."""
    if pa.types.is_null(t):
        return None
    if t in _KIND_OF_ARROW:
        return SqlType(_KIND_OF_ARROW[t])
    if pa.types.is_list(t):
        if pa.types.is_null(t.value_type):
            return SqlType(Kind.VARCHAR, is_list=True)
        if t.value_type in _KIND_OF_ARROW:
            return SqlType(_KIND_OF_ARROW[t.value_type], is_list=True)
    raise UnsupportedTypeError(f"Arrow type {t} is not landed (see resources/warehouse/types.py)")


def sql_type_or_default(t: pa.DataType) -> SqlType:
    """Like :func:`sql_type`, but an all-null column becomes VARCHAR (for creating a new column)."""
    return sql_type(t) or SqlType(Kind.VARCHAR)


def arrow_type(st: SqlType) -> pa.DataType:
    """The Arrow type values of ``st`` are loaded as."""
    scalar = _SCALAR_ARROW[st.kind]
    return pa.list_(scalar) if st.is_list else scalar


def is_compatible(existing: SqlType, incoming: SqlType | None) -> bool:
    """Whether values of ``incoming`` can land in a column of ``existing`` without loss."""
    if incoming is None or incoming == existing:
        return True
    if incoming.is_list != existing.is_list:
        return False
    return incoming.kind is Kind.BIGINT and existing.kind is Kind.DOUBLE


# --- engine type names ---------------------------------------------------------------------------


def duckdb_type(st: SqlType) -> str:
    return str(st)


def postgres_type(st: SqlType) -> str:
    name = _POSTGRES[st.kind]
    return f"{name}[]" if st.is_list else name


def bigquery_type(st: SqlType) -> BigQueryType:
    return BigQueryType(_BIGQUERY[st.kind], "REPEATED" if st.is_list else "NULLABLE")


def _parse(name: str, names: dict[str, Kind], *, upper: bool) -> SqlType | None:
    n = " ".join(name.strip().split())
    n = n.upper() if upper else n.lower()
    is_list = n.endswith("[]")
    if is_list:
        n = n[:-2].strip()
    kind = names.get(n)
    return None if kind is None else SqlType(kind, is_list)


def from_duckdb_type(name: str) -> SqlType | None:
    """The logical type of a DuckDB column type name (``duckdb_columns().data_type``); None if foreign."""
    return _parse(name, _DUCKDB_NAMES, upper=True)


def from_postgres_type(name: str) -> SqlType | None:
    """The logical type of a Postgres ``format_type()`` name; None if foreign (e.g. ``integer``)."""
    return _parse(name, _POSTGRES_NAMES, upper=False)


def from_bigquery_type(field_type: str, mode: str = "NULLABLE") -> SqlType | None:
    """The logical type of a BigQuery schema field; None if foreign (e.g. ``NUMERIC``, ``RECORD``)."""
    suffix = "[]" if mode.strip().upper() == "REPEATED" else ""
    return _parse(field_type + suffix, _BIGQUERY_NAMES, upper=True)
