"""Choosing the engine from configuration, without Dagster (the sync core lands through this).

The URL is validated before any I/O (the rules and defaults are :mod:`resources.warehouse.urls`'s,
shared with ``settings.py``), and every error names the setting to fix
(``VISIBILITY_WAREHOUSE``, ``VISIBILITY_SCHEMA``). A Postgres password never appears in a repr, an
error or a log line. Each engine's module is imported only when a URL names it: a DuckDB user
never loads SQLAlchemy or psycopg, and BigQuery's client library stays optional at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from resources.warehouse.base import Warehouse
from resources.warehouse.contract import WAREHOUSE_SETTING, WarehouseConfigError
from resources.warehouse.urls import (
    DEFAULT_LANDING_MEMORY_LIMIT,
    DEFAULT_LOCK_TIMEOUT_SECONDS,
    DEFAULT_SCHEMA,
    POSTGRES_SCHEMES,
    bigquery_target,
    duckdb_path,
    redact_url,
    url_scheme,
    validate_memory_limit,
    validate_schema_name,
)
from resources.warehouse.urls import EXPECTED_URLS as _EXPECTED


def warehouse_from_url(url: str, schema: str = DEFAULT_SCHEMA, **options: Any) -> Warehouse:
    """The warehouse a URL names. Validates everything first; opens no connection.

    ``options`` go to the engine's constructor (e.g. ``lock_timeout_seconds`` for DuckDB).
    """
    if not isinstance(url, str) or not url.strip():
        raise WarehouseConfigError(f"{WAREHOUSE_SETTING} is empty (expected {_EXPECTED})")
    url = url.strip()
    scheme = url_scheme(url)
    if scheme == "duckdb":
        from resources.warehouse.duckdb import DuckDBWarehouse

        return DuckDBWarehouse(duckdb_path(url), validate_schema_name(schema), **options)
    if scheme in POSTGRES_SCHEMES:
        from resources.warehouse.postgres import PostgresWarehouse

        validate_schema_name(schema)
        problem: str | None = None
        try:
            return PostgresWarehouse(url, schema, **options)
        except ValueError as exc:  # messages there are built from the redacted URL only
            problem = str(exc)
        raise WarehouseConfigError(f"{WAREHOUSE_SETTING}: {problem}")
    if scheme == "bigquery":
        project, dataset = bigquery_target(url)
        from resources.warehouse.bigquery import BigQueryWarehouse  # lazy: optional client library

        return BigQueryWarehouse(project=project, dataset=dataset, **options)
    raise WarehouseConfigError(
        f"{WAREHOUSE_SETTING}: unsupported warehouse URL {redact_url(url)!r} (expected {_EXPECTED})"
    )


def warehouse_for(
    settings: Mapping[str, Any], *, landing: bool = False, on_wait: Callable[[Any], None] | None = None
) -> Warehouse:
    """The handle ``WarehouseResource(**settings).get_warehouse(...)`` opens (its ``settings()``).

    ``landing``: DuckDB's connections get ``duckdb_landing_memory_limit`` (the landing's);
    other handles' queries run within it too (``query_memory_limit``), their writes without it.
    """
    url = settings["url"]
    options: dict[str, Any] = {}
    if isinstance(url, str) and url.strip().lower().startswith("duckdb:"):
        options["lock_timeout_seconds"] = settings.get("lock_timeout_seconds", DEFAULT_LOCK_TIMEOUT_SECONDS)
        options["on_wait"] = on_wait
        limit = settings.get("duckdb_landing_memory_limit", DEFAULT_LANDING_MEMORY_LIMIT)
        budget = validate_memory_limit(limit, "duckdb_landing_memory_limit")
        if landing:
            options["memory_limit"] = budget
        else:  # the checks' queries: a whole table's keys grouped, in the run's process
            options["query_memory_limit"] = budget
    return warehouse_from_url(url, settings.get("schema_name", DEFAULT_SCHEMA), **options)
