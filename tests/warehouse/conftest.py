"""Warehouse fixtures: the same tests run against a real DuckDB file and a real Postgres server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from resources.warehouse.base import Warehouse
from resources.warehouse.contract import LOADED_AT, RUN_ID
from resources.warehouse.duckdb import DuckDBWarehouse
from resources.warehouse.postgres import PostgresWarehouse
from tests.warehouse.helpers import COMPETITORS, D1, D2, D3, MENTIONS, mention_rows, scope

__all__ = ["COMPETITORS", "D1", "D2", "D3", "MENTIONS", "Case", "mention_rows", "scope"]


@dataclass
class Case:
    """A warehouse under test plus catalog helpers that differ by engine."""

    engine: str
    warehouse: Any  # DuckDBWarehouse | PostgresWarehouse (tests use the fault hook)
    schema: str
    #: partitioned tables carry a primary key (Postgres; DuckDB's do without, resources/warehouse/duckdb.py)
    keyed_partitions: bool = True

    def rows(self, table: str, *, drop_meta: bool = True) -> list[dict[str, Any]]:
        out = self.warehouse.query(f"SELECT * FROM {self.warehouse.table_ref(table)}").to_pylist()
        if drop_meta:
            out = [{k: v for k, v in r.items() if k not in (LOADED_AT, RUN_ID)} for r in out]
        return sorted(out, key=lambda r: tuple(str(r[k]) for k in sorted(r)))

    def _esc(self, text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    def column_types(self, table: str) -> dict[str, str]:
        if self.engine == "duckdb":
            sql = (
                "SELECT column_name AS name, data_type AS type FROM duckdb_columns() "
                f"WHERE schema_name = {self._esc(self.schema)} AND table_name = {self._esc(table)}"
            )
        else:
            sql = (
                "SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a "
                "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                f"WHERE n.nspname = {self._esc(self.schema)} AND c.relname = {self._esc(table)} "
                "AND a.attnum > 0 AND NOT a.attisdropped"
            )
        return {r["name"]: r["type"] for r in self.warehouse.query(sql).to_pylist()}

    def comments(self, table: str) -> dict[str | None, str | None]:
        """Column comments, and the table's under the key None."""
        if self.engine == "duckdb":
            cols = self.warehouse.query(
                "SELECT column_name AS name, comment FROM duckdb_columns() "
                f"WHERE schema_name = {self._esc(self.schema)} AND table_name = {self._esc(table)}"
            ).to_pylist()
            tab = self.warehouse.query(
                f"SELECT comment FROM duckdb_tables() WHERE schema_name = {self._esc(self.schema)} "
                f"AND table_name = {self._esc(table)} UNION ALL SELECT comment FROM duckdb_views() "
                f"WHERE schema_name = {self._esc(self.schema)} AND view_name = {self._esc(table)}"
            ).to_pylist()
        else:
            cols = self.warehouse.query(
                "SELECT a.attname AS name, col_description(a.attrelid, a.attnum) AS comment "
                "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                f"WHERE n.nspname = {self._esc(self.schema)} AND c.relname = {self._esc(table)} "
                "AND a.attnum > 0 AND NOT a.attisdropped"
            ).to_pylist()
            tab = self.warehouse.query(
                "SELECT obj_description(c.oid, 'pg_class') AS comment FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                f"WHERE n.nspname = {self._esc(self.schema)} AND c.relname = {self._esc(table)}"
            ).to_pylist()
        out: dict[str | None, str | None] = {r["name"]: r["comment"] for r in cols}
        out[None] = tab[0]["comment"] if tab else None
        return out

    def primary_key(self, table: str) -> list[str]:
        if self.engine == "duckdb":
            rows = self.warehouse.query(
                "SELECT constraint_column_names AS cols FROM duckdb_constraints() "
                f"WHERE schema_name = {self._esc(self.schema)} AND table_name = {self._esc(table)} "
                "AND constraint_type = 'PRIMARY KEY'"
            ).to_pylist()
            return list(rows[0]["cols"]) if rows else []
        rows = self.warehouse.query(
            "SELECT a.attname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) "
            f"WHERE i.indisprimary AND n.nspname = {self._esc(self.schema)} "
            f"AND c.relname = {self._esc(table)} "
            "ORDER BY array_position(i.indkey::int2[], a.attnum)"
        ).to_pylist()
        return [r["name"] for r in rows]


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    """The same warehouse contract on DuckDB (a fresh file) and on Postgres (a fresh schema)."""
    if request.param == "duckdb":
        wh: Warehouse = DuckDBWarehouse(tmp_path / "wh.duckdb", "vis", lock_timeout_seconds=30)
        with wh:
            yield Case("duckdb", wh, "vis", keyed_partitions=False)
        return
    schema = request.getfixturevalue("pg_schema")
    with PostgresWarehouse(request.getfixturevalue("postgres_url"), schema) as wh:
        yield Case(request.param, wh, schema)
