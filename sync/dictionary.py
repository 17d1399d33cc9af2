"""The data dictionary, docs/TABLES.md, rendered from the table and view specs the writers use
around the hand-written text (example queries included) of ``sync/dictionary.md``::

    python -m sync.dictionary > docs/TABLES.md

tests/warehouse/test_dictionary.py fails when the file drifts, and runs every example query.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from resources.warehouse.contract import LOAD_COLUMNS, SNAPSHOT_COLUMNS, Column, TableSpec
from resources.warehouse.types import Kind, SqlType, bigquery_type, duckdb_type, postgres_type, sql_type
from resources.warehouse.views import ANALYST_VIEWS, ViewSpec, current_view_name
from sync.catalog import ALL_TABLES

COMMAND = "python -m sync.dictionary > docs/TABLES.md"


#: The dictionary's hand-written text, around what :func:`render` derives from the specs.
TEMPLATE = Path(__file__).with_name("dictionary.md")


def type_names(st: SqlType) -> tuple[str, str, str]:
    """DuckDB, Postgres and BigQuery spellings of a logical type."""
    bq = bigquery_type(st)
    bigquery = f"ARRAY<{bq.field_type}>" if bq.mode == "REPEATED" else bq.field_type
    return duckdb_type(st), postgres_type(st), bigquery


def _column_type(t: pa.DataType) -> str:
    st = sql_type(t)
    return "`" + (duckdb_type(st) if st is not None else "VARCHAR") + "`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _columns_table(columns: Sequence[Column], key: Sequence[str] = ()) -> str:
    lines = ["| column | type | description |", "|---|---|---|"]
    for c in columns:
        name = f"**`{c.name}`**" if c.name in key else f"`{c.name}`"
        lines.append(f"| {name} | {_column_type(c.type)} | {_cell(c.description)} |")
    return "\n".join(lines)


def _bullets(columns: Sequence[Column]) -> str:
    return "\n".join(f"- `{c.name}` ({_column_type(c.type)}): {c.description}" for c in columns)


def _table(spec: TableSpec) -> str:
    facts = [f"key: {', '.join(f'`{k}`' for k in spec.key)}"]
    if spec.kind == "partitioned":
        facts.insert(0, f"partitioned by `{spec.date_column}` x `{spec.engine_column}`")
    else:
        facts.insert(0, f"snapshot, view `{current_view_name(spec)}`")
    return (
        f"### `{spec.name}`\n\n{spec.description}\n\n{'; '.join(facts)} (key columns in bold).\n\n"
        f"{_columns_table(spec.columns, spec.key)}\n"
    )


def _index(tables: Sequence[TableSpec]) -> str:
    """One line a table (kind and key), linking to its section: the list README.md points to."""
    lines = ["| table | kind | key |", "|---|---|---|"]
    for spec in tables:
        kind = "date x engine" if spec.kind == "partitioned" else "snapshot"
        key = ", ".join(f"`{k}`" for k in spec.key)
        lines.append(f"| [`{spec.name}`](#{spec.name}) | {kind} | {key} |")
    return "\n".join(lines) + "\n"


def _view(view: ViewSpec) -> str:
    sources = ", ".join(f"`{s}`" for s in view.sources)
    return f"### `{view.name}`\n\n{view.description}\n\nReads {sources}.\n\n{_columns_table(view.columns)}\n"


def render(tables: Sequence[TableSpec], views: Sequence[ViewSpec] = ANALYST_VIEWS) -> str:
    """The whole dictionary as Markdown: :data:`TEMPLATE` with the types, tables and views."""
    kinds = [SqlType(k) for k in Kind] + [SqlType(Kind.VARCHAR, is_list=True)]
    types = "\n".join("| " + " | ".join(f"`{n}`" for n in type_names(st)) + " |" for st in kinds)
    return (
        TEMPLATE.read_text()
        .replace("{types}", types)
        .replace("{load}", _bullets(LOAD_COLUMNS))
        .replace("{snapshot}", _bullets(SNAPSHOT_COLUMNS))
        .replace("{tables}", "\n".join(["## Tables\n", _index(tables), *(_table(t) for t in tables)]))
        .replace("{views}", "\n".join(_view(v) for v in views))
    )


def main() -> None:
    sys.stdout.write(render(list(ALL_TABLES.values())))


if __name__ == "__main__":
    main()
