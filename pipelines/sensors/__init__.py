"""Sensors: URL audits and competitor history backfills (see docs/SENSORS.md)."""

from __future__ import annotations

from typing import Any

from dagster import SensorDefinition

from pipelines.sensors.audits import AuditSensorSettings, audit_sensor
from pipelines.sensors.competitor_history import competitor_history_sensor

all_sensors: list[SensorDefinition] = [audit_sensor, competitor_history_sensor]


def sensor_resources() -> dict[str, Any]:
    """Resources of the sensors, read from the environment (``VISIBILITY_AUDIT_*``)."""
    return {"audit_settings": AuditSensorSettings.from_env()}
