"""The Dagster resource of the warehouse: its configuration, handed to
:mod:`resources.warehouse.factory`, which validates it before any I/O and chooses the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from resources.warehouse.base import Warehouse
from resources.warehouse.contract import WAREHOUSE_SETTING, WarehouseConfigError
from resources.warehouse.factory import warehouse_for, warehouse_from_url
from resources.warehouse.urls import (
    DEFAULT_LANDING_MEMORY_LIMIT,
    DEFAULT_SCHEMA,
    DEFAULT_WAREHOUSE_URL,
    POSTGRES_SCHEMES,
    SCHEMA_SETTING,
    WAREHOUSE_SCHEMES,
    bigquery_target,
    duckdb_path,
    redact_url,
    url_scheme,
    validate_memory_limit,
    validate_schema_name,
)
from resources.warehouse.urls import EXPECTED_URLS as _EXPECTED

__all__ = [
    "DEFAULT_LANDING_MEMORY_LIMIT",
    "DEFAULT_SCHEMA",
    "DEFAULT_WAREHOUSE_URL",
    "SCHEMA_SETTING",
    "WAREHOUSE_KINDS",
    "WarehouseConfigError",
    "WarehouseResource",
    "bigquery_target",
    "duckdb_path",
    "redact_url",
    "validate_memory_limit",
    "validate_schema_name",
    "warehouse_from_url",
    "warehouse_kind",
]


def warehouse_kind(url: str) -> str:
    """The Dagster kind of the warehouse a URL names (``duckdb``, ``postgres`` or ``bigquery``: the
    kinds the UI draws an icon for); a WarehouseConfigError naming the setting for any other URL."""
    scheme = url_scheme(url)
    if scheme in POSTGRES_SCHEMES:
        return "postgres"
    if scheme in WAREHOUSE_SCHEMES:
        return scheme
    raise WarehouseConfigError(
        f"{WAREHOUSE_SETTING}: unsupported warehouse URL {redact_url(url)!r} (expected {_EXPECTED})"
    )


#: Every kind :func:`warehouse_kind` gives.
WAREHOUSE_KINDS = frozenset(warehouse_kind(f"{scheme}:") for scheme in WAREHOUSE_SCHEMES)


class WarehouseResource(ConfigurableResource):
    """Where the sync lands the tables: DuckDB, Postgres or BigQuery (VISIBILITY_WAREHOUSE), and the
    schema (VISIBILITY_SCHEMA). A password in the URL is read from the environment, never stored."""

    # For developers: set ``url`` from ``EnvVar("VISIBILITY_WAREHOUSE")`` when it holds a password.

    url: str = Field(
        default=DEFAULT_WAREHOUSE_URL,
        description=f"{WAREHOUSE_SETTING}: {_EXPECTED}. A secret when it holds a password.",
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
        so a password: never log them)."""
        if self._is_duckdb:
            self._landing_memory_limit()  # a bad value fails here, at the start of a step
        return {
            "url": self.url,
            "schema_name": self.schema_name,
            "lock_timeout_seconds": self.lock_timeout_seconds,
            "duckdb_landing_memory_limit": self.duckdb_landing_memory_limit,
        }

    def get_warehouse(
        self, *, landing: bool = False, on_wait: Callable[[Any], None] | None = None
    ) -> Warehouse:
        """A new warehouse handle; close it (or use it as a context manager) when done.

        ``landing``: the handle lands partitioned tables (in the sync's process, or its landing
        worker), so DuckDB's connections get ``duckdb_landing_memory_limit``. Other handles write
        with DuckDB's default (a snapshot upsert maintains a key index, which needs memory in
        proportion to its rows) and query within the budget (a check groups a whole table's keys;
        DuckDB spills instead).
        ``on_wait`` (DuckDB only; ignored by other engines): called with a
        :class:`~resources.warehouse.duckdb_lock.LockWait` while a connection waits for the file lock,
        and once when the wait ends (the same waits are logged on ``visibility.warehouse``).
        """
        settings = {
            "url": self.url,
            "schema_name": self.schema_name,
            "lock_timeout_seconds": self.lock_timeout_seconds,
            "duckdb_landing_memory_limit": self.duckdb_landing_memory_limit,
        }
        return warehouse_for(settings, landing=landing, on_wait=on_wait)

    @property
    def _is_duckdb(self) -> bool:
        return self.url.strip().lower().startswith("duckdb:")

    def _landing_memory_limit(self) -> str | None:
        return validate_memory_limit(self.duckdb_landing_memory_limit, "duckdb_landing_memory_limit")

    def __repr__(self) -> str:
        return f"WarehouseResource(url={redact_url(self.url)!r}, schema_name={self.schema_name!r})"
