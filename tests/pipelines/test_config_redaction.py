"""Settings are validated before the first request: errors name the variable, never echo the key or a
password, and state the bounds (lookback days, retry deadline)."""

from __future__ import annotations

import pytest

from settings import ConfigError, load_settings

KEY = "vsk_d26325e194ea80c4f2d86c45814c5d23"


@pytest.mark.parametrize(
    "url",
    [
        "http://svc:hunter2@api.example.com",  # plain http to a remote host
        "ftp://svc:hunter2@api.example.com",  # not http(s)
        "https://svc:hunter2@api.example.com",  # credentials in the URL at all
    ],
)
def test_a_bad_api_url_is_reported_without_its_password(url: str) -> None:
    with pytest.raises(ConfigError, match="VISIBILITY_API_URL") as caught:
        load_settings({"VISIBILITY_API_URL": url})
    assert "hunter2" not in str(caught.value)


def test_the_settings_repr_shows_neither_the_key_nor_a_warehouse_password() -> None:
    settings = load_settings(
        {
            "VISIBILITY_API_URL": "https://api.example.com",
            "VISIBILITY_API_KEY": KEY,
            "VISIBILITY_WAREHOUSE": "postgresql://loader:s3cr%2Ft@db.internal:5432/analytics",
        }
    )
    text = repr(settings)
    assert KEY not in text
    assert "s3cr" not in text
    assert "postgresql://loader:***@db.internal:5432/analytics" in text
    assert "https://api.example.com" in text


@pytest.mark.parametrize("key", ["vk_live_caf\u00e9_0123", "\u201cvk_live_0123\u201d", "vk_\u0430bc0123"])
def test_a_non_ascii_key_is_a_config_error_naming_the_setting_without_echoing_the_key(key: str) -> None:
    with pytest.raises(ConfigError, match="VISIBILITY_API_KEY") as caught:
        load_settings({"VISIBILITY_API_URL": "https://api.example.com", "VISIBILITY_API_KEY": key})
    assert "non-ASCII" in str(caught.value)
    assert key not in str(caught.value) and key.strip("\u201c\u201d") not in str(caught.value)


def test_the_client_refuses_a_non_ascii_key_before_any_request() -> None:
    from resources.api.client import VisibilityClient
    from resources.api.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="VISIBILITY_API_KEY"):
        VisibilityClient("https://api.example.com", "vk_live_caf\u00e9")


@pytest.mark.parametrize("value", ["100000000", "366", "-1", "three"])
def test_a_lookback_outside_0_to_365_days_is_refused_with_its_bounds(value: str) -> None:
    with pytest.raises(ConfigError, match="VISIBILITY_LOOKBACK_DAYS") as caught:
        load_settings({"VISIBILITY_LOOKBACK_DAYS": value})
    if value != "three":
        assert "between 0 and 365" in str(caught.value)


def test_lookback_bounds_are_inclusive() -> None:
    assert load_settings({"VISIBILITY_LOOKBACK_DAYS": "0"}).lookback_days == 0
    assert load_settings({"VISIBILITY_LOOKBACK_DAYS": "365"}).lookback_days == 365


@pytest.mark.parametrize("value", ["abc", "0", "0.5", "-5", "nan", "inf", "1e9"])
def test_a_bad_retry_deadline_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ConfigError, match="VISIBILITY_RETRY_DEADLINE_SECONDS"):
        load_settings({"VISIBILITY_RETRY_DEADLINE_SECONDS": value})


def test_the_retry_deadline_defaults_to_300_seconds_and_reaches_the_api_resource() -> None:
    from pipelines.resources import build_resources

    assert load_settings({}).retry_deadline_seconds == 300.0
    settings = load_settings(
        {
            "VISIBILITY_API_URL": "https://api.example.com",
            "VISIBILITY_API_KEY": KEY,
            "VISIBILITY_RETRY_DEADLINE_SECONDS": "45",
        }
    )
    assert settings.retry_deadline_seconds == 45.0 and "retry_deadline_seconds=45.0" in repr(settings)
    assert build_resources(settings)["api"].retry_deadline_seconds == 45.0


def test_the_resources_of_a_commands_own_runs_put_no_secret_in_the_job_snapshot() -> None:
    """``process_resources`` holds the key and the warehouse password in the objects, not in config:
    the resource snapshots Dagster stores with each run hold neither (nor does the resources' repr)."""
    from dagster import serialize_value

    # the resource snapshot Dagster stores with a run, built as it builds it: no public API returns it
    from dagster._core.snap.mode import build_resource_def_snap

    from pipelines.resources import api_resource, process_resources

    settings = load_settings(
        {
            "VISIBILITY_API_URL": "https://api.example.com",
            "VISIBILITY_API_KEY": KEY,
            "VISIBILITY_WAREHOUSE": "postgresql://loader:s3cret-pw@db.internal/analytics",
        }
    )
    api = api_resource(settings)
    resources = process_resources(settings, api)
    assert api.api_key == KEY and api.retry_deadline_seconds == settings.retry_deadline_seconds
    assert set(resources) >= {"api", "warehouse", "progress", "landed_tables_io_manager"}
    for name, definition in resources.items():
        stored = serialize_value(build_resource_def_snap(name, definition))
        assert KEY not in stored and "s3cret-pw" not in stored, name
    assert KEY not in repr(api) and "s3cret-pw" not in repr(resources)
