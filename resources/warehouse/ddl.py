"""The DDL that creates and evolves a landed table, written once over a small SQL dialect.

DuckDB and Postgres run the same statements (``CREATE TABLE``, ``ALTER TABLE ... ADD COLUMN``,
``COMMENT ON``) from a :class:`~resources.warehouse.schema_evolution.LoadPlan`; what differs between
them is a :class:`SqlDialect`: type names, quoting, and whether partitioned tables carry the key
index. BigQuery creates tables and writes descriptions through its API, not DDL, so it takes only
:func:`added_column_default` from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from resources.warehouse.contract import TableSpec, system_columns
from resources.warehouse.quoting import quote_identifier, quote_literal
from resources.warehouse.schema_evolution import LoadPlan
from resources.warehouse.types import SqlType, sql_type_or_default


@dataclass(frozen=True)
class SqlDialect:
    """What an engine's DDL spells its own way."""

    #: the engine's name of a logical type (``duckdb_type``, ``postgres_type``)
    type_name: Callable[[SqlType], str]
    #: a string as a SQL literal (comments, defaults)
    literal: Callable[[str], str] = quote_literal
    identifier: Callable[[str], str] = quote_identifier
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


def shape_statements(dialect: SqlDialect, spec: TableSpec, plan: LoadPlan, ref: str) -> list[str]:
    """``CREATE TABLE`` for a new table (key columns NOT NULL, then the writer's columns), or one
    ``ALTER TABLE ... ADD COLUMN`` per added column; an added column with a default fills the
    existing rows with it. ``ref`` is the table's quoted, qualified name."""
    quoted = dialect.identifier
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
        return [f"CREATE TABLE {ref} ({', '.join(defs)})"]
    statements = []
    for c in plan.columns:
        default = added_column_default(spec, c.name, dialect.literal)
        fill = f" DEFAULT {default}" if default else ""
        statements.append(f"ALTER TABLE {ref} ADD COLUMN {quoted(c.name)} {dialect.type_name(c.type)}{fill}")
    return statements


def table_statements(dialect: SqlDialect, spec: TableSpec, plan: LoadPlan, ref: str) -> list[str]:
    """Everything ``plan`` does to the table ``ref``: its shape (:func:`shape_statements`), then its
    comments."""
    return shape_statements(dialect, spec, plan, ref) + comment_statements(dialect, ref, plan.comments)


def comment_statements(
    dialect: SqlDialect, ref: str, comments: Iterable[tuple[str | None, str]], *, relation: str = "TABLE"
) -> list[str]:
    """``COMMENT ON`` the relation (``column`` None) or one of its columns, per ``(column, text)``;
    ``relation`` is ``TABLE`` or ``VIEW``."""
    statements = []
    for column, text in comments:
        target = f"{relation} {ref}" if column is None else f"COLUMN {ref}.{dialect.identifier(column)}"
        statements.append(f"COMMENT ON {target} IS {dialect.literal(text)}")
    return statements
