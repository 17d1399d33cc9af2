"""Schedules: snapshots first, then the daily sync of yesterday plus the lookback days.

The service restates recent days, so each daily run re-fetches the newest partition and the
``VISIBILITY_LOOKBACK_DAYS`` before it, as ONE single-run range (the widest API windows), which
replaces those days' rows. Times are UTC.
"""

from __future__ import annotations

import datetime as dt

from dagster import RunRequest, ScheduleDefinition, ScheduleEvaluationContext, SkipReason, schedule
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from assets.partitions import ENGINES, ENGINES_WITH_ALL, partition_key
from pipelines.config import lookback_days_from_env, start_date_from_env
from pipelines.jobs import daily_job, rollup_job, snapshot_job

SNAPSHOT_CRON = "30 2 * * *"
DAILY_CRON = "0 3 * * *"


def sync_window(today: dt.date, lookback_days: int, first_day: dt.date) -> tuple[dt.date, dt.date] | None:
    """Dates to (re)fetch, inclusive: yesterday and ``lookback_days`` before it, from ``first_day``."""
    newest = today - dt.timedelta(days=1)
    oldest = max(first_day, newest - dt.timedelta(days=lookback_days))
    return (oldest, newest) if oldest <= newest else None


def range_tags(first: dt.date, last: dt.date, engines: tuple[str, ...]) -> dict[str, str]:
    """Run tags of a single-run range over ``[first, last]`` x every engine (as a UI backfill)."""
    return {
        ASSET_PARTITION_RANGE_START_TAG: str(partition_key(first, engines[0])),
        ASSET_PARTITION_RANGE_END_TAG: str(partition_key(last, engines[-1])),
    }


def _daily_request(context: ScheduleEvaluationContext, engines: tuple[str, ...]) -> RunRequest | SkipReason:
    today = context.scheduled_execution_time.date()
    window = sync_window(today, lookback_days_from_env(), start_date_from_env())
    if window is None:
        return SkipReason("no partition yet: VISIBILITY_START_DATE is today or later")
    first, last = window
    return RunRequest(
        run_key=f"{today.isoformat()}",
        tags={**range_tags(first, last, engines), "visibility/window": f"{first}..{last}"},
    )


@schedule(job=daily_job, cron_schedule=DAILY_CRON, execution_timezone="UTC", name="daily_sync")
def daily_sync(context: ScheduleEvaluationContext) -> RunRequest | SkipReason:
    """Mentions and answers of yesterday plus the lookback days."""
    return _daily_request(context, ENGINES)


@schedule(job=rollup_job, cron_schedule=DAILY_CRON, execution_timezone="UTC", name="daily_rollups_sync")
def daily_rollups_sync(context: ScheduleEvaluationContext) -> RunRequest | SkipReason:
    """Cited pages, citation and competitor trends of yesterday plus the lookback days, `all` included."""
    return _daily_request(context, ENGINES_WITH_ALL)


snapshot_refresh = ScheduleDefinition(
    name="snapshot_refresh",
    job=snapshot_job,
    cron_schedule=SNAPSHOT_CRON,
    execution_timezone="UTC",
    description="Brands, topics, prompts, tracked competitors and generations, before the daily sync.",
)

all_schedules = [snapshot_refresh, daily_sync, daily_rollups_sync]
