"""A command's runs in Dagster's instance: recorded as runs of the code location, ended when the
command is stopped, and failed once their process is gone.

A run executed in process has no code location, and the UI re-executes a run only through one: no
public API creates that origin, so :func:`code_location_origin` gives it in Dagster's serialized
form, as ``dagster run migrate-repository`` does. A killed run never writes its end: its process is
recorded in its tags (:func:`process_tags`), and the next command or :data:`orphaned_runs_sensor` on
that host ends the runs whose process is gone.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunsFilter,
    SensorEvaluationContext,
    SkipReason,
    deserialize_value,
    sensor,
)

#: ``location_name`` of workspace.yaml and deploy/ (tests/pipelines/test_cli_runs.py holds them to it).
CODE_LOCATION = "visibility"
#: The repository a ``Definitions`` object makes.
REPOSITORY = "__repository__"

log = logging.getLogger("visibility.cli")

PID_TAG = "visibility/pid"
HOST_TAG = "visibility/host"
#: Linux: ``<boot id>/<start time in clock ticks>`` of the process, to tell a reused pid apart.
STARTED_TAG = "visibility/pid_started"
#: The run the process tags were written for (a re-executed run inherits them from its parent).
RUN_TAG = "visibility/pid_run"

#: States of a run whose process should still be running (a command-line run is NOT_STARTED while
#: Dagster stores its planned events).
LIVE_STATUSES = (
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
)


def process_tags(run_id: str | None = None) -> dict[str, str]:
    """Tags that record the current process on a run (``run_id``), for :func:`fail_orphaned_runs`."""
    tags = {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    if run_id is not None:
        tags[RUN_TAG] = run_id
    started = _started(os.getpid())
    if started is not None:
        tags[STARTED_TAG] = started
    return tags


def free_pool_slots(instance: DagsterInstance, run_id: str) -> None:
    """The pool slots run ``run_id`` claimed, freed (its process will not free them)."""
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        storage.free_concurrency_slots_for_run(run_id)


def fail_orphaned_runs(instance: DagsterInstance, log: Callable[[str], object] | None = None) -> list[str]:
    """End every run of this host whose recorded process is gone (a CANCELING one canceled, others
    failed), freeing its pool slots; returns their run ids. Runs without this host's tags, or whose
    tags were written for another run, are left alone."""
    host = socket.gethostname()
    ended: list[str] = []
    runs = instance.get_runs(filters=RunsFilter(statuses=list(LIVE_STATUSES), tags={HOST_TAG: host}))
    for run in runs:
        if run.tags.get(RUN_TAG, run.run_id) != run.run_id:
            continue
        try:
            pid = int(run.tags.get(PID_TAG, ""))
        except ValueError:
            continue
        if pid <= 0 or _alive(pid, run.tags.get(STARTED_TAG)):
            continue
        current = instance.get_run_by_id(run.run_id)  # another process may have ended it meanwhile
        if current is None or current.status not in LIVE_STATUSES:
            continue
        canceling = current.status == DagsterRunStatus.CANCELING
        message = (
            f"run process {pid} on {host} is gone (killed or crashed while the run was "
            f"{current.status.value}); marked {'canceled' if canceling else 'failed'} by visibility-sync. "
            "Writes it had not committed left their tables as they were; re-run the range to complete it"
        )
        if canceling:
            instance.report_run_canceled(current, message)
        else:
            instance.report_run_failed(current, message)
        free_pool_slots(instance, current.run_id)
        if log is not None:
            log(f"run {current.run_id} of job {current.job_name}: {message}")
        ended.append(current.run_id)
    return ended


@sensor(
    name="visibility_orphaned_runs",
    minimum_interval_seconds=5,
    default_status=DefaultSensorStatus.RUNNING,
    description="Fails the runs of this host whose process is gone (a `visibility-sync run` or run "
    "worker killed with SIGKILL, out of memory, a closed laptop), so they neither show as running nor "
    "hold their pool slots; a query of the live runs each tick, no run of its own.",
)
def orphaned_runs_sensor(context: SensorEvaluationContext) -> SkipReason:
    ended = fail_orphaned_runs(context.instance, context.log.info)
    said = f"ended {len(ended)} run(s) whose process is gone" if ended else "no run lost its process"
    return SkipReason(said)


def code_location_origin(job_name: str) -> Any:
    """``job_name`` of :data:`CODE_LOCATION`, as a run records where it comes from."""
    return deserialize_value(
        json.dumps(
            {
                "__class__": "ExternalPipelineOrigin",
                "external_repository_origin": {
                    "__class__": "ExternalRepositoryOrigin",
                    "repository_location_origin": {
                        "__class__": "RegisteredRepositoryLocationOrigin",
                        "location_name": CODE_LOCATION,
                    },
                    "repository_name": REPOSITORY,
                },
                "pipeline_name": job_name,
            }
        )
    )


def adopt_when_stored(instance: DagsterInstance, run_id: str) -> None:
    """Record the code location on run ``run_id`` as soon as Dagster has stored it (its first event),
    so that the UI can re-execute it, even killed mid-way."""
    done = False

    def adopt(_: object) -> None:
        nonlocal done
        run = None if done else instance.get_run_by_id(run_id)
        if run is None:
            return
        done = True
        if run.remote_job_origin is not None:
            return
        try:
            instance.run_storage.replace_job_origin(run, code_location_origin(run.job_name))
        except Exception as exc:  # a storage that failed the write: the sync goes on, re-execution won't
            log.warning("run %s not recorded as a run of the code location: %r", run_id, exc)

    instance.add_event_listener(run_id, adopt)


def cancel_interrupted(instance: DagsterInstance, run_id: str) -> None:
    """End run ``run_id`` as canceled unless Dagster recorded its end, freeing its pool slots."""
    run = instance.get_run_by_id(run_id)
    if run is None or run.is_finished:
        return
    instance.report_run_canceled(
        run,
        f"visibility-sync was stopped (Ctrl+C or SIGTERM) while the run was {run.status.value}; "
        "tables whose landing had not committed keep their previous rows. Re-execute the run, or "
        "re-run the command, to complete it",
    )
    free_pool_slots(instance, run_id)


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """State and start time (clock ticks) of ``pid`` from ``/proc`` (None where there is none)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name (field 2) may hold spaces and parens
    return fields[0], fields[19]  # fields 3 and 22 of proc(5)


def _started(pid: int) -> str | None:
    """``<boot id>/<start ticks>`` of ``pid`` on Linux; None elsewhere."""
    stat = _proc_stat(pid)
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    return None if stat is None else f"{boot}/{stat[1]}"


def _alive(pid: int, recorded_start: str | None) -> bool:
    """Whether ``pid`` still runs, not a zombie, and (when recorded) started at ``recorded_start``:
    a reused pid is not taken for it."""
    if os.name != "posix":
        return True  # os.kill would end the process there: never guess
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    stat = _proc_stat(pid)
    if stat is None:
        return True
    if stat[0] in ("Z", "X"):  # killed, waiting for its parent to reap it
        return False
    return recorded_start is None or _started(pid) in (None, recorded_start)
