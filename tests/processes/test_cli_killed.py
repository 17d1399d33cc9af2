"""``visibility-sync run`` killed mid-sync, however: no process it started outlives it.

The real command line in its own process, against the real sandbox over loopback, into a real
DuckDB file. Its descendants (the landing worker, and anything else it started) are recorded before
the kill; none may be running a few seconds after.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import duckdb
import pytest

from sandbox.testing import SandboxHandle
from tests.processes.helpers import END, START, kill_all, start, survivors, sync_env, wait_for_landing_worker

pytestmark = pytest.mark.slow

RUN = ["-m", "pipelines.cli", "run", "--start", START.isoformat(), "--end", END.isoformat(), "--quiet"]


def run_and_stop(
    sandbox: SandboxHandle, tmp_path: Path, stop: signal.Signals, group: bool = False
) -> tuple[int, str]:
    """Start a sync, send ``stop`` (to its process group: a Ctrl+C at the terminal) once it lands,
    assert that nothing it started survives; its exit code and output."""
    log = tmp_path / "output.txt"
    process = start(RUN, sync_env(sandbox, tmp_path / "x.duckdb"), log)
    try:
        descendants = wait_for_landing_worker(process, log)
        if group:
            os.killpg(process.pid, stop)
        else:
            os.kill(process.pid, stop)
        code = process.wait(timeout=30)
        left = survivors(descendants)
    finally:
        process.kill()
        process.wait()
    kill_all(descendants)
    assert not left, f"still running after the sync ended ({stop.name}): {left}"
    return code, log.read_text()


def test_sigkill_of_the_sync_leaves_no_process_and_a_readable_warehouse(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    code, _ = run_and_stop(sandbox, tmp_path, signal.SIGKILL)

    assert code == -signal.SIGKILL
    with duckdb.connect(str(tmp_path / "x.duckdb")) as con:  # replays its WAL: every commit whole
        con.execute("SELECT table_name FROM information_schema.tables").fetchall()


def test_sigterm_of_the_sync_leaves_no_process_and_no_traceback(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    code, output = run_and_stop(sandbox, tmp_path, signal.SIGTERM)

    assert code != 0
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output


def test_ctrl_c_of_the_sync_leaves_no_process_and_no_worker_traceback(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    """A terminal sends Ctrl+C to the whole foreground process group."""
    code, output = run_and_stop(sandbox, tmp_path, signal.SIGINT, group=True)

    assert code == 130, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
