"""``visibility-sync run`` killed late in its fetch, then run again: it asks only what it had not fetched.

The real command line in its own process against the real sandbox (which counts every request it
answers), into real DuckDB files: a clean run gives the reference (its requests and its rows); a second
run of the same command is killed (SIGKILL, the whole process group) once it has made 90 % of the
clean run's requests; the same command run again lands the same rows as the clean run with at most
15 % of its requests, beyond the listings every sync makes (brands, prompts, competitors, topics).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from sandbox.testing import SandboxHandle
from sync.resume import TEMP_PREFIX
from tests.processes.helpers import END, START, kill_all, start, survivors, sync_env
from tests.processes.warehouse_rows import rows_of

pytestmark = pytest.mark.slow

RUN = ["-m", "pipelines.cli", "run", "--start", START.isoformat(), "--end", END.isoformat(), "--quiet"]
#: Columns a re-run sets anew whatever it fetched.
RUN_COLUMNS = {"_loaded_at", "_run_id", "first_seen_at", "last_seen_at"}
#: Listings every sync makes before it plans (not the calls a resume can skip).
LISTINGS = ("GET /v1/brands", "/prompts", "/tracked-competitors", "/topics", "/generations", "/competitors")
KILL_AT = 0.90
RUN_DEADLINE_SECONDS = 600


def served(handle: SandboxHandle) -> dict[str, int]:
    return {endpoint: sum(statuses.values()) for endpoint, statuses in handle.stats().items()}


def listings(requests: dict[str, int]) -> int:
    return sum(n for endpoint, n in requests.items() if endpoint.endswith(LISTINGS))


def run_to_end(env: dict[str, str], log: Path) -> int:
    process = start(RUN, env, log)
    try:
        return process.wait(timeout=RUN_DEADLINE_SECONDS)
    finally:
        process.kill()
        process.wait()


def test_a_sync_killed_at_90_percent_is_finished_by_its_rerun_with_few_requests_and_the_same_rows(
    sandbox_factory: Callable[..., SandboxHandle], tmp_path: Path
) -> None:
    sandbox = sandbox_factory()
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    sandbox.reset_stats()
    code = run_to_end(sync_env(sandbox, tmp_path / "clean.duckdb", TMPDIR=str(tmp)), tmp_path / "clean.txt")
    assert code == 0, (tmp_path / "clean.txt").read_text()
    clean = served(sandbox)
    assert sorted(tmp.glob(f"{TEMP_PREFIX}*/*")) == []  # a landed sync keeps no journal

    sandbox.reset_stats()
    env = sync_env(sandbox, tmp_path / "resumed.duckdb", TMPDIR=str(tmp))
    process = start(RUN, env, tmp_path / "killed.txt")
    descendants: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + RUN_DEADLINE_SECONDS
        while sum(served(sandbox).values()) < KILL_AT * sum(clean.values()):
            assert process.poll() is None, (tmp_path / "killed.txt").read_text()
            assert time.monotonic() < deadline
            descendants = psutil.Process(process.pid).children(recursive=True)
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        process.kill()
        process.wait()
    kill_all(descendants)
    assert not survivors(descendants)
    assert sorted(tmp.glob(f"{TEMP_PREFIX}*/*")) != []  # what it had fetched is kept

    sandbox.reset_stats()
    code = run_to_end(env, tmp_path / "rerun.txt")
    assert code == 0, (tmp_path / "rerun.txt").read_text()
    rerun = served(sandbox)

    asked = sum(rerun.values()) - listings(rerun)
    clean_calls = sum(clean.values()) - listings(clean)
    print("RATIO", asked, clean_calls, asked / clean_calls, flush=True)
    assert rows_of(tmp_path / "resumed.duckdb") == rows_of(tmp_path / "clean.duckdb")
    assert sorted(tmp.glob(f"{TEMP_PREFIX}*/*")) == []  # landed: the journal is gone
