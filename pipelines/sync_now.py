"""``sync_now``: a sync of a window of days and engines, launched from the launchpad in one step.

A launchpad run of the partitioned job takes one partition, so the window rides on this small job;
on its success the ``visibility_sync_now`` sensor requests the ``visibility_sync`` run(s).

(No ``from __future__ import annotations`` here: Dagster reads the op's ``Config`` annotations as classes.)
"""

import datetime as dt
import enum
from typing import NamedTuple

from dagster import (
    Config,
    DagsterInstance,
    DagsterInvalidConfigError,
    DagsterRunStatus,
    DefaultSensorStatus,
    JobDefinition,
    OpExecutionContext,
    RunConfig,
    RunRequest,
    RunStatusSensorContext,
    SensorDefinition,
    SkipReason,
    config_mapping,
    job,
    op,
    run_status_sensor,
)
from pydantic import Field

from pipelines.jobs import daily_job, sync_job
from pipelines.schedules import sync_runs
from resources.api.endpoints import ENGINES_WITH_ALL, engine_groups
from settings import ConfigError, PartitionSettings, sync_window

SYNC_NOW_JOB = "sync_now"
SYNC_NOW_OP = "sync_now_window"
SYNC_NOW_SENSOR = "visibility_sync_now"
#: Tag of the runs a ``sync_now`` run requested: its run id.
SYNC_NOW_TAG = "visibility/sync_now_run"
#: The longest window one ``sync_now`` takes (a longer history is a backfill).
MAX_DAYS = 366
#: The engines as a config enum: the launchpad offers them and refuses any other before the launch.
Engine = enum.Enum("Engine", {engine: engine for engine in ENGINES_WITH_ALL})


class SyncNowConfig(Config):
    """The window to sync now; every field left out gives the daily schedule's window."""

    days: int | None = Field(
        default=None,
        description=f"Days to sync, ending on end_date (1 to {MAX_DAYS}). Left out: yesterday plus "
        "VISIBILITY_LOOKBACK_DAYS, the daily schedule's window.",
    )
    engines: list[Engine] | None = Field(
        default=None,
        description=f"Engines to sync, among {', '.join(ENGINES_WITH_ALL)} ('all' is the all-engine "
        "rollup). Left out: every one.",
    )
    end_date: str | None = Field(
        default=None,
        description="Last day to sync, YYYY-MM-DD (UTC), at most yesterday. Left out: yesterday.",
    )


class SyncNowWindow(NamedTuple):
    """The days ``[first, last]`` and engine spans of a ``sync_now`` run."""

    first: dt.date
    last: dt.date
    spans: list[tuple[str, str]]


def sync_now_window(config: SyncNowConfig, today: dt.date, settings: PartitionSettings) -> SyncNowWindow:
    """The window ``config`` asks for on ``today``, from the first partition on; a
    :class:`~settings.ConfigError` naming the field when a value is wrong."""
    yesterday = today - dt.timedelta(days=1)
    last = yesterday
    if config.end_date is not None:
        try:
            last = dt.date.fromisoformat(config.end_date.strip())
        except ValueError:
            raise ConfigError(
                f"sync_now end_date must be a date YYYY-MM-DD, got {config.end_date[:40]!r}"
            ) from None
        if last > yesterday:
            raise ConfigError(
                f"sync_now end_date {last} is after yesterday: the newest partition is {yesterday}"
            )
    days = settings.lookback_days + 1 if config.days is None else config.days
    if not 1 <= days <= MAX_DAYS:
        raise ConfigError(f"sync_now days must be from 1 to {MAX_DAYS}, got {days}")
    engines = list(ENGINES_WITH_ALL) if config.engines is None else [e.value for e in config.engines]
    if not engines:
        raise ConfigError(f"sync_now engines (none) unknown; use {', '.join(ENGINES_WITH_ALL)}")
    window = sync_window(last + dt.timedelta(days=1), days - 1, settings.start_date)
    if window is None:
        raise ConfigError(
            f"sync_now end_date {last} is before the first partition {settings.start_date}; "
            "set VISIBILITY_START_DATE earlier"
        )
    return SyncNowWindow(window[0], window[1], engine_groups(engines, ENGINES_WITH_ALL))


def run_day(instance: DagsterInstance, run_id: str) -> dt.date:
    """The UTC day the run was created: the ``today`` of its window."""
    record = instance.get_run_record_by_id(run_id)
    created = record.create_timestamp if record is not None else dt.datetime.now(dt.UTC)
    return created.astimezone(dt.UTC).date()


def sync_now_definitions(settings: PartitionSettings) -> tuple[JobDefinition, SensorDefinition]:
    """The ``sync_now`` job and the sensor that launches its sync runs, over the settings' partitions."""

    @op(name=SYNC_NOW_OP, description="Checks the window and records the sync runs it asks for.")
    def check_window(context: OpExecutionContext, config: SyncNowConfig) -> None:
        window = sync_now_window(config, run_day(context.instance, context.run_id), settings)
        runs = sync_runs(window.first, window.last, window.spans)
        context.log.info(f"sync {window.first}..{window.last}: {len(runs)} run(s), requested on success")
        context.add_output_metadata(
            {
                "first_day": str(window.first),
                "last_day": str(window.last),
                "engines": ", ".join(f"{a}..{b}" if a != b else a for a, b in window.spans),
                "runs": ", ".join(job_name for job_name, _ in runs),
            }
        )

    @config_mapping
    def launch_window(config: SyncNowConfig) -> RunConfig:
        """The launch's config, checked as the run is created: a wrong value is refused before it."""
        try:
            sync_now_window(config, dt.datetime.now(dt.UTC).date(), settings)
        except ConfigError as exc:
            raise DagsterInvalidConfigError(str(exc), [], config.model_dump(mode="json")) from None
        return RunConfig(ops={SYNC_NOW_OP: config})

    @job(
        name=SYNC_NOW_JOB,
        config=launch_window,
        description="Sync a window of days and engines now (default: the daily schedule's window, every "
        f"engine). On success the `{SYNC_NOW_SENSOR}` sensor launches the `{sync_job.name}` run(s).",
        tags={"visibility/kind": "sync_now"},
    )
    def sync_now() -> None:
        check_window()

    @run_status_sensor(
        name=SYNC_NOW_SENSOR,
        run_status=DagsterRunStatus.SUCCESS,
        monitored_jobs=[sync_now],
        request_jobs=[sync_job, daily_job],
        default_status=DefaultSensorStatus.RUNNING,
        description=f"Launches the sync run(s) of each successful `{SYNC_NOW_JOB}` run's window.",
    )
    def sync_now_runs(context: RunStatusSensorContext) -> list[RunRequest] | SkipReason:
        run = context.dagster_run
        config = SyncNowConfig(**run.run_config)  # the launch's config, before its mapping
        try:  # the default first partition (90 days ago) may have moved past the window since
            window = sync_now_window(config, run_day(context.instance, run.run_id), settings)
        except ConfigError as exc:
            return SkipReason(str(exc))  # raising would stop the sensor on this run for good
        window_tag = {SYNC_NOW_TAG: run.run_id, "visibility/window": f"{window.first}..{window.last}"}
        return [  # keyed by the sync_now run: requested once
            RunRequest(run_key=f"{run.run_id}-{index}", job_name=job_name, tags={**tags, **window_tag})
            for index, (job_name, tags) in enumerate(sync_runs(window.first, window.last, window.spans))
        ]

    return sync_now, sync_now_runs
