"""The daily schedule: one ``visibility_sync`` run of yesterday plus the lookback days (the service
restates recent days), every engine and the ``all`` rollup as one single-run range: the run
``visibility-sync run`` makes. Times are UTC.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from dagster import RunRequest, ScheduleDefinition, ScheduleEvaluationContext, SkipReason, schedule

from assets.dagster_tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from assets.partitions import partition_key
from pipelines.jobs import DAILY_JOB, SYNC_JOB, sync_job
from resources.api.endpoints import ENGINES_WITH_ALL
from settings import PartitionSettings, sync_window

DAILY_CRON = "0 3 * * *"


def range_tags(first: dt.date, last: dt.date, engines: tuple[str, ...]) -> dict[str, str]:
    """Run tags of a single-run range over ``[first, last]`` x every engine (as a UI backfill)."""
    return {
        ASSET_PARTITION_RANGE_START_TAG: str(partition_key(first, engines[0])),
        ASSET_PARTITION_RANGE_END_TAG: str(partition_key(last, engines[-1])),
    }


def sync_runs(
    first: dt.date, last: dt.date, spans: Sequence[tuple[str, str]]
) -> list[tuple[str, dict[str, str]]]:
    """Job and range tags of each run of a sync of ``[first, last]`` x engine ``spans``
    (:func:`~resources.api.endpoints.engine_groups`): the whole sync over the first span, the date x
    engine tables alone (``visibility_daily``) over each other one (the snapshots are landed once)."""
    return [
        (SYNC_JOB if index == 0 else DAILY_JOB, range_tags(first, last, span))
        for index, span in enumerate(spans)
    ]


def daily_sync_schedule(settings: PartitionSettings) -> ScheduleDefinition:
    """The ``daily_sync`` schedule over the settings' lookback, from their first day."""

    @schedule(job=sync_job, cron_schedule=DAILY_CRON, execution_timezone="UTC", name="daily_sync")
    def daily_sync(context: ScheduleEvaluationContext) -> RunRequest | SkipReason:
        """Snapshots, then every date x engine table of yesterday plus the lookback days."""
        today = context.scheduled_execution_time.date()
        window = sync_window(today, settings.lookback_days, settings.start_date)
        if window is None:
            return SkipReason("no partition yet: VISIBILITY_START_DATE is today or later")
        first, last = window
        return RunRequest(
            run_key=today.isoformat(),
            tags={**range_tags(first, last, ENGINES_WITH_ALL), "visibility/window": f"{first}..{last}"},
        )

    return daily_sync
