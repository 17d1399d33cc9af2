"""The warehouse's configuration, without Dagster: URL shapes, schema names, memory budgets and the
engine a URL names. Everything is validated before any I/O, and an engine's module is imported only
when a URL names it (a DuckDB user never loads SQLAlchemy).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from resources.warehouse.contract import WAREHOUSE_SETTING, WarehouseConfigError

if TYPE_CHECKING:
    from resources.warehouse.base import Warehouse

SCHEMA_SETTING = "VISIBILITY_SCHEMA"
DEFAULT_WAREHOUSE_URL = "duckdb:///data/visibility.duckdb"
DEFAULT_SCHEMA = "visibility"
#: keeps the landing's memory flat in the days of a backfill, for somewhat slower chunk writes
#: (docs/OPERATIONS.md, *DuckDB's memory budget for landing*; bench/RESULTS.md, *Landing memory*)
DEFAULT_LANDING_MEMORY_LIMIT = "64MB"
#: DuckDB only: how long a writer waits for another process's write lock, unless set.
DEFAULT_LOCK_TIMEOUT_SECONDS = 600.0
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
#: Every scheme a warehouse URL may start with (lower case).
WAREHOUSE_SCHEMES = ("duckdb", *POSTGRES_SCHEMES, "bigquery")
EXPECTED_URLS = (
    "duckdb:///path/file.duckdb, postgresql://user:pass@host:port/db or bigquery://project/dataset"
)
#: the smallest ``memory_limit`` accepted: below it DuckDB fails ordinary chunk writes
MIN_MEMORY_LIMIT_BYTES = 32 * 1000**2
_MEMORY_UNITS = {"kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}
_MEMORY_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}
_MEMORY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]i?b)\s*$", re.IGNORECASE)
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


def url_scheme(url: str) -> str:
    """The scheme of a warehouse URL in lower case ('' when there is none)."""
    return url.split(":", 1)[0].strip().lower() if ":" in url else ""


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


def validate_warehouse_url(url: str) -> str:
    """The URL stripped, if its scheme is known and a DuckDB or BigQuery URL is well formed (Postgres
    URLs are checked by their engine, when the warehouse is built).
    """
    url = url.strip()
    scheme = url_scheme(url)
    if scheme not in WAREHOUSE_SCHEMES:
        raise WarehouseConfigError(
            f"{WAREHOUSE_SETTING} must start with duckdb:///, postgresql:// or bigquery://, "
            f"got scheme {scheme!r}"
        )
    if scheme == "duckdb":
        duckdb_path(url)
    elif scheme == "bigquery":
        bigquery_target(url)
    return url


def validate_memory_limit(value: str, setting: str) -> str | None:
    """A DuckDB memory size (``64MB``, ``1GiB``), stripped; None when empty; errors name ``setting``."""
    value = value.strip()
    if not value:
        return None
    try:
        parse_memory_limit(value)
    except ValueError as exc:
        raise WarehouseConfigError(f"{setting}: {exc}") from None
    return value


def parse_memory_limit(value: str) -> int:
    """Bytes of a DuckDB memory size (``64MB``, ``1GiB``); ``ValueError`` if unreadable or too small."""
    match = _MEMORY_RE.match(value)
    if match is None:
        raise ValueError(
            f"{value!r} is not a memory size such as 64MB or 1GiB (units: KB, MB, GB, TB, KiB ... TiB)"
        )
    size = int(float(match[1]) * _MEMORY_UNITS[match[2].lower()])
    if size < MIN_MEMORY_LIMIT_BYTES:
        raise ValueError(f"{value!r} is below the smallest DuckDB budget a write needs (32MB)")
    return size


def warehouse_kind(url: str) -> str:
    """The Dagster kind of the warehouse a URL names (``duckdb``, ``postgres`` or ``bigquery``: the
    kinds the UI draws an icon for); a WarehouseConfigError naming the setting for any other URL."""
    scheme = url_scheme(url)
    if scheme in POSTGRES_SCHEMES:
        return "postgres"
    if scheme in WAREHOUSE_SCHEMES:
        return scheme
    raise WarehouseConfigError(
        f"{WAREHOUSE_SETTING}: unsupported warehouse URL {redact_url(url)!r} (expected {EXPECTED_URLS})"
    )


#: Every kind :func:`warehouse_kind` gives.
WAREHOUSE_KINDS = frozenset(warehouse_kind(f"{scheme}:") for scheme in WAREHOUSE_SCHEMES)


def warehouse_from_url(url: str, schema: str = DEFAULT_SCHEMA, **options: Any) -> Warehouse:
    """The warehouse a URL names, validated; opens no connection. ``options`` go to its constructor."""
    if not isinstance(url, str) or not url.strip():
        raise WarehouseConfigError(f"{WAREHOUSE_SETTING} is empty (expected {EXPECTED_URLS})")
    url = url.strip()
    kind = warehouse_kind(url)
    if kind == "duckdb":
        from resources.warehouse.duckdb import DuckDBWarehouse

        return DuckDBWarehouse(duckdb_path(url), validate_schema_name(schema), **options)
    if kind == "postgres":
        from resources.warehouse.postgres import PostgresWarehouse

        validate_schema_name(schema)
        problem: str | None = None
        try:
            return PostgresWarehouse(url, schema, **options)
        except ValueError as exc:  # messages there are built from the redacted URL only
            problem = str(exc)
        raise WarehouseConfigError(f"{WAREHOUSE_SETTING}: {problem}")
    project, dataset = bigquery_target(url)
    from resources.warehouse.bigquery import BigQueryWarehouse

    return BigQueryWarehouse(project=project, dataset=dataset, **options)


def warehouse_for(settings: Mapping[str, Any], *, landing: bool = False) -> Warehouse:
    """The handle ``WarehouseResource(**settings).get_warehouse(...)`` opens. On DuckDB a ``landing``
    handle writes within its memory budget, others only query within one (an upsert's key index needs
    memory in proportion to its rows).
    """
    url = settings["url"]
    options: dict[str, Any] = {}
    if isinstance(url, str) and url_scheme(url.strip()) == "duckdb":
        options["lock_timeout_seconds"] = settings.get("lock_timeout_seconds", DEFAULT_LOCK_TIMEOUT_SECONDS)
        limit = settings.get("duckdb_landing_memory_limit", DEFAULT_LANDING_MEMORY_LIMIT)
        budget = validate_memory_limit(limit, "duckdb_landing_memory_limit")
        options["memory_limit" if landing else "query_memory_limit"] = budget
    return warehouse_from_url(url, settings.get("schema_name", DEFAULT_SCHEMA), **options)
