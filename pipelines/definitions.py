"""The Dagster code location: ``dagster dev -w workspace.yaml`` (or ``-m pipelines.definitions``).

Resources: ``api`` (key from the ``VISIBILITY_API_KEY`` environment variable, never in config or
logs) and ``warehouse`` (engine chosen by the ``VISIBILITY_WAREHOUSE`` URL). Sensors and asset
checks come from ``pipelines/sensors`` and ``assets/checks.py`` (their own modules).
"""

from __future__ import annotations

import os
from typing import Any

from dagster import Definitions, EnvVar

from assets.audits import audit_assets, audit_landing_job
from assets.checks import all_checks, with_freshness_policies
from assets.facts import fact_assets
from assets.snapshots import snapshot_assets
from assets.trends import trend_assets
from pipelines.config import Settings, load_settings
from pipelines.jobs import all_jobs
from pipelines.schedules import all_schedules
from pipelines.sensors import all_sensors, sensor_resources
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.resource import WarehouseResource

all_assets = [*snapshot_assets, *fact_assets, *trend_assets]


def _from_env(name: str, value: str | None) -> Any:
    """An ``EnvVar`` when the value came from the environment, so the UI shows the name, not a
    URL that may hold a password; the plain value otherwise (tests, the demo)."""
    return EnvVar(name) if value is None or os.environ.get(name, "").strip() == value else value


def build_resources(settings: Settings) -> dict[str, Any]:
    """``api`` and ``warehouse`` from the settings; the key is an EnvVar, resolved only inside runs."""
    return {
        "api": VisibilityAPIResource(
            api_url=_from_env("VISIBILITY_API_URL", settings.api_url),
            api_key=EnvVar("VISIBILITY_API_KEY"),
        ),
        "warehouse": WarehouseResource(
            url=_from_env("VISIBILITY_WAREHOUSE", settings.warehouse_url), schema_name=settings.schema_name
        ),
    }


def build_definitions(settings: Settings | None = None) -> Definitions:
    settings = settings or load_settings()
    return Definitions(
        assets=[*with_freshness_policies(all_assets), *audit_assets],
        asset_checks=all_checks,
        jobs=[*all_jobs, audit_landing_job],
        schedules=all_schedules,
        sensors=all_sensors,
        resources={**build_resources(settings), **sensor_resources()},
    )


defs = build_definitions()
