"""Every table of a DuckDB warehouse as rows, to compare a resumed sync's landing with a clean one's."""

from __future__ import annotations

from pathlib import Path

import duckdb

#: Columns a run sets anew whatever it fetched.
RUN_COLUMNS = {"_loaded_at", "_run_id", "first_seen_at", "last_seen_at"}


def rows_of(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows (every column but those a run sets anew), sorted."""
    out: dict[str, list[tuple[object, ...]]] = {}
    with duckdb.connect(str(db), read_only=True) as con:
        tables = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND NOT starts_with(table_name, '_')"
        ).fetchall()
        for schema, table in tables:
            columns = [
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
                    "AND table_name = ? ORDER BY ordinal_position",
                    [schema, table],
                ).fetchall()
                if r[0] not in RUN_COLUMNS
            ]
            select = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in columns)
            rows = con.execute(f'SELECT {select} FROM "{schema}"."{table}"').fetchall()
            out[f"{schema}.{table}"] = sorted(rows, key=repr)
    return out
