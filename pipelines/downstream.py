"""The landed tables as inputs of users' own assets: IO manager, table names, a DuckDB resource
(docs/DOWNSTREAM.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb
from dagster import AssetsDefinition, AssetSpec, map_asset_specs
from dagster_duckdb import DuckDBResource
from pydantic import Field

from resources.warehouse.io_manager import LandedTablesIOManager
from resources.warehouse.resource import WarehouseResource
from resources.warehouse.sql import quote_identifier
from resources.warehouse.urls import bigquery_target, duckdb_path, url_scheme
from settings import Settings
from sync.catalog import ALL_TABLES

#: The resource key of the IO manager that loads landed tables (the daily and snapshot assets).
LANDED_TABLES_IO_MANAGER = "landed_tables_io_manager"
#: The resource key of the ``DuckDBResource`` on the warehouse file (DuckDB warehouses only).
DUCKDB_RESOURCE = "duckdb"


def duckdb_catalog(settings: Settings) -> str:
    """DuckDB names a file's catalog after its stem (``data/visibility.duckdb`` -> ``visibility``)."""
    return duckdb_path(settings.warehouse_url).name.split(".", 1)[0]


def qualified_table_name(settings: Settings, table: str) -> str:
    """``catalog.schema.table`` (DuckDB, Postgres: the database) or ``project.dataset.table`` (BigQuery)."""
    scheme = url_scheme(settings.warehouse_url)
    if scheme == "duckdb":
        return f"{duckdb_catalog(settings)}.{settings.schema_name}.{table}"
    if scheme == "bigquery":
        project, dataset = bigquery_target(settings.warehouse_url)
        return f"{project}.{dataset}.{table}"
    from resources.warehouse.postgres import postgres_sqlalchemy_url

    return f"{postgres_sqlalchemy_url(settings.warehouse_url).database}.{settings.schema_name}.{table}"


def for_downstream(
    assets: Sequence[AssetsDefinition | AssetSpec], settings: Settings
) -> list[AssetsDefinition | AssetSpec]:
    """The table assets loadable by :data:`LANDED_TABLES_IO_MANAGER`, with fully qualified table names."""

    def qualify(spec: AssetSpec) -> AssetSpec:
        table = spec.key.path[-1]
        if table not in ALL_TABLES:
            return spec
        metadata = {**spec.metadata, "dagster/table_name": qualified_table_name(settings, table)}
        return spec.replace_attributes(metadata=metadata).with_io_manager_key(LANDED_TABLES_IO_MANAGER)

    return list(map_asset_specs(qualify, assets))


class WarehouseDuckDB(DuckDBResource):
    """Your own SQL on the DuckDB warehouse file, from your assets (docs/DOWNSTREAM.md). Keep the
    connections short: the sync waits for them to close before it lands a table.

    A connection starts in the landed tables' schema (once it exists), so queries name tables alone,
    whatever the file and schema are called."""

    schema_name: str = Field(default="visibility", description="The schema the tables land in.")

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with super().get_connection() as con:
            catalog = con.execute("SELECT current_database()").fetchone()[0]
            found = con.execute(
                "SELECT 1 FROM information_schema.schemata WHERE catalog_name = ? AND schema_name = ?",
                [catalog, self.schema_name],
            ).fetchone()
            if found:
                con.execute(f"USE {quote_identifier(catalog)}.{quote_identifier(self.schema_name)}")
            yield con


def downstream_resources(settings: Settings, warehouse: WarehouseResource) -> dict[str, Any]:
    """The IO manager of the landed tables, and on DuckDB a ``DuckDBResource`` on the same file."""
    resources: dict[str, Any] = {LANDED_TABLES_IO_MANAGER: LandedTablesIOManager(warehouse=warehouse)}
    if url_scheme(settings.warehouse_url) == "duckdb":
        resources[DUCKDB_RESOURCE] = WarehouseDuckDB(
            database=str(duckdb_path(settings.warehouse_url)), schema_name=settings.schema_name
        )
    return resources
