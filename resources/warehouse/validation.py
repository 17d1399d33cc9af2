"""Refuse a table spec or rows the writers cannot honour, before any I/O."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from resources.warehouse.contract import LOAD_COLUMNS, SNAPSHOT_COLUMNS, TableSpec, system_columns
from resources.warehouse.types import sql_type


def _check_names(names: Sequence[str], what: str) -> None:
    seen: dict[str, str] = {}
    for n in names:
        if not isinstance(n, str) or not n or "\x00" in n:
            raise ValueError(f"{what}: invalid column name {n!r}")
        folded = n.casefold()
        if folded in seen:
            # DuckDB and BigQuery fold case even for quoted names
            raise ValueError(f"{what}: columns {seen[folded]!r} and {n!r} differ only by case")
        seen[folded] = n


def validate_spec(spec: TableSpec) -> None:
    """Refuse a spec the writers cannot honour; raised before any I/O."""
    if not spec.name or "\x00" in spec.name:
        raise ValueError(f"invalid table name {spec.name!r}")
    names = [c.name for c in spec.columns]
    _check_names(names, f"table {spec.name}")
    reserved = {c.name.casefold() for c in LOAD_COLUMNS + SNAPSHOT_COLUMNS}
    clash = [n for n in names if n.casefold() in reserved]
    if clash:
        raise ValueError(f"table {spec.name}: columns {clash} are reserved for the writer")
    if not spec.key:
        raise ValueError(f"table {spec.name}: a key is required")
    for k in spec.key:
        if k not in names:
            raise ValueError(f"table {spec.name}: key column {k!r} is not a column")
    if spec.kind == "partitioned":
        for label, col in (
            ("date_column", spec.date_column),
            ("brand_column", spec.brand_column),
            ("engine_column", spec.engine_column),
        ):
            if col is None or col not in names:
                raise ValueError(f"table {spec.name}: {label} {col!r} is not a column")
        date_type = spec.column(spec.date_column).type  # type: ignore[arg-type]
        if not pa.types.is_date(date_type):
            raise ValueError(
                f"table {spec.name}: date_column {spec.date_column!r} must be a date, not {date_type}"
            )
    elif spec.kind != "snapshot":
        raise ValueError(f"table {spec.name}: unknown kind {spec.kind!r}")


def validate_rows(spec: TableSpec, rows: pa.Table) -> None:
    """Rows must carry the key (non-null) and no writer-owned columns; raised before any I/O."""
    names = rows.column_names
    _check_names(names, f"rows for {spec.name}")
    reserved = {c.name.casefold() for c in system_columns(spec)}
    clash = [n for n in names if n.casefold() in reserved]
    if clash:
        raise ValueError(
            f"rows for {spec.name}: columns {clash} are written by the warehouse, not the caller"
        )
    for k in spec.key:
        if k not in names:
            raise ValueError(f"rows for {spec.name}: key column {k!r} is missing")
        if rows[k].null_count:
            raise ValueError(f"rows for {spec.name}: key column {k!r} has {rows[k].null_count} null(s)")
    for f in rows.schema:
        sql_type(f.type)  # raises UnsupportedTypeError early
