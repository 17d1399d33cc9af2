"""The settings: every ``VISIBILITY_*`` variable, read and validated once, here (Dagster-free).

A bad value is one :class:`ConfigError` naming the variable; pydantic's report (which may quote the
key) never reaches the user. The models are read separately, so a mistake in one does not stop what
needs only another.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    AliasGenerator,
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from resources.api import config as api
from resources.api.access import ApiAccess, ApiTuning
from resources.api.errors import ConfigurationError
from resources.failures import FailureKind
from resources.warehouse import urls as warehouse
from resources.warehouse.contract import WAREHOUSE_SETTING, WarehouseConfigError

ENV_PREFIX = "VISIBILITY_"
#: Without VISIBILITY_START_DATE the first partition is this many days before today.
DEFAULT_HISTORY_DAYS = 90
#: The earliest first partition: ChatGPT's public launch. None of the engines the service measures
#: answered anyone before it, so a start date before it would only spend requests on empty days.
EARLIEST_START_DATE = dt.date(2022, 11, 30)
#: A first partition may lie ahead (the schedule skips until it comes), by at most this many days.
MAX_START_DAYS_AHEAD = 366
DEFAULT_LOOKBACK_DAYS = 3
#: The service restates recent days, not years.
MAX_LOOKBACK_DAYS = 365
#: A number as a setting takes it: ASCII digits, an optional sign and (decimals) one point; Python's
#: ``int``/``float`` also take ``1_000``, ``1e3``, ``inf`` and other scripts' digits (``١٢``).
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the environment variable. The rules of
    ``resources/`` raise their own errors, with the same messages; loading turns them into this."""

    failure_kind = FailureKind.CONFIGURATION


def _blank(value: Any) -> bool:
    if isinstance(value, str):
        return not value.strip()
    return value is None or value == []


def _number(
    text: str,
    setting: str,
    *,
    low: int,
    high: int | None = None,
    kind: type[int] | type[float] = int,
    what: str = "a whole number",
    unit: str = "",
) -> int | float:
    """``text`` as an ASCII number of ``kind`` from ``low`` to ``high`` (None: no upper bound)."""
    at_least = f" (at least {low})" if high is None else ""
    if not (_INTEGER if kind is int else _DECIMAL).fullmatch(text):
        raise ConfigError(f"{setting} must be {what}{at_least}, got {text[:40]!r}")
    number = kind(text)
    if high is None and number < low:
        raise ConfigError(f"{setting} must be {what} of at least {low}, got {text[:40]!r}")
    if high is not None and not low <= number <= high:
        raise ConfigError(f"{setting} must be between {low} and {high}{unit}, got {text[:40]!r}")
    return number


def _start_date(text: str, setting: str) -> dt.date:
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{setting} must be a date YYYY-MM-DD, got {text[:40]!r}") from None
    latest = dt.date.today() + dt.timedelta(days=MAX_START_DAYS_AHEAD)
    if not EARLIEST_START_DATE <= day <= latest:
        raise ConfigError(
            f"{setting} must be between {EARLIEST_START_DATE} (the earliest day AI answer engines "
            f"have history) and {latest} (a year ahead: the schedule waits for it), got {text!r}"
        )
    return day


def citation_pages(value: Any, setting: str) -> list[str]:
    """Tracked pages (a list, or one space or comma separated string): absolute http(s) URLs, once
    each; a bad one is a ``ConfigError`` naming ``setting`` (the variable, or the run's config field)."""
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


class _EnvironmentSettings(BaseSettings):
    """``VISIBILITY_*`` variables only (each field's alias names its variable); frozen once read."""

    #: extra="forbid": a field's name where its variable's is expected (``warehouse_url=`` for
    #: ``VISIBILITY_WAREHOUSE=``) is refused, not silently ignored; lists are text, split by their rule
    model_config = SettingsConfigDict(
        alias_generator=AliasGenerator(validation_alias=lambda name: f"{ENV_PREFIX}{name.upper()}"),
        frozen=True,
        extra="forbid",
        enable_decoding=False,
    )
    #: each field's rule, (text, variable) -> value; a blank or unset variable takes the default, a
    #: whole number without a rule is checked against its declared bounds (``Field(ge=..., le=...)``)
    RULES: ClassVar[dict[str, Callable[[str, str], Any]]] = {}

    def __init__(self, **values: Any) -> None:
        problem: ConfigError | None = None
        try:
            super().__init__(**values)
        except ValidationError as exc:
            problem = _config_error(exc, type(self))
        except ConfigurationError as exc:  # the API rules' error: not a ValueError, so pydantic lets it by
            problem = ConfigError(exc.detail)
        if problem is not None:
            raise problem  # outside the except block: pydantic's error (it quotes the input) is not chained

    @classmethod
    def variable(cls, field_name: str) -> str:
        """The environment variable of a field (``warehouse_url`` -> ``VISIBILITY_WAREHOUSE``)."""
        return str(cls.model_fields[field_name].validation_alias)

    @field_validator("*", mode="before")
    @classmethod
    def _by_rule(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        field = cls.model_fields[info.field_name]
        if _blank(value):
            return field.get_default(call_default_factory=True)
        rule = cls.RULES.get(info.field_name)
        if rule is None and field.annotation is int:
            low = next(bound.ge for bound in field.metadata if hasattr(bound, "ge"))
            high = next(bound.le for bound in field.metadata if hasattr(bound, "le"))
            rule = partial(_number, low=low, high=high)
        text = value if isinstance(value, list) else str(value).strip()
        return value if rule is None else rule(text, cls.variable(info.field_name))

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """URLs without their password (the key is a ``SecretStr``, shown as stars)."""
        for name, value in super().__repr_args__():
            yield name, warehouse.redact_url(value) if isinstance(value, str) and "://" in value else value


def _config_error(error: ValidationError, model: type[_EnvironmentSettings]) -> ConfigError:
    """The first problem as a one-line message naming the variable; never the input."""
    problems = error.errors(include_url=False, include_input=False)
    for problem in problems:
        cause = (problem.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigError | WarehouseConfigError):
            return ConfigError(str(cause))
    first = problems[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    known = field in model.model_fields
    if first["type"] == "extra_forbidden":
        hint = f"; pass it as {model.variable(field)}" if known else ""
        return ConfigError(f"{field!r} is not a setting of {model.__name__}{hint}")
    return ConfigError(f"{model.variable(field) if known else field}: {first['msg']}")


class PartitionSettings(_EnvironmentSettings):
    """The date partitions: the first day, and the days each daily sync re-fetches."""

    RULES: ClassVar[dict[str, Callable[[str, str], Any]]] = {
        "start_date": _start_date,
        "lookback_days": partial(_number, low=0, high=MAX_LOOKBACK_DAYS, what="an integer"),
    }

    start_date: dt.date = Field(
        default_factory=lambda: dt.date.today() - dt.timedelta(days=DEFAULT_HISTORY_DAYS)
    )
    #: days before the newest partition that a daily sync re-fetches
    lookback_days: int = DEFAULT_LOOKBACK_DAYS


def sync_window(today: dt.date, lookback_days: int, first_day: dt.date) -> tuple[dt.date, dt.date] | None:
    """Dates to (re)fetch, inclusive: yesterday and ``lookback_days`` before it, from ``first_day``
    (the daily schedule's window, and ``visibility-sync run``'s default: here, so it needs no Dagster)."""
    newest = today - dt.timedelta(days=1)
    oldest = max(first_day, newest - dt.timedelta(days=lookback_days))
    return (oldest, newest) if oldest <= newest else None


class Settings(ApiTuning, PartitionSettings):
    """What a sync needs: the partitions, the API's URL, key and tuning (fields of the ``api`` resource
    too), the warehouse. ``repr`` shows neither the key nor a password in a URL."""

    RULES: ClassVar[dict[str, Callable[[str, str], Any]]] = {
        **PartitionSettings.RULES,
        "api_url": lambda text, _: api.validate_base_url(text),
        "api_key": lambda text, _: api.validate_api_key(text),
        "warehouse_url": lambda text, _: warehouse.validate_warehouse_url(text),
        "schema_name": lambda text, _: warehouse.validate_schema_name(text),
        "duckdb_memory_limit": warehouse.validate_memory_limit,
        "retry_deadline_seconds": partial(
            _number,
            low=api.MIN_RETRY_DEADLINE_SECONDS,
            high=api.MAX_RETRY_DEADLINE_SECONDS,
            kind=float,
            what="a number of seconds",
            unit=" seconds",
        ),
        "citation_urls": citation_pages,
        "citation_topics": lambda text, setting: citation_topics(text),
    }

    api_url: str | None = None
    api_key: SecretStr | None = None
    warehouse_url: str = Field(default=warehouse.DEFAULT_WAREHOUSE_URL, validation_alias=WAREHOUSE_SETTING)
    schema_name: str = Field(default=warehouse.DEFAULT_SCHEMA, validation_alias=warehouse.SCHEMA_SETTING)
    #: the DuckDB memory budget of the landing's connections (``64MB``, ``1GiB``)
    duckdb_memory_limit: str = warehouse.DEFAULT_LANDING_MEMORY_LIMIT

    def require_api(self) -> tuple[str, str]:
        """The URL and key, or a ConfigError naming the missing variable."""
        if not self.api_url:
            raise ConfigError(f"{api.URL_SETTING} is not set (the service's base URL, e.g. https://...)")
        if self.api_key is None:
            raise ConfigError(f"{api.KEY_SETTING} is not set (a workspace or brand-scoped API key)")
        return self.api_url, self.api_key.get_secret_value()

    def api_values(self) -> dict[str, Any]:
        """The ``api`` resource's values these settings hold, besides its URL and key."""
        return self.model_dump(include=set(ApiTuning.model_fields))

    def api_access(self) -> ApiAccess:
        """What a sync's clients are opened with, or a ConfigError naming a missing variable."""
        url, key = self.require_api()
        return ApiAccess(api_url=url, api_key=key, **self.api_values())


class AuditPolicy(BaseModel):
    """The audit sensor's budget (docs/SENSORS.md): :class:`AuditSettings` reads it from the
    environment, the sensor's ``audit_settings`` resource holds it."""

    #: pages to audit besides newly cited ones; each belongs to the brand whose domain it is on
    urls: list[str] = Field(default_factory=list)
    audits_per_day: int = 10
    reaudit_interval_days: float = 30.0
    deadline_minutes: float = 30.0
    new_page_window_days: int = 7

    @property
    def reaudit_interval(self) -> dt.timedelta:
        return dt.timedelta(days=self.reaudit_interval_days)

    @property
    def deadline(self) -> dt.timedelta:
        return dt.timedelta(minutes=self.deadline_minutes)


#: The audit settings' variables where they are not ``VISIBILITY_`` and the field's name.
_AUDIT_VARIABLES = {
    "urls": "VISIBILITY_AUDIT_URLS",
    "reaudit_interval_days": "VISIBILITY_AUDIT_REAUDIT_DAYS",
    "deadline_minutes": "VISIBILITY_AUDIT_DEADLINE_MINUTES",
    "new_page_window_days": "VISIBILITY_AUDIT_NEW_PAGE_DAYS",
}


class AuditSettings(_EnvironmentSettings, AuditPolicy):
    """The audit sensor's budget from ``VISIBILITY_AUDIT_*`` and ``VISIBILITY_AUDITS_PER_DAY``."""

    model_config = SettingsConfigDict(
        alias_generator=AliasGenerator(
            validation_alias=lambda name: _AUDIT_VARIABLES.get(name, f"{ENV_PREFIX}{name.upper()}")
        )
    )
    RULES: ClassVar[dict[str, Callable[[str, str], Any]]] = {
        "urls": lambda text, setting: text.replace(",", " ").split(),
        "audits_per_day": partial(_number, low=0),
        "reaudit_interval_days": partial(_number, low=0, kind=float, what="a number"),
        "deadline_minutes": partial(_number, low=1, kind=float, what="a number"),  # 0: every audit times out
        "new_page_window_days": partial(_number, low=0),
    }


_Model = TypeVar("_Model", bound=_EnvironmentSettings)


def _load(model: type[_Model], env: Mapping[str, str] | None) -> _Model:
    """pydantic-settings reads the environment; a mapping given instead names every variable (blank
    where it has none), so the environment is not consulted."""
    if env is None:
        return model()
    return model(**{variable: env.get(variable, "") for variable in map(model.variable, model.model_fields)})


def load_settings(
    env: Mapping[str, str] | None = None, *, overrides: Mapping[str, str] | None = None
) -> Settings:
    """Read and validate every setting of a sync; raise ConfigError naming the first bad one.
    ``overrides`` win over ``env`` (the demo's sandbox URL and key) without touching the environment.
    """
    if env is None:
        return Settings(**(overrides or {}))
    return _load(Settings, {**env, **(overrides or {})})


def load_partition_settings(env: Mapping[str, str] | None = None) -> PartitionSettings:
    """Only the first day and the lookback (what declaring the partitioned assets needs)."""
    return _load(PartitionSettings, env)


def load_audit_settings(env: Mapping[str, str] | None = None) -> AuditSettings:
    """The audit sensor's ``VISIBILITY_AUDIT_*`` settings (defaults where unset)."""
    return _load(AuditSettings, env)
