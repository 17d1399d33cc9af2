"""The settings module: one ConfigError with today's one-line messages, one loopback rule, defaults,
the environment or a mapping read the same way, and a repr that hides the key and passwords."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from resources.api.client import VisibilityClient
from resources.api.config import MIN_KEY_CHARS, validate_api_key, validate_base_url
from resources.api.errors import ConfigurationError
from settings import (
    DEFAULT_HISTORY_DAYS,
    AuditSettings,
    ConfigError,
    Settings,
    load_audit_settings,
    load_partition_settings,
    load_settings,
)

KEY = "vsk_0f9e8d7c6b5a49382716"
MESSAGES = [
    (
        "VISIBILITY_API_URL",
        "http://api.example.com",
        "VISIBILITY_API_URL must use https:// (got http:// for host 'api.example.com'); plain http is "
        "allowed only on loopback (127.0.0.0/8, ::1, localhost), because the key is sent with every request",
    ),
    (
        "VISIBILITY_API_URL",
        "ftp://api.example.com",
        "VISIBILITY_API_URL must be an absolute http(s) URL such as https://api.example.com "
        "(got scheme 'ftp')",
    ),
    (
        "VISIBILITY_API_KEY",
        "Bearer vsk_abc",
        "VISIBILITY_API_KEY must be the key alone, without the 'Bearer ' prefix",
    ),
    (
        "VISIBILITY_WAREHOUSE",
        "mysql://db.internal/analytics",
        "VISIBILITY_WAREHOUSE must start with duckdb:///, postgresql:// or bigquery://, got scheme 'mysql'",
    ),
    (
        "VISIBILITY_WAREHOUSE",
        "duckdb://x.duckdb",
        "VISIBILITY_WAREHOUSE: 'duckdb://x.duckdb' names no DuckDB file (expected duckdb:///path/file.duckdb)",
    ),
    (
        "VISIBILITY_WAREHOUSE",
        "bigquery://project",
        "VISIBILITY_WAREHOUSE: 'bigquery://project' must be bigquery://project/dataset",
    ),
    (
        "VISIBILITY_SCHEMA",
        "9lives",
        "VISIBILITY_SCHEMA: '9lives' is not a valid schema name (letters, digits and underscores, not "
        "starting with a digit, at most 63 characters)",
    ),
    (
        "VISIBILITY_START_DATE",
        "01/02/2026",
        "VISIBILITY_START_DATE must be a date YYYY-MM-DD, got '01/02/2026'",
    ),
    (
        "VISIBILITY_REQUEST_BUDGET_FLOOR",
        "10",
        "VISIBILITY_REQUEST_BUDGET_FLOOR must be between 100 and 100000000, got '10'",
    ),
    (
        "VISIBILITY_REQUEST_BUDGET_FACTOR",
        "lots",
        "VISIBILITY_REQUEST_BUDGET_FACTOR must be a whole number, got 'lots'",
    ),
    (
        "VISIBILITY_REQUEST_BUDGET_FACTOR",
        "0",
        "VISIBILITY_REQUEST_BUDGET_FACTOR must be between 1 and 100000, got '0'",
    ),
    (
        "VISIBILITY_MAX_RESPONSE_BYTES",
        "1048575",
        "VISIBILITY_MAX_RESPONSE_BYTES must be between 1048576 and 4294967296, got '1048575'",
    ),
    (
        "VISIBILITY_MAX_NEW_COLUMNS",
        "1001",
        "VISIBILITY_MAX_NEW_COLUMNS must be between 0 and 1000, got '1001'",
    ),
    ("VISIBILITY_MAX_NEW_COLUMNS", "fifty", "VISIBILITY_MAX_NEW_COLUMNS must be a whole number, got 'fifty'"),
    ("VISIBILITY_LOOKBACK_DAYS", "three", "VISIBILITY_LOOKBACK_DAYS must be an integer, got 'three'"),
    ("VISIBILITY_LOOKBACK_DAYS", "366", "VISIBILITY_LOOKBACK_DAYS must be between 0 and 365, got '366'"),
    (
        "VISIBILITY_DUCKDB_MEMORY_LIMIT",
        "64",
        "VISIBILITY_DUCKDB_MEMORY_LIMIT: '64' is not a memory size such as 64MB or 1GiB "
        "(units: KB, MB, GB, TB, KiB ... TiB)",
    ),
    (
        "VISIBILITY_RETRY_DEADLINE_SECONDS",
        "soon",
        "VISIBILITY_RETRY_DEADLINE_SECONDS must be a number of seconds, got 'soon'",
    ),
    (
        "VISIBILITY_RETRY_DEADLINE_SECONDS",
        "0",
        "VISIBILITY_RETRY_DEADLINE_SECONDS must be between 1 and 86400 seconds, got '0'",
    ),
]
AUDIT_MESSAGES = [
    (
        "VISIBILITY_AUDITS_PER_DAY",
        "ten",
        "VISIBILITY_AUDITS_PER_DAY must be a whole number (at least 0), got 'ten'",
    ),
    (
        "VISIBILITY_AUDITS_PER_DAY",
        "-5",
        "VISIBILITY_AUDITS_PER_DAY must be a whole number of at least 0, got '-5'",
    ),
    (
        "VISIBILITY_AUDIT_DEADLINE_MINUTES",
        "0",
        "VISIBILITY_AUDIT_DEADLINE_MINUTES must be a number of at least 1, got '0'",
    ),
    (
        "VISIBILITY_AUDIT_REAUDIT_DAYS",
        "nan",
        "VISIBILITY_AUDIT_REAUDIT_DAYS must be a number (at least 0), got 'nan'",
    ),
    (
        "VISIBILITY_AUDIT_NEW_PAGE_DAYS",
        "1.5",
        "VISIBILITY_AUDIT_NEW_PAGE_DAYS must be a whole number (at least 0), got '1.5'",
    ),
]


@pytest.mark.parametrize(
    ("load", "variable", "value", "message"),
    [(load_settings, *case) for case in MESSAGES] + [(load_audit_settings, *case) for case in AUDIT_MESSAGES],
)
def test_each_bad_setting_is_one_config_error_with_the_message_naming_its_variable(
    load: Callable[[dict[str, str]], object], variable: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load({variable: value})
    error = caught.value
    assert isinstance(error, ValueError) and str(error) == message
    assert "\n" not in str(error) and "validation error" not in str(error)
    # pydantic's report (it quotes the input, perhaps the key) is neither the cause nor the context
    assert error.__cause__ is None and not isinstance(error.__context__, ValidationError)


@pytest.mark.parametrize("ahead", [False, True])
def test_a_start_date_outside_the_services_possible_history_is_refused(ahead: bool) -> None:
    latest = dt.date.today() + dt.timedelta(days=366)
    for value in (
        [str(latest + dt.timedelta(days=1)), "9999-12-31"] if ahead else ["0001-01-01", "2022-11-29"]
    ):
        with pytest.raises(ConfigError) as caught:
            load_partition_settings({"VISIBILITY_START_DATE": value})
        assert str(caught.value) == (
            "VISIBILITY_START_DATE must be between 2022-11-30 (the earliest day AI answer engines have "
            f"history) and {latest} (a year ahead: the schedule waits for it), got '{value}'"
        )
    for edge in (dt.date(2022, 11, 30), latest):
        settings = load_partition_settings({"VISIBILITY_START_DATE": edge.isoformat()})
        assert settings.start_date == edge


def test_a_bad_audit_setting_does_not_stop_a_sync_and_a_bad_sync_setting_not_the_partitions() -> None:
    assert load_settings({"VISIBILITY_AUDITS_PER_DAY": "ten"}).lookback_days == 3
    assert load_partition_settings({"VISIBILITY_API_URL": "ftp://x"}).lookback_days == 3
    with pytest.raises(ConfigError, match="VISIBILITY_API_URL"):
        load_settings({"VISIBILITY_API_URL": "ftp://x"})


def test_missing_api_settings_are_named_when_a_sync_needs_them() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({}).require_api()
    assert str(caught.value) == "VISIBILITY_API_URL is not set (the service's base URL, e.g. https://...)"
    with pytest.raises(ConfigError) as caught:
        load_settings({"VISIBILITY_API_URL": "https://api.example.com"}).require_api()
    assert str(caught.value) == "VISIBILITY_API_KEY is not set (a workspace or brand-scoped API key)"


def test_unset_or_blank_settings_take_their_defaults() -> None:
    today = dt.date.today()
    blank = {name: "  " for name, _, _ in MESSAGES}
    for env in ({}, blank):
        settings = load_settings(env)
        assert (settings.api_url, settings.api_key) == (None, None)
        assert settings.warehouse_url == "duckdb:///data/visibility.duckdb"
        assert settings.schema_name == "visibility"
        assert settings.start_date == today - dt.timedelta(days=DEFAULT_HISTORY_DAYS)
        assert (settings.lookback_days, settings.duckdb_memory_limit) == (3, "64MB")
        assert settings.retry_deadline_seconds == 300.0
    audit = load_audit_settings({})
    assert (audit.urls, audit.audits_per_day, audit.reaudit_interval_days) == ([], 10, 30.0)
    assert (audit.deadline_minutes, audit.new_page_window_days) == (30.0, 7)


def test_values_are_normalized_once_and_keep_the_variable_names() -> None:
    settings = load_settings(
        {
            "VISIBILITY_API_URL": " https://api.example.com/v1/ ",
            "VISIBILITY_API_KEY": f" {KEY}\n",
            "VISIBILITY_WAREHOUSE": " bigquery://proj/ds ",
            "VISIBILITY_SCHEMA": "analytics",
            "VISIBILITY_START_DATE": "2026-01-02",
            "VISIBILITY_LOOKBACK_DAYS": "0",
            "VISIBILITY_DUCKDB_MEMORY_LIMIT": " 1GiB ",
            "VISIBILITY_RETRY_DEADLINE_SECONDS": "45",
        }
    )
    assert settings.require_api() == ("https://api.example.com", KEY)
    assert (settings.warehouse_url, settings.schema_name) == ("bigquery://proj/ds", "analytics")
    assert (settings.start_date, settings.lookback_days) == (dt.date(2026, 1, 2), 0)
    assert (settings.duckdb_memory_limit, settings.retry_deadline_seconds) == ("1GiB", 45.0)
    audit = load_audit_settings({"VISIBILITY_AUDIT_URLS": "https://a.com/x, https://a.com/y\nhttps://b.io/"})
    assert audit.urls == ["https://a.com/x", "https://a.com/y", "https://b.io/"]


def test_the_environment_and_a_mapping_are_read_alike_and_a_mapping_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = {
        "VISIBILITY_API_URL": "https://api.example.com",
        "VISIBILITY_API_KEY": KEY,
        "VISIBILITY_WAREHOUSE": "duckdb:///tmp/x.duckdb",
        "VISIBILITY_LOOKBACK_DAYS": "7",
        "VISIBILITY_AUDITS_PER_DAY": "2",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    assert load_settings() == load_settings(values)
    assert load_audit_settings() == load_audit_settings(values)
    assert load_settings().lookback_days == 7
    monkeypatch.setenv("VISIBILITY_SCHEMA", "9lives")  # a bad value in the environment...
    assert load_settings({}).schema_name == "visibility"  # ...is not read when a mapping is given
    assert load_settings(overrides={"VISIBILITY_SCHEMA": "fine"}).schema_name == "fine"
    with pytest.raises(ConfigError, match="VISIBILITY_SCHEMA"):
        load_settings()


def test_settings_are_frozen_and_refuse_a_field_name_for_a_variable_name() -> None:
    settings = load_settings({})
    with pytest.raises(ValidationError):
        settings.lookback_days = 9  # type: ignore[misc]
    with pytest.raises(ConfigError, match="pass it as VISIBILITY_WAREHOUSE"):
        Settings(warehouse_url="duckdb:///elsewhere.duckdb")
    assert isinstance(load_audit_settings({}), AuditSettings)


@pytest.mark.parametrize(
    "url", ["http://localhost.", "http://LOCALHOST.:8080/v1", "http://127.0.0.1:9", "http://[::1]:9"]
)
def test_loopback_is_one_rule_for_the_settings_and_the_client(url: str) -> None:
    settings = load_settings({"VISIBILITY_API_URL": url, "VISIBILITY_API_KEY": KEY})
    assert settings.api_url == validate_base_url(url)
    with VisibilityClient(url, KEY) as client:
        assert client.base_url == settings.api_url


@pytest.mark.parametrize("url", ["http://localhost.evil.com", "http://127.0.0.1.nip.io", "http://10.0.0.1"])
def test_a_remote_host_over_plain_http_is_refused_by_the_settings_and_the_client(url: str) -> None:
    with pytest.raises(ConfigError, match="must use https://"):
        load_settings({"VISIBILITY_API_URL": url})
    with pytest.raises(ConfigurationError, match="must use https://"):
        VisibilityClient(url, KEY)


def test_the_sandbox_host_check_is_the_same_loopback_rule() -> None:
    import pipelines.cli
    import pipelines.cli_output
    import resources.api.config

    assert pipelines.cli.is_loopback_host is resources.api.config.is_loopback_host
    assert pipelines.cli.main(["sandbox", "--host", "example.com"]) == pipelines.cli_output.EXIT_CONFIG


def test_repr_and_str_hide_the_key_and_a_warehouse_password() -> None:
    settings = load_settings(
        {
            "VISIBILITY_API_URL": "https://api.example.com",
            "VISIBILITY_API_KEY": KEY,
            "VISIBILITY_WAREHOUSE": "postgresql://loader:s3cr%2Ft@db.internal:5432/analytics",
        }
    )
    for text in (repr(settings), str(settings), f"{settings!r}"):
        assert KEY not in text and "s3cr" not in text
        assert "postgresql://loader:***@db.internal:5432/analytics" in text
        assert "https://api.example.com" in text and "retry_deadline_seconds=300.0" in text
    assert settings.warehouse_url.startswith("postgresql://loader:s3cr")  # the value itself is intact


def test_a_bad_key_is_reported_without_echoing_it() -> None:
    key = f"{KEY} with blanks"
    with pytest.raises(ConfigError) as caught:
        load_settings({"VISIBILITY_API_KEY": key})
    assert "VISIBILITY_API_KEY" in str(caught.value) and KEY not in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("VISIBILITY_LOOKBACK_DAYS", "\u0661\u0662"),  # Arabic-Indic 12
        ("VISIBILITY_LOOKBACK_DAYS", "1_0"),
        ("VISIBILITY_RETRY_DEADLINE_SECONDS", "\u0661\u0662"),
        ("VISIBILITY_RETRY_DEADLINE_SECONDS", "1e3"),
        ("VISIBILITY_RETRY_DEADLINE_SECONDS", "1_000"),
        ("VISIBILITY_REQUEST_BUDGET_FACTOR", "\u0661\u0662"),
        ("VISIBILITY_REQUEST_BUDGET_FACTOR", "1_000"),
        ("VISIBILITY_REQUEST_BUDGET_FLOOR", "1_000"),
        ("VISIBILITY_MAX_NEW_COLUMNS", "\u0665\u0660"),
        ("VISIBILITY_MAX_NEW_COLUMNS", "1e2"),
        ("VISIBILITY_DUCKDB_MEMORY_LIMIT", "\u0666\u0664MB"),
        ("VISIBILITY_AUDITS_PER_DAY", "\u0661\u0662"),
        ("VISIBILITY_AUDIT_DEADLINE_MINUTES", "1e3"),
        ("VISIBILITY_AUDIT_REAUDIT_DAYS", "inf"),
    ],
)
def test_a_number_setting_takes_ascii_digits_only_without_separators_or_exponents(
    variable: str, value: str
) -> None:
    load = load_audit_settings if "AUDIT" in variable else load_settings
    with pytest.raises(ConfigError) as caught:
        load({variable: value})
    assert str(caught.value).startswith(variable)


@pytest.mark.parametrize(
    ("model", "load"),
    [
        (Settings, load_settings),
        (AuditSettings, load_audit_settings),
    ],
)
def test_an_empty_value_means_unset_for_every_setting(model: type, load: Callable[..., object]) -> None:
    variables = {model.variable(name) for name in model.model_fields}
    assert load({v: "" for v in variables}) == load({})


def test_a_key_shorter_than_any_real_key_is_refused_by_the_settings_and_the_client() -> None:
    short = "vsk_0f9e8d7c6b5"  # 15 characters
    with pytest.raises(ConfigError) as caught:
        load_settings({"VISIBILITY_API_KEY": short})
    assert str(caught.value).startswith("VISIBILITY_API_KEY is too short") and short not in str(caught.value)
    with pytest.raises(ConfigurationError, match="too short"):
        VisibilityClient("https://api.example.com", "k")
    assert validate_api_key("k" * MIN_KEY_CHARS) == "k" * MIN_KEY_CHARS


@pytest.mark.parametrize(
    ("variable", "text", "field", "value"),
    [
        ("VISIBILITY_LOOKBACK_DAYS", "0", "lookback_days", 0),  # each bound is inclusive
        ("VISIBILITY_LOOKBACK_DAYS", "365", "lookback_days", 365),
        ("VISIBILITY_RETRY_DEADLINE_SECONDS", "1", "retry_deadline_seconds", 1.0),
        ("VISIBILITY_RETRY_DEADLINE_SECONDS", "86400", "retry_deadline_seconds", 86400.0),
        ("VISIBILITY_RETRY_DEADLINE_SECONDS", "2.5", "retry_deadline_seconds", 2.5),
        ("VISIBILITY_REQUEST_BUDGET_FLOOR", "100", "request_budget_floor", 100),
        ("VISIBILITY_REQUEST_BUDGET_FLOOR", "100000000", "request_budget_floor", 100_000_000),
        ("VISIBILITY_REQUEST_BUDGET_FLOOR", "+1000", "request_budget_floor", 1000),
        ("VISIBILITY_REQUEST_BUDGET_FACTOR", "1", "request_budget_factor", 1),
        ("VISIBILITY_REQUEST_BUDGET_FACTOR", "100000", "request_budget_factor", 100_000),
        ("VISIBILITY_MAX_RESPONSE_BYTES", "1048576", "max_response_bytes", 2**20),
        ("VISIBILITY_MAX_RESPONSE_BYTES", "4294967296", "max_response_bytes", 2**32),
        ("VISIBILITY_MAX_NEW_COLUMNS", "0", "max_new_columns", 0),
        ("VISIBILITY_MAX_NEW_COLUMNS", "1000", "max_new_columns", 1000),
        ("VISIBILITY_DUCKDB_MEMORY_LIMIT", "1.5GB", "duckdb_memory_limit", "1.5GB"),
        ("VISIBILITY_AUDIT_REAUDIT_DAYS", ".5", "reaudit_interval_days", 0.5),
    ],
)
def test_a_plain_number_within_its_bounds_is_taken(
    variable: str, text: str, field: str, value: object
) -> None:
    load = load_audit_settings if "AUDIT" in variable else load_settings
    assert getattr(load({variable: text}), field) == value


def test_the_body_cap_setting_bounds_what_the_sync_s_clients_read() -> None:
    from pipelines.resources import api_resource
    from resources.api.errors import ResponseShapeError
    from tests.api.proxies import fake_service

    page = {"data": [{"id": "b1", "name": "x" * 1_500_000}], "has_more": False, "next_cursor": None}
    with fake_service(lambda seen: (200, {}, page)) as service:
        environment = {"VISIBILITY_API_URL": service.url, "VISIBILITY_API_KEY": "vsk_" + "a1" * 16}
        access = load_settings(environment).api_access()
        with access.get_client() as api:
            assert len(list(api.list_brands())) == 1  # the default, 32 MiB
        capped = load_settings({**environment, "VISIBILITY_MAX_RESPONSE_BYTES": "1048576"})
        resource = api_resource(capped)
        with resource.get_client() as api, pytest.raises(ResponseShapeError, match="larger than 1048576"):
            list(api.list_brands())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("request_budget_floor", 99),
        ("request_budget_factor", 0),
        ("max_response_bytes", 2**32 + 1),
        ("max_new_columns", -1),
    ],
)
def test_the_api_resource_refuses_a_number_out_of_the_bounds_its_variable_has(field: str, value: int) -> None:
    from resources.api.resource import VisibilityAPIResource

    with pytest.raises(ValidationError, match=field):
        VisibilityAPIResource(api_url="https://api.example.com", api_key=KEY, **{field: value})
