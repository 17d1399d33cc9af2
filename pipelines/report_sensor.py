"""The report's job, and the sensor that refreshes the report after the daily tables land.

One report run after each successful run that landed daily tables, whoever launched it (the whole
instance is read: command-line runs too); the runs of one backfill refresh it once, after its end.
"""

from __future__ import annotations

import datetime as dt

from dagster import (
    AssetSelection,
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    sensor,
)
from pydantic import BaseModel

from assets.dagster_tags import BACKFILL_ENDED_STATUSES, BACKFILL_ID_TAG
from assets.visibility_report import REPORT_JOB, visibility_report
from sync.catalog import DAILY

SENSOR_NAME = "visibility_report_after_sync"
DAILY_TABLES = frozenset(t.spec.name for t in DAILY)
#: Runs read per tick; more wait for the next tick (the cursor keeps its place).
RUNS_PER_TICK = 100

report_job = define_asset_job(
    REPORT_JOB,
    selection=AssetSelection.assets(visibility_report),
    description="Draws the visual report from the warehouse; launched after each sync that landed "
    "daily tables (after the last run of a backfill).",
)


class ReportCursor(BaseModel):
    """Where the sensor is: runs updated after ``after`` (a timestamp) not yet read; backfills whose
    runs landed daily tables, waiting for their end."""

    after: float
    backfills: list[str] = []


def landed_daily_tables(instance: DagsterInstance, run_id: str) -> bool:
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
    materialized = (r.event_log_entry.asset_materialization for r in records)
    return any(m is not None and m.asset_key.path[-1] in DAILY_TABLES for m in materialized)


def report_requests(instance: DagsterInstance, cursor: ReportCursor) -> tuple[list[RunRequest], ReportCursor]:
    """The report runs due since ``cursor``, and the cursor after them (pure but for the reads)."""
    requests: list[RunRequest] = []
    pending = list(cursor.backfills)
    after = cursor.after
    records = instance.get_run_records(
        filters=RunsFilter(
            statuses=[DagsterRunStatus.SUCCESS],
            updated_after=dt.datetime.fromtimestamp(cursor.after, dt.UTC),
        ),
        limit=RUNS_PER_TICK,
        order_by="update_timestamp",
        ascending=True,
    )
    for record in records:
        after = max(after, record.update_timestamp.timestamp())
        run = record.dagster_run
        if run.job_name == REPORT_JOB or not landed_daily_tables(instance, run.run_id):
            continue
        backfill_id = run.tags.get(BACKFILL_ID_TAG)
        if backfill_id:
            if backfill_id not in pending:
                pending.append(backfill_id)
            continue
        requests.append(
            RunRequest(run_key=f"after-{run.run_id}", tags={"visibility/after_sync_run": run.run_id})
        )
    for backfill_id in list(pending):
        backfill = instance.get_backfill(backfill_id)
        if backfill is not None and backfill.status.value not in BACKFILL_ENDED_STATUSES:
            continue  # runs may still come: wait for the backfill's end
        pending.remove(backfill_id)
        if backfill is not None:
            requests.append(
                RunRequest(
                    run_key=f"after-backfill-{backfill_id}", tags={"visibility/after_backfill": backfill_id}
                )
            )
    return requests, ReportCursor(after=after, backfills=pending)


@sensor(
    name=SENSOR_NAME,
    job=report_job,
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description=f"Refreshes `{REPORT_JOB}` after each successful run that landed daily tables (schedule, "
    "UI, job page, `visibility-sync run` recorded in DAGSTER_HOME); once per backfill, after its last run.",
)
def report_after_sync(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    try:
        cursor = ReportCursor.model_validate_json(context.cursor or "")
    except ValueError:  # first tick, or a cursor in another shape: from now on
        context.update_cursor(ReportCursor(after=dt.datetime.now(dt.UTC).timestamp()).model_dump_json())
        return SkipReason("started: watching runs from now on")
    requests, cursor = report_requests(context.instance, cursor)
    waiting = f"; waiting for backfills {', '.join(cursor.backfills)} to end" if cursor.backfills else ""
    if not requests:
        return SensorResult(
            skip_reason=f"no new run landed daily tables{waiting}", cursor=cursor.model_dump_json()
        )
    return SensorResult(run_requests=requests, cursor=cursor.model_dump_json())
