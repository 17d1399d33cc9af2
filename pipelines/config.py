"""The environment settings of DESIGN.md, read and validated in one place.

Everything that can be wrong in the configuration is found here, before the first request or write,
and reported with the name of the variable to fix. The API key is kept out of ``repr`` and messages.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

DEFAULT_WAREHOUSE = "duckdb:///data/visibility.duckdb"
DEFAULT_SCHEMA = "visibility"
DEFAULT_HISTORY_DAYS = 90
DEFAULT_LOOKBACK_DAYS = 3
#: Bounds of VISIBILITY_LOOKBACK_DAYS: the service restates recent days, not years.
MAX_LOOKBACK_DAYS = 365
WAREHOUSE_SCHEMES = ("duckdb", "postgresql", "postgres", "postgresql+psycopg", "bigquery")


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the environment variable."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _redacted(url: str | None) -> str | None:
    """``url`` without its password: the one redaction rule of the warehouse module, for messages."""
    from resources.warehouse.resource import redact_url

    return None if url is None else redact_url(url)


def validate_api_url(url: str, *, setting: str = "VISIBILITY_API_URL") -> str:
    """``https://`` is required unless the host is loopback (the sandbox)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{setting} must be an http(s) URL such as https://api.example.com, got {_redacted(url)!r}"
        )
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ConfigError(
            f"{setting} must use https:// (plain http is allowed only for loopback hosts), "
            f"got {_redacted(url)!r}"
        )
    return url.rstrip("/")


def validate_warehouse_url(url: str, *, setting: str = "VISIBILITY_WAREHOUSE") -> str:
    scheme = urlsplit(url).scheme
    if scheme not in WAREHOUSE_SCHEMES:
        raise ConfigError(
            f"{setting} must start with duckdb:///, postgresql:// or bigquery://, got scheme {scheme!r}"
        )
    return url


def _parse_date(value: str, setting: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{setting} must be a date YYYY-MM-DD, got {value!r}") from None


def _parse_int(value: str, setting: str, minimum: int, maximum: int | None = None) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{setting} must be an integer, got {value[:40]!r}") from None
    if number < minimum or (maximum is not None and number > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise ConfigError(f"{setting} must be {bounds}, got {value[:40]!r}")
    return number


def start_date_from_env(env: Mapping[str, str] | None = None, *, today: dt.date | None = None) -> dt.date:
    """First date partition: ``VISIBILITY_START_DATE`` or 90 days before today."""
    env = os.environ if env is None else env
    raw = env.get("VISIBILITY_START_DATE", "").strip()
    if raw:
        return _parse_date(raw, "VISIBILITY_START_DATE")
    return (today or dt.date.today()) - dt.timedelta(days=DEFAULT_HISTORY_DAYS)


def duckdb_memory_limit_from_env(env: Mapping[str, str] | None = None) -> str:
    """The DuckDB memory budget of the landing worker's connections (``64MB``, ``1GiB``)."""
    from resources.warehouse.resource import (
        DEFAULT_LANDING_MEMORY_LIMIT,
        WarehouseConfigError,
        validate_memory_limit,
    )

    env = os.environ if env is None else env
    try:
        value = validate_memory_limit(
            env.get("VISIBILITY_DUCKDB_MEMORY_LIMIT", ""), "VISIBILITY_DUCKDB_MEMORY_LIMIT"
        )
    except WarehouseConfigError as exc:
        raise ConfigError(str(exc)) from None
    return value or DEFAULT_LANDING_MEMORY_LIMIT


def lookback_days_from_env(env: Mapping[str, str] | None = None) -> int:
    """``VISIBILITY_LOOKBACK_DAYS``: 0 to 365 (a larger value would only overflow the date range)."""
    env = os.environ if env is None else env
    raw = env.get("VISIBILITY_LOOKBACK_DAYS", "").strip()
    if not raw:
        return DEFAULT_LOOKBACK_DAYS
    return _parse_int(raw, "VISIBILITY_LOOKBACK_DAYS", 0, MAX_LOOKBACK_DAYS)


def retry_deadline_from_env(env: Mapping[str, str] | None = None) -> float:
    """``VISIBILITY_RETRY_DEADLINE_SECONDS``: how long a sync retries an unreachable service (1..86400,
    default 300), counted once for the whole sync."""
    from resources.api.config import validate_retry_deadline
    from resources.api.errors import ConfigurationError

    env = os.environ if env is None else env
    try:
        return validate_retry_deadline(env.get("VISIBILITY_RETRY_DEADLINE_SECONDS", ""))
    except ConfigurationError as exc:
        raise ConfigError(exc.detail) from None


@dataclass(frozen=True, repr=False)
class Settings:
    """Validated settings. ``repr`` shows neither the key nor a password in a URL."""

    api_url: str | None
    api_key: str | None = field(repr=False)
    warehouse_url: str
    schema_name: str
    start_date: dt.date
    lookback_days: int
    duckdb_memory_limit: str
    retry_deadline_seconds: float = 300.0

    def __repr__(self) -> str:
        return (
            f"Settings(api_url={_redacted(self.api_url)!r}, "
            f"api_key={'<set>' if self.api_key else None!r}, "
            f"warehouse_url={_redacted(self.warehouse_url)!r}, schema_name={self.schema_name!r}, "
            f"start_date={self.start_date!r}, lookback_days={self.lookback_days!r}, "
            f"duckdb_memory_limit={self.duckdb_memory_limit!r}, "
            f"retry_deadline_seconds={self.retry_deadline_seconds!r})"
        )

    def require_api(self) -> tuple[str, str]:
        """The URL and key, or a ConfigError naming the missing variable."""
        if not self.api_url:
            raise ConfigError("VISIBILITY_API_URL is not set (the service's base URL, e.g. https://...)")
        if not self.api_key:
            raise ConfigError("VISIBILITY_API_KEY is not set (a workspace or brand-scoped API key)")
        return self.api_url, self.api_key


def _validated_warehouse(url: str, schema: str) -> None:
    """The warehouse module's own URL and schema rules (no connection is opened)."""
    from resources.warehouse.resource import (
        WarehouseConfigError,
        bigquery_target,
        duckdb_path,
        validate_schema_name,
    )

    try:
        scheme = urlsplit(url).scheme.lower()
        if scheme == "duckdb":
            duckdb_path(url)
        elif scheme == "bigquery":
            bigquery_target(url)
        validate_schema_name(schema)
    except WarehouseConfigError as exc:
        raise ConfigError(str(exc)) from None


def load_settings(env: Mapping[str, str] | None = None, *, today: dt.date | None = None) -> Settings:
    """Read and validate every setting; raise ConfigError naming the first bad one."""
    from resources.api.config import validate_api_key, validate_base_url
    from resources.api.errors import ConfigurationError

    env = os.environ if env is None else env
    api_url = env.get("VISIBILITY_API_URL", "").strip() or None
    api_key = env.get("VISIBILITY_API_KEY", "").strip() or None
    try:
        if api_url:
            api_url = validate_base_url(validate_api_url(api_url))
        if api_key is not None:
            api_key = validate_api_key(api_key)
    except ConfigurationError as exc:
        raise ConfigError(exc.detail) from None
    warehouse_url = validate_warehouse_url(env.get("VISIBILITY_WAREHOUSE", "").strip() or DEFAULT_WAREHOUSE)
    schema_name = env.get("VISIBILITY_SCHEMA", "").strip() or DEFAULT_SCHEMA
    _validated_warehouse(warehouse_url, schema_name)
    start_date = start_date_from_env(env, today=today)
    lookback_days = lookback_days_from_env(env)
    duckdb_memory_limit = duckdb_memory_limit_from_env(env)
    retry_deadline_seconds = retry_deadline_from_env(env)
    return Settings(
        api_url=api_url,
        api_key=api_key,
        warehouse_url=warehouse_url,
        schema_name=schema_name,
        start_date=start_date,
        lookback_days=lookback_days,
        duckdb_memory_limit=duckdb_memory_limit,
        retry_deadline_seconds=retry_deadline_seconds,
    )
