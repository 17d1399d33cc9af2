"""Whether a process recorded earlier still runs (Dagster-free, stdlib only): its pid is alive, not a
zombie, and on Linux started at the recorded time, so a reused pid is not taken for it. Used by
``pipelines/orphans.py``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


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


def started(pid: int) -> str | None:
    """``<boot id>/<start ticks>`` of ``pid`` on Linux; None elsewhere."""
    stat, boot = _stat(pid), _boot_id()
    if stat is None or boot is None:
        return None
    return f"{boot}/{stat.start_ticks}"


def alive(pid: int, recorded_start: str | None) -> bool:
    """Whether ``pid`` still runs and is the process that recorded ``recorded_start`` (when recorded)."""
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
    now = started(pid) if recorded_start is not None else None
    return now is None or now == recorded_start
