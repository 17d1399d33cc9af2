"""The settings: everything the environment configures, read and validated in this one module.

Dagster-free, between the core and ``resources/``: it imports the configuration rules and error
types of ``resources/`` and nothing from ``sync/``, ``assets/`` or ``pipelines/``. Each setting has
its default in one place and is validated by its domain's own rule (``resources/api/config.py``
for the API URL, key and retry deadline, with the one loopback rule; ``resources/warehouse/urls.py``
for the warehouse URL, schema and DuckDB memory budget), before the first request or write. A bad
value is ONE :class:`ConfigError` whose one-line message names the variable to fix; pydantic's
multi-line report (which quotes the input, perhaps the key) never reaches the user.

Three models, read separately so a mistake in one does not stop what needs only another:

* :class:`PartitionSettings` (first day, lookback): what the date partitions and the daily schedule
  need, read when the assets are declared.
* :class:`Settings`: those plus the API and the warehouse, what a sync needs.
* :class:`AuditSettings`: the audit sensor's ``VISIBILITY_AUDIT_*`` budget, whose mistakes must not
  stop a sync (only the code location that runs the sensor loads them).

``load_*(env)`` takes a mapping in place of ``os.environ`` (tests, the demo's sandbox): the same
pydantic-settings source then reads the mapping, and the environment is not consulted at all.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from resources.api.access import ApiAccess
from resources.api.config import (
    DEFAULT_MAX_NEW_COLUMNS,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_FLOOR,
    DEFAULT_REQUESTS_PER_CALL,
    DEFAULT_RETRY_DEADLINE_SECONDS,
    KEY_SETTING,
    MAX_NEW_COLUMNS_SETTING,
    MAX_RESPONSE_SETTING,
    REQUEST_FACTOR_SETTING,
    REQUEST_FLOOR_SETTING,
    URL_SETTING,
    is_loopback_host,
    parse_decimal,
    parse_integer,
    validate_api_key,
    validate_base_url,
    validate_max_new_columns,
    validate_max_response_bytes,
    validate_request_floor,
    validate_requests_per_call,
    validate_retry_deadline,
)
from resources.api.errors import ConfigurationError
from resources.failures import FailureKind
from resources.warehouse.contract import WAREHOUSE_SETTING, WarehouseConfigError
from resources.warehouse.urls import (
    DEFAULT_LANDING_MEMORY_LIMIT,
    DEFAULT_SCHEMA,
    DEFAULT_WAREHOUSE_URL,
    MEMORY_LIMIT_SETTING,
    SCHEMA_SETTING,
    redact_url,
    validate_memory_limit,
    validate_schema_name,
    validate_warehouse_url,
)

__all__ = [
    "AuditSettings",
    "ConfigError",
    "PartitionSettings",
    "Settings",
    "is_loopback_host",
    "load_audit_settings",
    "load_partition_settings",
    "load_settings",
]

ENV_PREFIX = "VISIBILITY_"
START_DATE_SETTING = "VISIBILITY_START_DATE"
LOOKBACK_SETTING = "VISIBILITY_LOOKBACK_DAYS"
CITATION_URLS_SETTING = "VISIBILITY_CITATION_URLS"
#: Without VISIBILITY_START_DATE the first partition is this many days before today.
DEFAULT_HISTORY_DAYS = 90
#: The earliest first partition: ChatGPT's public launch (2022-11-30). None of the seven engines the
#: service measures answered anyone before it, so no brand can have history earlier; a start date
#: before it (``0001-01-01``) would only spend requests on days that cannot hold data.
EARLIEST_START_DATE = dt.date(2022, 11, 30)
#: A first partition may lie ahead (the schedule skips until it comes), by at most this many days.
MAX_START_DAYS_AHEAD = 366
DEFAULT_LOOKBACK_DAYS = 3
#: Bounds of VISIBILITY_LOOKBACK_DAYS: the service restates recent days, not years.
MAX_LOOKBACK_DAYS = 365
DEFAULT_AUDITS_PER_DAY = 10
DEFAULT_REAUDIT_DAYS = 30.0
DEFAULT_AUDIT_DEADLINE_MINUTES = 30.0
DEFAULT_NEW_PAGE_DAYS = 7


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the environment variable."""

    failure_kind = FailureKind.CONFIGURATION


@dataclass(frozen=True)
class _Reading:
    """What one ``load_*`` call reads: a mapping in place of ``os.environ``, and today's date."""

    env: Mapping[str, str] | None
    today: dt.date | None


_READING: ContextVar[_Reading | None] = ContextVar("visibility_settings_reading", default=None)


class _Environment(EnvSettingsSource):
    """pydantic-settings' environment source, reading the ``load_*`` call's mapping when it has one."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        reading = _READING.get()
        if reading is None or reading.env is None:
            return super()._load_env_vars()
        return {(k if self.case_sensitive else k.lower()): v for k, v in reading.env.items()}


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


class _EnvironmentSettings(BaseSettings):
    """``VISIBILITY_*`` variables only (no ``.env`` file, no secrets directory); frozen once read."""

    #: extra="forbid": a value passed by field name where the variable's name is expected
    #: (``warehouse_url=`` for ``VISIBILITY_WAREHOUSE=``) is refused, not silently ignored
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")

    def __init__(self, **values: Any) -> None:
        problem: ConfigError | None = None
        try:
            super().__init__(**values)
        except ValidationError as exc:
            problem = _config_error(exc, type(self))
        if problem is not None:
            raise problem  # outside the except block: pydantic's error (it quotes the input) is not chained

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _Environment(settings_cls))

    @classmethod
    def variable(cls, field_name: str) -> str:
        """The environment variable of a field (``warehouse_url`` -> ``VISIBILITY_WAREHOUSE``)."""
        alias = cls.model_fields[field_name].validation_alias
        return alias if isinstance(alias, str) else f"{ENV_PREFIX}{field_name}".upper()

    @classmethod
    def _default(cls, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        return cls.model_fields[info.field_name].get_default(call_default_factory=True)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """URLs without their password (the key is a ``SecretStr``, shown as stars)."""
        for name, value in super().__repr_args__():
            yield name, redact_url(value) if isinstance(value, str) and "://" in value else value


def _config_error(error: ValidationError, model: type[_EnvironmentSettings]) -> ConfigError:
    """The first problem as today's one-line message naming the variable; never the input."""
    problems = error.errors(include_url=False, include_input=False)
    for problem in problems:
        cause = (problem.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigError):
            return cause
    first = problems[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    known = field in model.model_fields
    if first["type"] == "extra_forbidden":
        hint = f"; pass it as {model.variable(field)}" if known else ""
        return ConfigError(f"{field!r} is not a setting of {model.__name__}{hint}")
    return ConfigError(f"{model.variable(field) if known else field}: {first['msg']}")


def _whole_number(value: Any, setting: str, minimum: int, maximum: int) -> int:
    text = str(value).strip()
    try:
        number = parse_integer(text)
    except ValueError:
        raise ConfigError(f"{setting} must be an integer, got {text[:40]!r}") from None
    if not minimum <= number <= maximum:
        raise ConfigError(f"{setting} must be between {minimum} and {maximum}, got {text[:40]!r}")
    return number


class PartitionSettings(_EnvironmentSettings):
    """The date partitions: the first day, and the days each daily sync re-fetches."""

    #: ``VISIBILITY_START_DATE``; unset: ``DEFAULT_HISTORY_DAYS`` before today
    start_date: dt.date = Field(default=None, validate_default=True)  # type: ignore[assignment]
    #: ``VISIBILITY_LOOKBACK_DAYS``: days before the newest partition that a daily sync re-fetches
    lookback_days: int = DEFAULT_LOOKBACK_DAYS

    @field_validator("start_date", mode="before")
    @classmethod
    def _start_date(cls, value: Any) -> dt.date:
        if isinstance(value, dt.date):
            return value
        if _blank(value):
            reading = _READING.get()
            today = (reading.today if reading else None) or dt.date.today()
            return today - dt.timedelta(days=DEFAULT_HISTORY_DAYS)
        text = str(value).strip()
        try:
            day = dt.date.fromisoformat(text)
        except ValueError:
            raise ConfigError(f"{START_DATE_SETTING} must be a date YYYY-MM-DD, got {text[:40]!r}") from None
        reading = _READING.get()
        today = (reading.today if reading else None) or dt.date.today()
        latest = today + dt.timedelta(days=MAX_START_DAYS_AHEAD)
        if not EARLIEST_START_DATE <= day <= latest:
            raise ConfigError(
                f"{START_DATE_SETTING} must be between {EARLIEST_START_DATE} (the earliest day AI "
                f"answer engines have history) and {latest} (a year ahead: the schedule waits for it), "
                f"got {text!r}"
            )
        return day

    @field_validator("lookback_days", mode="before")
    @classmethod
    def _lookback_days(cls, value: Any) -> int:
        if _blank(value):
            return DEFAULT_LOOKBACK_DAYS
        return _whole_number(value, LOOKBACK_SETTING, 0, MAX_LOOKBACK_DAYS)


#: The rule of each API and warehouse setting, in its domain's module: the text (stripped, not
#: blank) -> the value, or None for the default; errors are the domain's, with today's messages.
_DOMAIN_RULES: dict[str, Callable[[str], Any]] = {
    "api_url": validate_base_url,
    "api_key": validate_api_key,
    "warehouse_url": validate_warehouse_url,
    "schema_name": validate_schema_name,
    "duckdb_memory_limit": partial(validate_memory_limit, setting=MEMORY_LIMIT_SETTING),
    "retry_deadline_seconds": validate_retry_deadline,
    "request_budget_floor": validate_request_floor,
    "request_budget_factor": validate_requests_per_call,
    "max_response_bytes": validate_max_response_bytes,
    "max_new_columns": validate_max_new_columns,
}


class Settings(PartitionSettings):
    """What a sync needs. ``repr`` shows neither the key nor a password in a URL."""

    api_url: str | None = None
    api_key: SecretStr | None = None
    warehouse_url: str = Field(default=DEFAULT_WAREHOUSE_URL, validation_alias=WAREHOUSE_SETTING)
    schema_name: str = Field(default=DEFAULT_SCHEMA, validation_alias=SCHEMA_SETTING)
    #: the DuckDB memory budget of the landing's connections (``64MB``, ``1GiB``)
    duckdb_memory_limit: str = DEFAULT_LANDING_MEMORY_LIMIT
    #: how long a sync retries an unreachable service, counted once for the whole sync
    retry_deadline_seconds: float = DEFAULT_RETRY_DEADLINE_SECONDS
    #: the sync's request budget: a floor, plus this many requests per planned call
    request_budget_floor: int = Field(default=DEFAULT_REQUEST_FLOOR, validation_alias=REQUEST_FLOOR_SETTING)
    request_budget_factor: int = Field(
        default=DEFAULT_REQUESTS_PER_CALL, validation_alias=REQUEST_FACTOR_SETTING
    )
    #: the largest body of one answer the client reads, raw or decoded
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, validation_alias=MAX_RESPONSE_SETTING)
    #: the most unknown fields one table's fetch lands as new columns (more refuse its landing)
    max_new_columns: int = Field(default=DEFAULT_MAX_NEW_COLUMNS, validation_alias=MAX_NEW_COLUMNS_SETTING)
    #: pages whose citation trend each brand syncs (space or comma separated, absolute http(s) URLs)
    citation_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: topics (ids or names, comma separated) within which each brand's own domain is trended
    citation_topics: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator(*_DOMAIN_RULES, mode="before")
    @classmethod
    def _by_domain_rule(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if _blank(value):
            return cls._default(info)
        assert info.field_name is not None
        try:
            checked = _DOMAIN_RULES[info.field_name](str(value).strip())
        except ConfigurationError as exc:
            raise ConfigError(exc.detail) from None
        except WarehouseConfigError as exc:
            raise ConfigError(str(exc)) from None
        return cls._default(info) if checked is None else checked

    @field_validator("citation_urls", mode="before")
    @classmethod
    def _pages(cls, value: Any) -> list[str]:
        return citation_pages(value, CITATION_URLS_SETTING)

    @field_validator("citation_topics", mode="before")
    @classmethod
    def _topics(cls, value: Any) -> list[str]:
        return citation_topics(value)

    def require_api(self) -> tuple[str, str]:
        """The URL and key, or a ConfigError naming the missing variable."""
        if not self.api_url:
            raise ConfigError(f"{URL_SETTING} is not set (the service's base URL, e.g. https://...)")
        if self.api_key is None:
            raise ConfigError(f"{KEY_SETTING} is not set (a workspace or brand-scoped API key)")
        return self.api_url, self.api_key.get_secret_value()

    def api_access(self) -> ApiAccess:
        """What a sync's clients are opened with (URL, key, retry deadline, request budget), or a
        ConfigError naming the missing variable; the ``api`` resource of the command line's runs
        holds the same values (``pipelines/resources.py``)."""
        url, key = self.require_api()
        return ApiAccess(
            api_url=url,
            api_key=key,
            retry_deadline_seconds=self.retry_deadline_seconds,
            request_budget_floor=self.request_budget_floor,
            request_budget_factor=self.request_budget_factor,
            max_response_bytes=self.max_response_bytes,
            max_new_columns=self.max_new_columns,
        )


class AuditSettings(_EnvironmentSettings):
    """The audit sensor's budget (``VISIBILITY_AUDIT_*``; docs/SENSORS.md)."""

    #: pages to audit besides newly cited ones (space or comma separated)
    urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias="VISIBILITY_AUDIT_URLS"
    )
    audits_per_day: int = DEFAULT_AUDITS_PER_DAY
    reaudit_interval_days: float = Field(
        default=DEFAULT_REAUDIT_DAYS, validation_alias="VISIBILITY_AUDIT_REAUDIT_DAYS"
    )
    deadline_minutes: float = Field(
        default=DEFAULT_AUDIT_DEADLINE_MINUTES, validation_alias="VISIBILITY_AUDIT_DEADLINE_MINUTES"
    )
    new_page_window_days: int = Field(
        default=DEFAULT_NEW_PAGE_DAYS, validation_alias="VISIBILITY_AUDIT_NEW_PAGE_DAYS"
    )

    #: smallest allowed values; a deadline of 0 would time every audit out at once
    _MINIMUM: ClassVar[dict[str, float]] = {
        "audits_per_day": 0,
        "reaudit_interval_days": 0,
        "deadline_minutes": 1,
        "new_page_window_days": 0,
    }

    @field_validator("urls", mode="before")
    @classmethod
    def _urls(cls, value: Any) -> list[str]:
        if isinstance(value, str):
            return [u for u in value.replace(",", " ").split() if u]
        return list(value or [])

    @field_validator(
        "audits_per_day", "reaudit_interval_days", "deadline_minutes", "new_page_window_days", mode="before"
    )
    @classmethod
    def _number(cls, value: Any, info: ValidationInfo) -> int | float:
        if _blank(value):
            return cls._default(info)
        assert info.field_name is not None
        kind = int if cls.model_fields[info.field_name].annotation is int else float
        variable, minimum, raw = (
            cls.variable(info.field_name),
            cls._MINIMUM[info.field_name],
            str(value).strip(),
        )
        what = "a whole number" if kind is int else "a number"
        try:
            number = parse_integer(raw) if kind is int else parse_decimal(raw)
        except ValueError:
            raise ConfigError(f"{variable} must be {what} (at least {minimum:g}), got {raw!r}") from None
        if number < minimum:
            raise ConfigError(f"{variable} must be {what} of at least {minimum:g}, got {raw!r}")
        return number


def citation_pages(value: Any, setting: str) -> list[str]:
    """Tracked pages (a list, or one space or comma separated string): absolute http(s) URLs, once
    each; a bad one is a ``ConfigError`` naming ``setting`` (the variable, or the run's config field)."""
    from urllib.parse import urlsplit

    urls = value.replace(",", " ").split() if isinstance(value, str) else list(value or [])
    for url in urls:
        parts = urlsplit(str(url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{setting}: {str(url)[:80]!r} is not an absolute http(s) URL")
    return list(dict.fromkeys(str(u) for u in urls))


def citation_topics(value: Any) -> list[str]:
    """Topic ids or names (a list, or one comma separated string), once each, blanks dropped."""
    topics = value.split(",") if isinstance(value, str) else list(value or [])
    return list(dict.fromkeys(str(t).strip() for t in topics if str(t).strip()))


_Model = TypeVar("_Model", bound=_EnvironmentSettings)


@contextmanager
def _reading(env: Mapping[str, str] | None, today: dt.date | None) -> Iterator[None]:
    token = _READING.set(_Reading(env, today))
    try:
        yield
    finally:
        _READING.reset(token)


def _load(model: type[_Model], env: Mapping[str, str] | None, today: dt.date | None = None) -> _Model:
    with _reading(env, today):
        return model()


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    today: dt.date | None = None,
    overrides: Mapping[str, str] | None = None,
) -> Settings:
    """Read and validate every setting of a sync; raise ConfigError naming the first bad one.

    ``env``: read this mapping instead of ``os.environ``. ``overrides``: variables that win over
    it (the demo's sandbox URL and key), so nothing is written into the environment to change one.
    """
    if overrides:
        env = {**(os.environ if env is None else env), **overrides}
    return _load(Settings, env, today)


def load_partition_settings(
    env: Mapping[str, str] | None = None, *, today: dt.date | None = None
) -> PartitionSettings:
    """Only the first day and the lookback (what declaring the partitioned assets needs)."""
    return _load(PartitionSettings, env, today)


def load_audit_settings(env: Mapping[str, str] | None = None) -> AuditSettings:
    """The audit sensor's ``VISIBILITY_AUDIT_*`` settings (defaults where unset)."""
    return _load(AuditSettings, env)
