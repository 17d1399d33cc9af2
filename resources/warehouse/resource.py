"""The Dagster resource of the warehouse: its configuration, validated and turned into an engine by
:func:`~resources.warehouse.urls.warehouse_for` (Dagster-free)."""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from resources.warehouse.base import Warehouse
from resources.warehouse.contract import WAREHOUSE_SETTING
from resources.warehouse.urls import (
    DEFAULT_LANDING_MEMORY_LIMIT,
    DEFAULT_SCHEMA,
    DEFAULT_WAREHOUSE_URL,
    EXPECTED_URLS,
    SCHEMA_SETTING,
    redact_url,
    url_scheme,
    validate_memory_limit,
    warehouse_for,
)


class WarehouseResource(ConfigurableResource):
    """Where the sync lands the tables: DuckDB, Postgres or BigQuery (VISIBILITY_WAREHOUSE), and the
    schema (VISIBILITY_SCHEMA). A password in the URL is read from the environment, never stored."""

    # For developers: set ``url`` from ``EnvVar("VISIBILITY_WAREHOUSE")`` when it holds a password.

    url: str = Field(
        default=DEFAULT_WAREHOUSE_URL,
        description=f"{WAREHOUSE_SETTING}: {EXPECTED_URLS}. A secret when it holds a password.",
        repr=False,
    )
    schema_name: str = Field(
        default=DEFAULT_SCHEMA,
        description=f"{SCHEMA_SETTING}: schema the tables land in (DuckDB, Postgres); "
        "BigQuery uses the URL's dataset.",
    )
    lock_timeout_seconds: float = Field(
        default=600.0,
        description="DuckDB only: how long a writer waits for another process's write lock.",
    )
    duckdb_landing_memory_limit: str = Field(
        default=DEFAULT_LANDING_MEMORY_LIMIT,
        description="DuckDB only: memory budget of the connections that land partitioned tables "
        "(DuckDB's memory_limit, e.g. 64MB or 1GiB; at least 32MB), and of the checks' queries. It "
        "keeps the landing process's memory flat however large the tables grow; a table's landing "
        "(or a query) that does not fit is rolled back whole and retried once without it. Empty: "
        "DuckDB's default (80% of RAM).",
    )

    def settings(self) -> dict[str, Any]:
        """The resolved settings, to rebuild this resource in another process (they hold the URL,
        so a password: never log them). A bad memory limit fails here, at the start of a step."""
        if url_scheme(self.url.strip()) == "duckdb":
            validate_memory_limit(self.duckdb_landing_memory_limit, "duckdb_landing_memory_limit")
        return {
            "url": self.url,
            "schema_name": self.schema_name,
            "lock_timeout_seconds": self.lock_timeout_seconds,
            "duckdb_landing_memory_limit": self.duckdb_landing_memory_limit,
        }

    def get_warehouse(self, *, landing: bool = False) -> Warehouse:
        """A new warehouse handle; close it (or use it as a context manager) when done. ``landing``:
        :func:`~resources.warehouse.urls.warehouse_for`."""
        return warehouse_for(self.settings(), landing=landing)

    def __repr__(self) -> str:
        return f"WarehouseResource(url={redact_url(self.url)!r}, schema_name={self.schema_name!r})"
