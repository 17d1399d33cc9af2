"""The Dagster code location: ``dagster dev -w workspace.yaml`` (or ``-m pipelines.definitions``).

Resources: ``api`` (key from the ``VISIBILITY_API_KEY`` environment variable, never in config or
logs) and ``warehouse`` (engine chosen by the ``VISIBILITY_WAREHOUSE`` URL). Sensors and asset
checks come from ``pipelines/sensors`` and ``assets/checks.py`` (their own modules).
"""

from __future__ import annotations

from dagster import Definitions

from assets.audits import audit_assets, audit_landing_job
from assets.checks import all_checks, with_freshness_policies
from assets.facts import fact_assets
from assets.snapshots import snapshot_assets
from assets.trends import trend_assets
from pipelines.config import Settings, load_settings
from pipelines.jobs import DEFAULT_EXECUTOR, all_jobs
from pipelines.resources import build_resources
from pipelines.schedules import all_schedules
from pipelines.sensors import all_sensors, sensor_resources

all_assets = [*snapshot_assets, *fact_assets, *trend_assets]

__all__ = ["all_assets", "build_definitions", "build_resources", "defs"]


def build_definitions(settings: Settings | None = None) -> Definitions:
    """Everything ``dagster dev`` loads; a bad setting (``VISIBILITY_AUDIT_*`` too) fails the load."""
    settings = settings or load_settings()
    return Definitions(
        assets=[*with_freshness_policies(all_assets), *audit_assets],
        asset_checks=all_checks,
        jobs=[*all_jobs, audit_landing_job],
        schedules=all_schedules,
        sensors=all_sensors,
        resources={**build_resources(settings), **sensor_resources()},
        executor=DEFAULT_EXECUTOR,
    )


defs = build_definitions()
