"""A Dagster run process SIGKILLed mid-sync: nothing it started survives, and the run it leaves
STARTED in ``DAGSTER_HOME`` is failed by ``fail_orphaned_runs``, its pool slots freed.

The run process executes the project's own job (``pipelines.definitions``) in process, as a run
worker does, against the real sandbox, into a real DuckDB file, recorded in a real instance.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from dagster import DagsterRunStatus, instance_for_test

from pipelines.jobs import DAILY_JOB
from pipelines.orphans import PID_TAG, fail_orphaned_runs
from pipelines.schedules import range_tags
from resources.api.endpoints import ENGINES_WITH_ALL
from sandbox.testing import SandboxHandle
from tests.processes.helpers import (
    END,
    ROOT,
    start,
    stop_when,
    sync_env,
    wait_for_landing,
)

pytestmark = pytest.mark.slow

#: Days of the run: a recorded run writes a "planned" event per partition and asset before its
#: step starts (SQLite: seconds per hundred on a busy machine), and its step lands for seconds.
RUN_DAYS = 8

#: A run process: the job of the code location, executed in this process and recorded in DAGSTER_HOME.
RUN_PROCESS = """
import json, sys
from dagster import DagsterInstance
from pipelines.definitions import defs
from pipelines.orphans import process_tags

with DagsterInstance.get() as instance:
    defs.resolve_job_def(sys.argv[1]).execute_in_process(
        instance=instance, tags={**json.loads(sys.argv[2]), **process_tags()}, raise_on_error=False
    )
"""


def start_run(sandbox: SandboxHandle, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, Path, Path]:
    """A run process of the daily job over a week; its DAGSTER_HOME holds the project's instance
    settings (pools and all)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    last = END - dt.timedelta(days=1)  # range tags name the last day; END is exclusive
    tags = range_tags(
        last - dt.timedelta(days=RUN_DAYS - 1), last, (ENGINES_WITH_ALL[0], ENGINES_WITH_ALL[-1])
    )
    log, spools = tmp_path / "output.txt", tmp_path / "tmp"
    spools.mkdir()
    env = sync_env(sandbox, tmp_path / "x.duckdb", DAGSTER_HOME=str(home), TMPDIR=str(spools))
    return start(["-c", RUN_PROCESS, DAILY_JOB, json.dumps(tags)], env, log), home, log, spools


def stop_run(process: subprocess.Popen[bytes], log: Path, spools: Path, stop: signal.Signals) -> None:
    """Send ``stop`` once the run lands; assert that nothing the run process started survives it."""
    stop_when(process, lambda: wait_for_landing(process, log, spools), stop)


def test_a_killed_run_process_leaves_no_process_and_its_run_is_failed(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    process, home, log, spools = start_run(sandbox, tmp_path)
    stop_run(process, log, spools, signal.SIGKILL)

    with instance_for_test(temp_dir=str(home)) as instance:
        (run,) = instance.get_runs()
        assert run.status == DagsterRunStatus.STARTED and run.tags[PID_TAG] == str(process.pid)
        storage = instance.event_log_storage
        assert run.run_id in storage.get_concurrency_run_ids()  # its step's pool slot, still held

        assert fail_orphaned_runs(instance) == [run.run_id]

        ended = instance.get_run_by_id(run.run_id)
        assert ended is not None and ended.status == DagsterRunStatus.FAILURE
        assert run.run_id not in storage.get_concurrency_run_ids()


def test_a_run_terminated_by_dagster_leaves_no_process(sandbox: SandboxHandle, tmp_path: Path) -> None:
    """Dagster terminates a run (from the UI, or the daemon past ``max_runtime_seconds``) by
    interrupting its process with SIGINT (``dagster_shared.ipc.send_interrupt``; SIGTERM is mapped
    to it): the step stops."""
    process, home, log, spools = start_run(sandbox, tmp_path)
    stop_run(process, log, spools, signal.SIGINT)

    with instance_for_test(temp_dir=str(home)) as instance:
        (run,) = instance.get_runs()
        assert run.is_finished, run.status
        assert fail_orphaned_runs(instance) == []
