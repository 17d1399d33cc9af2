"""The SQL DuckDB and Postgres share: standard quoting, a landed table's DDL and its writes.

BigQuery creates tables through its API: it takes only added-column defaults and write parameters here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from resources.warehouse.contract import (
    FIRST_SEEN_AT,
    IS_CURRENT,
    LAST_SEEN_AT,
    LOADED_AT,
    RUN_ID,
    PartitionScope,
    SnapshotScope,
    TableSpec,
    system_columns,
)
from resources.warehouse.schema_evolution import LoadPlan
from resources.warehouse.types import SqlType, sql_type_or_default
from resources.warehouse.views import ViewWork

if TYPE_CHECKING:
    from resources.warehouse.base import WriteStamp


def quote_identifier(name: str) -> str:
    """A double-quoted identifier; any name (quotes, unicode, keywords) becomes exactly that name."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid SQL identifier {name!r}")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """A standard SQL string literal, for DDL that takes no parameters (COMMENT ON)."""
    if "\x00" in text:
        raise ValueError("a SQL literal cannot contain NUL")
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class SqlDialect:
    """What an engine's DDL spells its own way."""

    #: the engine's name of a logical type (``duckdb_type``, ``postgres_type``)
    type_name: Callable[[SqlType], str]
    #: a string as a SQL literal (comments, defaults)
    literal: Callable[[str], str] = quote_literal
    #: partitioned tables carry a primary key too (snapshot tables always do: their upserts need it)
    key_index_on_partitioned: bool = True


def added_column_default(
    spec: TableSpec, column: str, literal: Callable[[str], str] = quote_literal
) -> str | None:
    """The value rows landed before ``column`` existed take when a writer adds it (a key column
    added to a table: the rows must hold one), as a SQL literal; None leaves them NULL."""
    for c in spec.columns:
        if c.name == column and c.default is not None:
            return literal(c.default)
    return None


def table_statements(dialect: SqlDialect, spec: TableSpec, plan: LoadPlan, ref: str) -> list[str]:
    """Everything ``plan`` does to the table ``ref``: ``CREATE TABLE`` (key columns NOT NULL, then
    the writer's columns) or one ``ALTER TABLE ... ADD COLUMN`` per added column (a default fills
    the existing rows), then its comments."""
    quoted = quote_identifier
    statements = []
    if plan.create:
        defs = [
            f"{quoted(c.name)} {dialect.type_name(c.type)}" + (" NOT NULL" if c.name in spec.key else "")
            for c in plan.columns
        ]
        defs += [
            f"{quoted(c.name)} {dialect.type_name(sql_type_or_default(c.type))}" for c in system_columns(spec)
        ]
        if spec.kind == "snapshot" or dialect.key_index_on_partitioned:
            defs.append(f"PRIMARY KEY ({', '.join(quoted(k) for k in spec.key)})")
        statements.append(f"CREATE TABLE {ref} ({', '.join(defs)})")
    else:
        for c in plan.columns:
            default = added_column_default(spec, c.name, dialect.literal)
            fill = f" DEFAULT {default}" if default else ""
            statements.append(
                f"ALTER TABLE {ref} ADD COLUMN {quoted(c.name)} {dialect.type_name(c.type)}{fill}"
            )
    return statements + comment_statements(dialect, ref, plan.comments)


def comment_statements(
    dialect: SqlDialect, ref: str, comments: Iterable[tuple[str | None, str]], *, relation: str = "TABLE"
) -> list[str]:
    """``COMMENT ON`` the relation (``column`` None) or one of its columns, per ``(column, text)``."""
    statements = []
    for column, text in comments:
        target = f"{relation} {ref}" if column is None else f"COLUMN {ref}.{quote_identifier(column)}"
        statements.append(f"COMMENT ON {target} IS {dialect.literal(text)}")
    return statements


def view_statements(
    dialect: SqlDialect,
    ref: str,
    body: str,
    work: ViewWork,
    description: str,
    columns: Iterable[tuple[str, str]],
) -> list[str]:
    """What ``work`` does to the view ``ref``: drop and create it (CREATE OR REPLACE cannot drop or
    reorder an older view's columns), then comment it and its columns."""
    if work is None:
        return []
    statements = [f"DROP VIEW IF EXISTS {ref}", f"CREATE VIEW {ref} AS {body}"] if work == "create" else []
    comments = [(None, description), *columns]
    return statements + comment_statements(dialect, ref, comments, relation="VIEW")


# The write statements DuckDB and Postgres share, in ``:name`` parameters (``Warehouse._bind``):
# :func:`scope_parameters` and :func:`stamp_parameters` (a driver refuses a parameter it is not asked).


def scope_parameters(scope: PartitionScope) -> dict[str, Any]:
    return {
        "brands": list(scope.brand_ids),
        "start": scope.start,
        "end": scope.end,
        "engines": list(scope.engines),
    }


def stamp_parameters(stamp: WriteStamp, retire: SnapshotScope | None = None) -> dict[str, Any]:
    """``:ts`` and ``:run_id``, and a retirement's column ``:values``."""
    params: dict[str, Any] = {"ts": stamp.loaded_at, "run_id": stamp.run_id}
    if retire is not None and retire.column is not None:
        params["values"] = list(retire.values)
    return params


def delete_scope_statement(ref: str, spec: TableSpec) -> str:
    assert spec.date_column is not None
    brand, day, engine = (
        quote_identifier(c) for c in (spec.brand_column, spec.date_column, spec.engine_column)
    )
    return (
        f"DELETE FROM {ref} WHERE {brand} = ANY(:brands) AND {day} >= :start AND {day} < :end "
        f"AND {engine} = ANY(:engines)"
    )


def insert_statement(ref: str, plan: LoadPlan, source: str) -> str:
    cols = ", ".join(quote_identifier(c) for c in plan.load_columns)
    stamp = f"{quote_identifier(LOADED_AT)}, {quote_identifier(RUN_ID)}"
    return f"INSERT INTO {ref} ({cols}, {stamp}) SELECT {cols}, :ts, :run_id FROM {source}"


def upsert_statement(ref: str, spec: TableSpec, plan: LoadPlan, source: str) -> str:
    """Insert the rows of ``source`` into ``ref``; a row whose key exists is updated instead: every
    column takes this write's value (or NULL), the row is current again and seen now, and
    ``first_seen_at`` is kept."""
    quoted = quote_identifier
    cols = ", ".join(quoted(c) for c in plan.load_columns)
    updates = [f"{quoted(c)} = EXCLUDED.{quoted(c)}" for c in plan.load_columns if c not in spec.key]
    updates += [f"{quoted(c)} = NULL" for c in plan.null_columns]
    updates += [
        f"{quoted(LOADED_AT)} = EXCLUDED.{quoted(LOADED_AT)}",
        f"{quoted(RUN_ID)} = EXCLUDED.{quoted(RUN_ID)}",
        f"{quoted(IS_CURRENT)} = true",
        f"{quoted(LAST_SEEN_AT)} = EXCLUDED.{quoted(LAST_SEEN_AT)}",
    ]
    system = ", ".join(quoted(c) for c in (LOADED_AT, RUN_ID, IS_CURRENT, FIRST_SEEN_AT, LAST_SEEN_AT))
    return (
        f"INSERT INTO {ref} ({cols}, {system}) SELECT {cols}, :ts, :run_id, true, :ts, :ts FROM {source} "
        f"ON CONFLICT ({', '.join(quoted(k) for k in spec.key)}) DO UPDATE SET {', '.join(updates)}"
    )


def retire_statement(ref: str, retire: SnapshotScope) -> str:
    """Mark retired the current rows of ``retire`` that the write stamped ``:ts``/``:run_id`` did
    not send (an upsert stamps every row it sends); ``:values`` are a column scope's values."""
    current, loaded, run = (quote_identifier(c) for c in (IS_CURRENT, LOADED_AT, RUN_ID))
    where = f"{current} AND ({loaded} IS DISTINCT FROM :ts OR {run} IS DISTINCT FROM :run_id)"
    if retire.column is not None:
        where += f" AND {quote_identifier(retire.column)} = ANY(:values)"
    return f"UPDATE {ref} SET {current} = false, {loaded} = :ts, {run} = :run_id WHERE {where}"
