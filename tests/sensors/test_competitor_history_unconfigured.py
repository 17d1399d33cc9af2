"""The competitor history sensor of the code location ``dagster dev`` loads without API settings: each
tick skips, naming the missing variable, instead of failing in Dagster's resource set-up (a config
traceback in the daemon's log every tick)."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance, SensorResult, build_sensor_context

from pipelines.definitions import build_definitions
from pipelines.sensors.competitor_history import HISTORY_SENSOR_NAME
from resources.api.config import KEY_SETTING, URL_SETTING
from sandbox.testing import SandboxHandle
from settings import load_settings


def tick_as_the_daemon(instance: DagsterInstance, cursor: str | None) -> SensorResult:
    """One tick of the code location's sensor, with the resources the daemon builds for it: the
    location's top-level resources the sensor requires (``get_external_sensor_execution``)."""
    definitions = build_definitions(load_settings())
    sensor = definitions.resolve_sensor_def(HISTORY_SENSOR_NAME)
    resources = {k: v for k, v in (definitions.resources or {}).items() if k in sensor.required_resource_keys}
    result = sensor(build_sensor_context(instance=instance, cursor=cursor, resources=resources))
    assert isinstance(result, SensorResult)
    return result


@pytest.mark.parametrize(
    ("unset", "named"),
    [((URL_SETTING, KEY_SETTING), URL_SETTING), ((KEY_SETTING,), KEY_SETTING)],
    ids=["no URL and no key", "no key"],
)
def test_without_api_settings_each_tick_skips_naming_the_missing_variable(
    instance: DagsterInstance,
    sandbox: SandboxHandle,
    monkeypatch: pytest.MonkeyPatch,
    unset: tuple[str, ...],
    named: str,
) -> None:
    monkeypatch.setenv(URL_SETTING, sandbox.url)
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    before = sandbox.stats()

    first = tick_as_the_daemon(instance, None)
    again = tick_as_the_daemon(instance, "kept")

    for result in (first, again):
        assert result.run_requests == [] and result.skip_reason is not None
        message = result.skip_reason.skip_message or ""
        assert named in message and "not configured" in message, message
    assert again.cursor == "kept"  # what the sensor knew stays for the tick that can list competitors
    assert sandbox.stats() == before  # not one request


def test_with_api_settings_the_same_tick_lists_competitors(
    instance: DagsterInstance, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_SETTING, sandbox.url)
    monkeypatch.setenv(KEY_SETTING, sandbox.keys["workspace"])

    result = tick_as_the_daemon(instance, None)

    assert result.skip_reason is not None
    assert "baseline taken" in (result.skip_reason.skip_message or "")
    assert result.cursor  # the competitors it saw, for the next tick
