"""The Dagster code location: ``dagster dev -w workspace.yaml`` (or ``-m pipelines.definitions``)."""

from __future__ import annotations

from dagster import Definitions

from assets.audits import audit_assets, audit_landing_job
from assets.checks import audit_checks
from assets.visibility_report import report_assets
from pipelines.operation_jobs import operation_jobs
from pipelines.orphans import orphaned_runs_sensor
from pipelines.report_sensor import report_after_sync, report_job
from pipelines.schedules import daily_sync_schedule
from pipelines.sensors.audits import AuditSensorSettings, audit_sensor
from pipelines.sensors.competitor_history import competitor_history_sensor
from pipelines.sync_now import sync_now_definitions
from pipelines.syncs import all_assets, sync_definitions, with_warehouse_kind
from settings import Settings, load_settings

__all__ = ["all_assets", "build_definitions", "defs"]


def build_definitions(settings: Settings | None = None) -> Definitions:
    """Everything ``dagster dev`` loads; a bad setting (``VISIBILITY_AUDIT_*`` too) fails the load."""
    settings = settings or load_settings()
    sync_now_job, sync_now_sensor = sync_now_definitions(settings)
    return Definitions.merge(
        sync_definitions(settings),
        Definitions(
            assets=[*with_warehouse_kind(audit_assets, settings), *report_assets],
            asset_checks=audit_checks,
            jobs=[audit_landing_job, report_job, *operation_jobs, sync_now_job],
            schedules=[daily_sync_schedule(settings)],
            sensors=[
                audit_sensor,
                competitor_history_sensor,
                report_after_sync,
                orphaned_runs_sensor,
                sync_now_sensor,
            ],
            resources={"audit_settings": AuditSensorSettings.from_env()},  # VISIBILITY_AUDIT_*
        ),
    )


defs = build_definitions()
