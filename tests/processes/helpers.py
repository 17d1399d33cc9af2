"""Start the real command line against the sandbox, wait until it lands, and see what survives."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil

from sandbox.testing import SandboxHandle
from tests.fixtures_sandbox import SANDBOX_TODAY

ROOT = Path(__file__).resolve().parents[2]
#: Two months of every engine: the sync is still landing well after its worker starts.
START, END = SANDBOX_TODAY - dt.timedelta(days=61), SANDBOX_TODAY
#: How long a process may take to die after the one that started it did.
GRACE_SECONDS = 5.0
#: How long a run may take to land its first table.
LANDING_DEADLINE_SECONDS = 45.0


def sync_env(sandbox: SandboxHandle, db: Path, **more: str) -> dict[str, str]:
    """The environment a user sets: the sandbox's URL and key, a DuckDB file, an early start date."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VISIBILITY_", "DAGSTER_HOME"))}
    env.update(
        VISIBILITY_API_URL=sandbox.url,
        VISIBILITY_API_KEY=sandbox.keys["workspace"],
        VISIBILITY_WAREHOUSE=f"duckdb:///{db}",
        VISIBILITY_START_DATE=(START - dt.timedelta(days=1)).isoformat(),
        PYTHONUNBUFFERED="1",
        **more,
    )
    return env


def start(argv: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``argv`` under this interpreter, as a terminal's foreground job: its own session and process
    group (so a Ctrl+C can be sent to the group), output to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, *argv],
            cwd=ROOT,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_for_landing(process: subprocess.Popen[bytes], log: Path, spools: Path) -> list[psutil.Process]:
    """Wait until ``process`` (its ``TMPDIR`` is ``spools``) removed a daily table's spool, so has
    landed a table in its own process; then every descendant it has."""
    parent = psutil.Process(process.pid)
    deadline = time.monotonic() + LANDING_DEADLINE_SECONDS
    seen: set[str] = set()
    while True:
        now = {p.name for p in spools.glob("visibility-spool-*")}
        if seen - now:
            return parent.children(recursive=True)
        seen |= now
        assert process.poll() is None, f"ended before landing anything:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"no table landed after {LANDING_DEADLINE_SECONDS}s"
        time.sleep(0.05)


def survivors(processes: Sequence[psutil.Process], timeout: float = GRACE_SECONDS) -> list[str]:
    """The processes still running after ``timeout`` seconds (a zombie has ended: it holds nothing)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for p in processes:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return [f"{p.pid} {' '.join(p.cmdline())[-120:]}" for p in alive if p.is_running()]
        time.sleep(0.05)


def kill_all(processes: Sequence[psutil.Process]) -> None:
    """Clean up after a failed assertion, so a failing test leaves nothing running either."""
    for p in processes:
        with contextlib.suppress(psutil.Error):
            p.kill()


def stop_when(
    process: subprocess.Popen[bytes],
    ready: Callable[[], list[psutil.Process]],
    stop: signal.Signals,
    group: bool = False,
) -> int:
    """Once ``ready()`` returns ``process``'s descendants, send ``stop`` (to its process group when
    ``group``: a Ctrl+C at the terminal); assert that none of them outlives it; its exit code."""
    try:
        descendants = ready()
        if group:
            os.killpg(process.pid, stop)
        else:
            os.kill(process.pid, stop)
        code = process.wait(timeout=60)
        left = survivors(descendants)
    finally:
        process.kill()
        process.wait()
    kill_all(descendants)
    assert not left, f"still running after the sync ended ({stop.name}): {left}"
    return code
