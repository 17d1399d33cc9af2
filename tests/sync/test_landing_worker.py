"""The landing worker: a table fetched here lands from a worker process; its errors come back as if
raised here, and the worker never outlives its Lander (nor the process that started it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psutil
import pytest

from resources.api.client import VisibilityClient
from resources.warehouse.contract import SchemaMismatchError
from sandbox.testing import SandboxHandle
from sync.catalog import PROMPT_MENTIONS
from sync.fetching import fetch_partitioned
from sync.landing import FetchOutcome
from sync.landing_worker import Lander, LandingError, _portable
from tests.sync.conftest import SCHEMA, D


@pytest.fixture
def outcome(sandbox: SandboxHandle) -> Iterator[FetchOutcome]:
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        fetched = fetch_partitioned(client, PROMPT_MENTIONS, {(D, "chatgpt")}, [])
    yield fetched
    fetched.spool.remove()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "wh.duckdb"


def config(db: Path, **more: Any) -> dict[str, Any]:
    return {"url": f"duckdb:///{db}", "schema_name": SCHEMA, **more}


def landed(db: Path) -> tuple[int, str | None]:
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(f"SELECT COUNT(*), ANY_VALUE(_run_id) FROM {SCHEMA}.prompt_mentions").fetchone()
    assert row is not None
    return row[0], row[1]


def incompatible_table(db: Path) -> None:
    with duckdb.connect(str(db)) as con:  # an incompatible column type: landing prompt_mentions fails
        con.execute(f"CREATE SCHEMA {SCHEMA}")
        con.execute(f"CREATE TABLE {SCHEMA}.prompt_mentions (id BOOLEAN PRIMARY KEY)")


#: How long a test waits for a process to end: generous, so a loaded machine (two suites at once, a
#: CPU hog) does not fail it; a process that should end does so in well under a second when idle.
PATIENCE_SECONDS = 60.0


def gone(pid: int, timeout: float = PATIENCE_SECONDS) -> bool:
    """``pid`` ended (a zombie counts as ended) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def test_a_table_lands_from_the_worker_process(outcome: FetchOutcome, db: Path) -> None:
    with Lander(config(db)) as lander:
        assert lander.worker_pid is not None and lander.worker_pid != os.getpid()
        results = lander.land(PROMPT_MENTIONS.spec, outcome, "run-1")

    assert sum(r.rows_written for r in results) == outcome.spool.rows > 0
    assert landed(db) == (outcome.spool.rows, "run-1")


def test_outside_a_with_block_the_table_lands_in_this_process(outcome: FetchOutcome, db: Path) -> None:
    results = Lander(config(db)).land(PROMPT_MENTIONS.spec, outcome, "run-1")

    assert sum(r.rows_written for r in results) == outcome.spool.rows > 0


def test_a_landing_error_reaches_the_step_naming_the_table(outcome: FetchOutcome, db: Path) -> None:
    incompatible_table(db)

    with Lander(config(db)) as lander:
        with pytest.raises(Exception, match="prompt_mentions") as raised:
            lander.land(PROMPT_MENTIONS.spec, outcome, "run-1")
        # the worker survives a failed landing: the next one runs (and fails the same way here)
        with pytest.raises(Exception, match="prompt_mentions"):
            lander.land(PROMPT_MENTIONS.spec, outcome, "run-2")

    assert "BrokenProcessPool" not in type(raised.value).__name__


def test_a_worker_error_keeps_its_class_and_message_and_no_remote_traceback(
    outcome: FetchOutcome, db: Path
) -> None:
    """The user sees the same one-line message as for an in-process landing, not a worker's traceback."""
    incompatible_table(db)
    with pytest.raises(SchemaMismatchError) as in_process:
        Lander(config(db)).land(PROMPT_MENTIONS.spec, outcome, "run-1")

    with Lander(config(db)) as lander, pytest.raises(SchemaMismatchError) as from_worker:
        lander.land(PROMPT_MENTIONS.spec, outcome, "run-1")

    error = from_worker.value
    assert str(error) == str(in_process.value)
    assert (error.table, error.column) == (in_process.value.table, in_process.value.column)
    assert error.__cause__ is None and error.__context__ is None
    text = "".join(traceback.format_exception(error))
    assert "RemoteTraceback" not in text and text.count("Traceback (most recent call last)") == 1


def test_an_error_that_cannot_cross_processes_arrives_as_landing_error_naming_its_class() -> None:
    class Unpicklable(Exception):  # a local class: pickle cannot find it by name
        pass

    portable = _portable(Unpicklable("the warehouse said no"))

    assert isinstance(portable, LandingError)
    assert str(portable) == "Unpicklable: the warehouse said no"
    assert _portable(ValueError("fine")).__class__ is ValueError


def test_a_worker_killed_mid_landing_fails_that_landing_only(outcome: FetchOutcome, db: Path) -> None:
    """The killed landing leaves the table as it was; the next landing starts a new worker."""
    with Lander(config(db, lock_timeout_seconds=60)) as lander:
        lander.land(PROMPT_MENTIONS.spec, outcome, "run-1")
        first = lander.worker_pid
        assert first is not None
        with duckdb.connect(str(db)):  # hold DuckDB's writer lock: the worker's landing waits for it
            killer = threading.Timer(1.5, os.kill, (first, signal.SIGKILL))
            killer.start()
            with pytest.raises(LandingError, match="prompt_mentions") as raised:
                lander.land(PROMPT_MENTIONS.spec, outcome, "run-2")
            killer.join()
        assert f"pid {first}" in str(raised.value) and "SIGKILL" in str(raised.value)
        assert landed(db) == (outcome.spool.rows, "run-1")

        lander.land(PROMPT_MENTIONS.spec, outcome, "run-3")
        assert lander.worker_pid not in (None, first)

    assert landed(db) == (outcome.spool.rows, "run-3")


def test_the_worker_ends_with_its_lander(db: Path) -> None:
    with Lander(config(db)) as lander:
        pid = lander.worker_pid
        assert pid is not None and psutil.pid_exists(pid)

    assert gone(pid, timeout=0)  # reaped by the time the block is left


def test_a_lander_left_by_an_exception_kills_its_worker_at_once(outcome: FetchOutcome, db: Path) -> None:
    """A step failing or stopped does not wait for a landing in progress (it rolls back)."""
    errors: list[BaseException] = []
    with duckdb.connect(str(db)):  # hold DuckDB's writer lock: the landing waits for it
        lander = Lander(config(db, lock_timeout_seconds=60)).__enter__()
        pid = lander.worker_pid
        assert pid is not None

        def land() -> None:
            try:
                lander.land(PROMPT_MENTIONS.spec, outcome, "run-1")
            except BaseException as exc:
                errors.append(exc)

        landing = threading.Thread(target=land)
        landing.start()
        time.sleep(1.5)
        started = time.monotonic()
        lander.__exit__(RuntimeError, RuntimeError("the step failed"), None)
        assert time.monotonic() - started < 30  # far less than the 60 s the landing would wait
        landing.join(timeout=PATIENCE_SECONDS)

    assert gone(pid, timeout=0)
    assert len(errors) == 1 and isinstance(errors[0], LandingError)


def test_the_worker_outlives_the_thread_that_started_it(outcome: FetchOutcome, db: Path) -> None:
    """Linux kills a PR_SET_PDEATHSIG child when the *thread* that created it ends, not the process."""
    lander = Lander(config(db))

    def start() -> None:
        lander.__enter__()
        time.sleep(1.5)  # the worker has set PR_SET_PDEATHSIG by now: it applies to this thread's end

    starter = threading.Thread(target=start)
    starter.start()
    starter.join()
    try:
        pid = lander.worker_pid
        assert pid is not None
        time.sleep(0.5)
        assert not gone(pid, timeout=0)
        assert lander.land(PROMPT_MENTIONS.spec, outcome, "run-1")
        assert lander.worker_pid == pid
    finally:
        lander.__exit__(None, None, None)


def test_the_worker_ignores_ctrl_c_and_prints_nothing(
    outcome: FetchOutcome, db: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Ctrl+C is the parent's to handle: the worker is outside the terminal's process group, and
    ignores SIGINT sent to it directly."""
    with Lander(config(db)) as lander:
        pid = lander.worker_pid
        assert pid is not None
        assert os.getpgid(pid) != os.getpgid(0)
        time.sleep(1.0)  # past the worker's start-up
        os.kill(pid, signal.SIGINT)
        time.sleep(0.5)
        assert not gone(pid, timeout=0)
        lander.land(PROMPT_MENTIONS.spec, outcome, "run-1")

    assert "KeyboardInterrupt" not in capfd.readouterr().err


def test_the_worker_exits_when_its_lifeline_to_the_parent_closes(db: Path) -> None:
    """The portable fallback of PR_SET_PDEATHSIG: the end-of-file of a pipe only the parent holds."""
    with Lander(config(db)) as lander:
        pid = lander.worker_pid
        assert pid is not None and lander._worker is not None
        os.close(lander._worker._lifeline)  # as the kernel does when the parent dies
        lander._worker._lifeline = os.open(os.devnull, os.O_RDONLY)  # so the exit closes something valid
        assert gone(pid)


#: Run by a child subreaper (so the worker, once orphaned, is its child and its process group is not
#: orphaned: no SIGHUP from the kernel): start a Lander in a parent process, stop its worker (its
#: lifeline watchdog cannot run then), SIGKILL the parent, and say how the worker ended.
_PDEATHSIG_PROBE = """
import ctypes, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
url, schema, patience = sys.argv[1], sys.argv[2], float(sys.argv[3])
parent = subprocess.Popen([sys.executable, "-c", (
    "import sys, time\\n"
    "from sync.landing_worker import Lander\\n"
    "with Lander({'url': sys.argv[1], 'schema_name': sys.argv[2]}) as lander:\\n"
    "    print(lander.worker_pid, flush=True)\\n"
    "    time.sleep(600)\\n"), url, schema], stdout=subprocess.PIPE)
worker = int(parent.stdout.readline())
deadline = time.monotonic() + patience
READ = {"x86_64": 0, "aarch64": 63}[os.uname().machine]
with open(f"/proc/{worker}/cmdline", "rb") as cmdline:
    requests_fd = int(cmdline.read().split(b"\\0")[-4])  # serve(parent, requests, results, lifeline)
def reading_requests():
    with open(f"/proc/{worker}/syscall") as syscall:
        fields = syscall.read().split()
    return fields[0] == str(READ) and int(fields[1], 16) == requests_fd
while not reading_requests():  # serve() calls prctl(PR_SET_PDEATHSIG) before its first read
    assert time.monotonic() < deadline, "the worker did not start"
    time.sleep(0.05)
os.kill(worker, signal.SIGSTOP)
parent.kill()
parent.wait()
deadline = time.monotonic() + patience
while time.monotonic() < deadline:
    pid, status = os.waitpid(worker, os.WNOHANG)  # the orphaned worker is this subreaper's child now
    if pid:
        print("killed by", os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exit")
        break
    time.sleep(0.05)
else:
    os.kill(worker, signal.SIGKILL)
    os.waitpid(worker, 0)
    print("still alive")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_stopped_worker_is_killed_by_the_kernel_when_its_parent_is_sigkilled(db: Path) -> None:
    """PR_SET_PDEATHSIG on its own: a stopped worker cannot run its lifeline watchdog, but the
    kernel's SIGKILL reaches it all the same."""
    root = Path(__file__).resolve().parents[2]
    probe = subprocess.run(
        [sys.executable, "-c", _PDEATHSIG_PROBE, f"duckdb:///{db}", SCHEMA, str(PATIENCE_SECONDS)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=4 * PATIENCE_SECONDS,
    )
    assert probe.stdout.strip() == f"killed by {int(signal.SIGKILL)}", probe.stderr[-2000:]
