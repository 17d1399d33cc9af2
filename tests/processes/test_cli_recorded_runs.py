"""``visibility-sync run`` recorded in ``DAGSTER_HOME`` and stopped: its run shows its real end.

The real command line in its own process against the real sandbox, into a real DuckDB file and a real
instance holding the project's ``dagster.yaml``. A Ctrl+C or SIGTERM ends the run before the command
exits (failed, when Dagster caught the interrupt in a step; else canceled by the command). After a
SIGKILL the run is left live, and the code location's sensor (evaluated on that instance, as the
daemon evaluates it) fails it naming the process. Either way the run is a run of the code location
(the UI re-executes one: tests/ui/test_webserver.py).
"""

from __future__ import annotations

import datetime as dt
import shutil
import signal
import time
from pathlib import Path

import psutil
import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, build_sensor_context

from pipelines.orphans import CODE_LOCATION, PID_TAG, RUN_TAG, orphaned_runs_sensor
from sandbox.testing import SandboxHandle
from tests.processes.helpers import END, ROOT, start, stop_when, sync_env, wait_for_landing

pytestmark = pytest.mark.slow

#: Long enough that the run still lands when stopped; short enough that Dagster's planned events
#: (one per partition and asset in SQLite) do not dominate.
DAYS = 8
RUN = [
    "-m",
    "pipelines.cli",
    "run",
    "--start",
    (END - dt.timedelta(days=DAYS)).isoformat(),
    "--end",
    END.isoformat(),
    "--quiet",
]


def run_and_stop(sandbox: SandboxHandle, tmp_path: Path, stop: signal.Signals) -> tuple[int, Path, str]:
    """A recorded sync, sent ``stop`` (to its process group: a terminal's Ctrl+C) once it lands a
    table; its exit code, its DAGSTER_HOME and its output."""
    home, spools, log = tmp_path / "dagster_home", tmp_path / "tmp", tmp_path / "output.txt"
    home.mkdir()
    spools.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    env = sync_env(sandbox, tmp_path / "x.duckdb", DAGSTER_HOME=str(home), TMPDIR=str(spools))
    process = start(RUN, env, log)
    code = stop_when(process, lambda: wait_for_landing(process, log, spools), stop, group=True)
    return code, home, log.read_text()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_recorded_run_stopped_by_ctrl_c_or_sigterm_has_ended_when_the_command_exits(
    sandbox: SandboxHandle, tmp_path: Path, stop: signal.Signals
) -> None:
    code, home, output = run_and_stop(sandbox, tmp_path, stop)

    assert code == 130, output
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        assert run.status in (DagsterRunStatus.CANCELED, DagsterRunStatus.FAILURE), run.status
        assert run.remote_job_origin is not None and run.remote_job_origin.location_name == CODE_LOCATION
        ends = {DagsterEventType.RUN_CANCELED, DagsterEventType.RUN_FAILURE}
        said = [e.message or "" for e in instance.all_logs(run.run_id) if e.dagster_event_type in ends]
        assert said and ("interrupted" in said[-1].lower() or "stopped" in said[-1]), said
        assert not instance.event_log_storage.get_concurrency_run_ids()  # its pool slots freed


def test_a_killed_recorded_run_is_failed_by_the_code_locations_sensor(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    code, home, _ = run_and_stop(sandbox, tmp_path, signal.SIGKILL)

    assert code == -signal.SIGKILL
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        assert not run.is_finished and run.tags[RUN_TAG] == run.run_id
        assert run.remote_job_origin is not None and run.remote_job_origin.location_name == CODE_LOCATION

        orphaned_runs_sensor(build_sensor_context(instance=instance))

        ended = instance.get_run_by_id(run.run_id)
        assert ended is not None and ended.status == DagsterRunStatus.FAILURE
        assert ended.tags.get("dagster/will_retry") != "true"  # its user re-runs it, not the daemon
        failure = instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_FAILURE)[-1]
        assert f"run process {run.tags[PID_TAG]}" in (failure.message or "")
        assert run.run_id not in instance.event_log_storage.get_concurrency_run_ids()


def test_a_recorded_run_stopped_before_it_started_is_canceled_by_the_command(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    """A Ctrl+C while Dagster still stores the run's planned events (one per partition and asset: a
    month of them takes seconds) reaches the command, not a step: the command ends the run."""
    home, log = tmp_path / "dagster_home", tmp_path / "output.txt"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    month = [*RUN[:4], (END - dt.timedelta(days=30)).isoformat(), *RUN[5:]]
    process = start(month, sync_env(sandbox, tmp_path / "x.duckdb", DAGSTER_HOME=str(home)), log)
    with DagsterInstance.from_config(str(home)) as instance:

        def stored() -> list[psutil.Process]:
            deadline = time.monotonic() + 120
            while not instance.get_runs():
                assert process.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            return psutil.Process(process.pid).children(recursive=True)

        code = stop_when(process, stored, signal.SIGINT, group=True)

        assert code == 130, log.read_text()
        (run,) = instance.get_runs()
        assert run.status == DagsterRunStatus.CANCELED, run.status
        [canceled] = instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_CANCELED)
        assert "visibility-sync was stopped (Ctrl+C or SIGTERM) while the run was NOT_STARTED" in (
            canceled.message or ""
        )
