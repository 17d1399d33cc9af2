"""DuckDB tables as earlier versions of the writer created them, for the compatibility tests."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from resources.warehouse.base import TableSpec
from resources.warehouse.common import LoadPlan
from resources.warehouse.duckdb import DuckDBWarehouse


class KeyedDuckDBWarehouse(DuckDBWarehouse):
    """Creates partitioned tables with a primary key, as versions before the unindexed writer did."""

    def _ensure(self, con: duckdb.DuckDBPyConnection, spec: TableSpec, rows_schema: pa.Schema) -> LoadPlan:
        plan = super()._ensure(con, spec, rows_schema)
        if plan.create and spec.kind == "partitioned":
            keys = ", ".join(f'"{k}"' for k in spec.key)
            con.execute(f"ALTER TABLE {self.table_ref(spec.name)} ADD PRIMARY KEY ({keys})").fetchall()
            session = self._session()
            if session is not None:
                session.forget(spec.name)
        return plan
