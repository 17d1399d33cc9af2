"""Choosing the engine from configuration: :func:`warehouse_from_url` and the Dagster resource.

The URL is validated before any I/O, and every error names the setting to fix
(``VISIBILITY_WAREHOUSE``, ``VISIBILITY_SCHEMA``). A Postgres password never appears in a repr, an
error or a log line. BigQuery is imported only when a ``bigquery://`` URL is used, so its client
library stays optional at import time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dagster import ConfigurableResource
from pydantic import Field

from resources.warehouse.base import WAREHOUSE_SETTING, Warehouse, WarehouseConfigError

SCHEMA_SETTING = "VISIBILITY_SCHEMA"
DEFAULT_WAREHOUSE_URL = "duckdb:///data/visibility.duckdb"
DEFAULT_SCHEMA = "visibility"
#: measured in bench/: landing memory flat in the days of a backfill, chunk writes 15-25% slower
DEFAULT_LANDING_MEMORY_LIMIT = "64MB"
_EXPECTED = "duckdb:///path/file.duckdb, postgresql://user:pass@host:port/db or bigquery://project/dataset"
_SCHEMA_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (safe for messages and reprs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return parts._replace(netloc=f"{user}:***@{netloc}").geturl()


def validate_schema_name(schema: str) -> str:
    if not _SCHEMA_RE.match(schema or ""):
        raise WarehouseConfigError(
            f"{SCHEMA_SETTING}: {schema!r} is not a valid schema name "
            "(letters, digits and underscores, not starting with a digit, at most 63 characters)"
        )
    return schema


def duckdb_path(url: str) -> Path:
    """``duckdb:///relative/file.duckdb`` or ``duckdb:////absolute/file.duckdb`` -> the file path."""
    rest = url[len("duckdb://") :]
    if not rest.startswith("/") or rest in ("/", "/:memory:"):
        raise WarehouseConfigError(
            f"{WAREHOUSE_SETTING}: {url!r} names no DuckDB file (expected duckdb:///path/file.duckdb)"
        )
    path = rest[1:]  # three slashes: relative; four: absolute (SQLAlchemy's convention)
    if "?" in path or "#" in path:
        raise WarehouseConfigError(f"{WAREHOUSE_SETTING}: DuckDB URLs take no query or fragment: {url!r}")
    return Path(path)


def bigquery_target(url: str) -> tuple[str, str]:
    """``bigquery://project/dataset`` -> (project, dataset)."""
    parts = urlsplit(url)
    dataset = parts.path.strip("/")
    if not parts.netloc or not dataset or "/" in dataset or parts.query:
        raise WarehouseConfigError(f"{WAREHOUSE_SETTING}: {url!r} must be bigquery://project/dataset")
    return parts.netloc, dataset


def validate_memory_limit(value: str, setting: str) -> str | None:
    """A DuckDB memory size (``64MB``, ``1GiB``), stripped; None when empty; errors name ``setting``."""
    from resources.warehouse.duckdb import parse_memory_limit

    value = value.strip()
    if not value:
        return None
    try:
        parse_memory_limit(value)
    except ValueError as exc:
        raise WarehouseConfigError(f"{setting}: {exc}") from None
    return value


def warehouse_from_url(url: str, schema: str = DEFAULT_SCHEMA, **options: Any) -> Warehouse:
    """The warehouse a URL names. Validates everything first; opens no connection.

    ``options`` go to the engine's constructor (e.g. ``lock_timeout_seconds`` for DuckDB).
    """
    if not isinstance(url, str) or not url.strip():
        raise WarehouseConfigError(f"{WAREHOUSE_SETTING} is empty (expected {_EXPECTED})")
    url = url.strip()
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "duckdb":
        from resources.warehouse.duckdb import DuckDBWarehouse

        return DuckDBWarehouse(duckdb_path(url), validate_schema_name(schema), **options)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
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


class WarehouseResource(ConfigurableResource):
    """The warehouse for Dagster assets: set ``url`` from ``EnvVar("VISIBILITY_WAREHOUSE")``."""

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
        "(DuckDB's memory_limit, e.g. 64MB or 1GiB; at least 32MB). It keeps the landing process's "
        "memory flat however large the tables grow; a table's landing that does not fit is rolled "
        "back whole and retried once without it. Empty: DuckDB's default (80% of RAM).",
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

        ``landing``: the handle lands partitioned tables in the landing worker, so DuckDB's
        connections get ``duckdb_landing_memory_limit``. Other handles keep DuckDB's default: a
        snapshot upsert maintains a key index, which needs memory in proportion to its rows.
        ``on_wait`` (DuckDB only; ignored by other engines): called with a
        :class:`~resources.warehouse.duckdb.LockWait` while a connection waits for the file lock,
        and once when the wait ends (the same waits are logged on ``visibility.warehouse``).
        """
        options: dict[str, Any] = {}
        if self._is_duckdb:
            options["lock_timeout_seconds"] = self.lock_timeout_seconds
            options["on_wait"] = on_wait
            if landing:
                options["memory_limit"] = self._landing_memory_limit()
        return warehouse_from_url(self.url, self.schema_name, **options)

    @property
    def _is_duckdb(self) -> bool:
        return self.url.strip().lower().startswith("duckdb:")

    def _landing_memory_limit(self) -> str | None:
        return validate_memory_limit(self.duckdb_landing_memory_limit, "duckdb_landing_memory_limit")

    def __repr__(self) -> str:
        return f"WarehouseResource(url={redact_url(self.url)!r}, schema_name={self.schema_name!r})"
