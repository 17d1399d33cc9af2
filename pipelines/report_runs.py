"""The report's job, and the sensor that launches it after each successful sync.

The sensor requests one report run per successful ``visibility_sync`` run, whoever launched it: the
schedule, the UI, or ``visibility-sync run`` with ``DAGSTER_HOME`` set (those runs come from no code
location, so the sensor watches every location's runs and picks the sync job by name).
"""

from __future__ import annotations

from dagster import (
    AssetSelection,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunStatusSensorContext,
    SkipReason,
    define_asset_job,
    run_status_sensor,
)

from assets.report import REPORT_JOB, visibility_report
from pipelines.jobs import SYNC_JOB

report_job = define_asset_job(
    REPORT_JOB,
    selection=AssetSelection.assets(visibility_report),
    description="Draws the visual report from the warehouse; launched after each successful sync.",
)


@run_status_sensor(
    name="visibility_report_after_sync",
    run_status=DagsterRunStatus.SUCCESS,
    monitor_all_code_locations=True,
    request_job=report_job,
    default_status=DefaultSensorStatus.RUNNING,
    description=f"Requests a `{REPORT_JOB}` run after each successful `{SYNC_JOB}` run (schedule, UI "
    "or `visibility-sync run` recorded in DAGSTER_HOME).",
)
def report_after_sync(context: RunStatusSensorContext) -> RunRequest | SkipReason:
    run = context.dagster_run
    if run.job_name != SYNC_JOB:
        return SkipReason(f"run {run.run_id} is a {run.job_name} run, not {SYNC_JOB}")
    return RunRequest(run_key=f"after-{run.run_id}", tags={"visibility/after_sync_run": run.run_id})
