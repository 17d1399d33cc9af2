"""Runs whose process is gone: fail them, so they neither stay STARTED nor hold their pool slots.

A run recorded in ``DAGSTER_HOME`` whose process is killed (SIGKILL, an OOM kill, a closed laptop)
never writes its end: it stays STARTED (or STARTING, or CANCELING) for ever, shows as running in
the UI, and keeps the concurrency slots its steps claimed, so later syncs queue behind it. Dagster's
default run launcher cannot tell (it has no worker health check), so the process records itself in
its run's tags (:func:`process_tags`) and the next ``visibility-sync`` on the same host ends the
runs whose process is gone (:func:`fail_orphaned_runs`).

Stdlib only (no psutil): a pid is alive if ``kill(pid, 0)`` finds it and, on Linux, it is not a
zombie and started at the recorded time (so a reused pid is not mistaken for the run's process).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

PID_TAG = "visibility/pid"
HOST_TAG = "visibility/host"
#: Linux: ``<boot id>/<start time in clock ticks>`` of the process, to tell a reused pid apart.
STARTED_TAG = "visibility/pid_started"

#: States of a run whose process should still be running.
LIVE_STATUSES = (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING)


def process_tags() -> dict[str, str]:
    """Tags that record the current process on a run, for :func:`fail_orphaned_runs`."""
    tags = {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    started = _started(os.getpid())
    if started is not None:
        tags[STARTED_TAG] = started
    return tags


def fail_orphaned_runs(instance: DagsterInstance, log: Callable[[str], object] | None = None) -> list[str]:
    """End every run of this host whose recorded process is gone; returns their run ids.

    Only runs tagged by :func:`process_tags` with this host's name are looked at; a run without
    the tags, or of another host, is left alone (its process cannot be checked from here). A
    STARTING or STARTED run is reported failed, a CANCELING one canceled, with a message naming the
    process; the concurrency slots the run held are freed.
    """
    host = socket.gethostname()
    ended: list[str] = []
    runs = instance.get_runs(filters=RunsFilter(statuses=list(LIVE_STATUSES), tags={HOST_TAG: host}))
    for run in runs:
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
        storage = instance.event_log_storage
        if storage.supports_global_concurrency_limits:
            storage.free_concurrency_slots_for_run(current.run_id)
        if log is not None:
            log(f"run {current.run_id} of job {current.job_name}: {message}")
        ended.append(current.run_id)
    return ended


# ---------------------------------------------------------------------------------------------
# processes, with the stdlib


@dataclass(frozen=True)
class _Stat:
    state: str
    start_ticks: str


def _stat(pid: int) -> _Stat | None:
    """State and start time of ``pid`` from ``/proc`` (None where there is no ``/proc``)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name (field 2) may hold spaces and parens
    return _Stat(state=fields[0], start_ticks=fields[19])  # fields 3 and 22 of proc(5)


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _started(pid: int) -> str | None:
    """``<boot id>/<start ticks>`` of ``pid`` on Linux; None elsewhere."""
    stat, boot = _stat(pid), _boot_id()
    if stat is None or boot is None:
        return None
    return f"{boot}/{stat.start_ticks}"


def _alive(pid: int, started: str | None) -> bool:
    """Whether ``pid`` still runs and is the process that recorded ``started`` (when recorded)."""
    if os.name != "posix":
        return True  # os.kill would end the process there: never guess
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    stat = _stat(pid)
    if stat is None:
        return True
    if stat.state in ("Z", "X"):  # killed, waiting for its parent to reap it
        return False
    now = _started(pid) if started is not None else None
    return now is None or now == started
