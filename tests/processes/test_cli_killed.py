"""``visibility-sync run`` killed mid-sync, however: no process it started outlives it.

The real command line in its own process, against the real sandbox over loopback, into a real
DuckDB file. Its descendants (anything it started) are recorded before the kill; none may be running
a few seconds after. A killed sync leaves a readable warehouse too.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import duckdb
import pytest

from sandbox.testing import SandboxHandle
from tests.processes.helpers import (
    END,
    START,
    start,
    stop_when,
    sync_env,
    wait_for_landing,
)

pytestmark = pytest.mark.slow

RUN = ["-m", "pipelines.cli", "run", "--start", START.isoformat(), "--end", END.isoformat(), "--quiet"]


def run_and_stop(
    sandbox: SandboxHandle, tmp_path: Path, stop: signal.Signals, group: bool = False
) -> tuple[int, str]:
    """Start a sync, send ``stop`` (to its process group: a Ctrl+C at the terminal) once it lands,
    assert that nothing it started survives; its exit code and output."""
    log, spools = tmp_path / "output.txt", tmp_path / "tmp"
    spools.mkdir()
    process = start(RUN, sync_env(sandbox, tmp_path / "x.duckdb", TMPDIR=str(spools)), log)
    code = stop_when(process, lambda: wait_for_landing(process, log, spools), stop, group)
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


def test_ctrl_c_of_the_sync_leaves_no_process_and_no_traceback(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    """A terminal sends Ctrl+C to the whole foreground process group."""
    code, output = run_and_stop(sandbox, tmp_path, signal.SIGINT, group=True)

    assert code == 130, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output


def test_a_stop_while_the_service_is_unreachable_ends_the_sync_at_once_with_one_line(tmp_path: Path) -> None:
    """Retrying an unreachable service is no reason to keep running: the stop cancels the waits."""
    import socket
    import time

    from tests.processes.helpers import ROOT  # noqa: F401  (the command runs from the repository)

    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VISIBILITY_", "DAGSTER_HOME"))}
    env.update(
        VISIBILITY_API_URL=dead,
        VISIBILITY_API_KEY="vsk_test_0123456789abcdef",
        VISIBILITY_WAREHOUSE=f"duckdb:///{tmp_path / 'x.duckdb'}",
        VISIBILITY_START_DATE=START.isoformat(),
    )
    log = tmp_path / "output.txt"
    process = start(RUN, env, log)
    try:
        deadline = time.monotonic() + 60
        while "unreachable" not in log.read_text():  # the status line says what it waits for
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        os.kill(process.pid, signal.SIGTERM)
        # far less than the 300 s retry deadline the sync would otherwise spend retrying, and
        # generous for a busy machine: ending within it proves the stop cancelled the waits
        code = process.wait(timeout=120)
    finally:
        process.kill()
        process.wait()
    output = log.read_text()
    assert code == 130, output
    assert dead in output and "retrying GET /v1/brands for" in output
    assert output.count("interrupted") == 1 and "Traceback" not in output
