"""``fail_orphaned_runs``: a recorded run whose process is gone is ended, and frees its pool slots.

Real instance (``instance_for_test``, SQLite storage), real processes: a "dead" pid is the pid of a
child that ran and was reaped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from dagster import DagsterInstance, DagsterRunStatus, instance_for_test

# records a run in a given status without executing it: no public API does that
from dagster._core.test_utils import create_run_for_test

from pipelines.orphans import HOST_TAG, PID_TAG, STARTED_TAG, fail_orphaned_runs, process_tags

POOL = "visibility_api"


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with instance_for_test() as instance:
        yield instance


def dead_pid() -> int:
    """The pid of a process that ran and was reaped: nothing runs under it (pids are not reused
    this soon)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def started_run(
    instance: DagsterInstance, tags: dict[str, str], status: DagsterRunStatus = DagsterRunStatus.STARTED
) -> str:
    return create_run_for_test(instance, job_name="visibility_sync", status=status, tags=tags).run_id


def status(instance: DagsterInstance, run_id: str) -> DagsterRunStatus:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return run.status


def test_process_tags_name_this_process_and_host() -> None:
    tags = process_tags()

    assert tags[PID_TAG] == str(os.getpid())
    assert tags[HOST_TAG] == socket.gethostname()
    if sys.platform.startswith("linux"):
        assert STARTED_TAG in tags


def test_a_started_run_whose_process_is_gone_is_failed_naming_the_pid(instance: DagsterInstance) -> None:
    pid = dead_pid()
    run_id = started_run(instance, {**process_tags(), PID_TAG: str(pid)})
    said: list[str] = []

    assert fail_orphaned_runs(instance, said.append) == [run_id]

    assert status(instance, run_id) == DagsterRunStatus.FAILURE
    failure = instance.all_logs(run_id)[-1]
    assert f"run process {pid}" in failure.message and "is gone" in failure.message
    assert said and run_id in said[0] and str(pid) in said[0]


def test_a_run_whose_process_lives_is_left_alone(instance: DagsterInstance) -> None:
    run_id = started_run(instance, process_tags())  # this very process

    assert fail_orphaned_runs(instance) == []
    assert status(instance, run_id) == DagsterRunStatus.STARTED


def test_runs_of_another_host_or_without_the_tags_are_left_alone(instance: DagsterInstance) -> None:
    pid = str(dead_pid())
    elsewhere = started_run(instance, {PID_TAG: pid, HOST_TAG: socket.gethostname() + "-elsewhere"})
    untagged = started_run(instance, {})
    no_pid = started_run(instance, {HOST_TAG: socket.gethostname()})

    assert fail_orphaned_runs(instance) == []
    assert {status(instance, r) for r in (elsewhere, untagged, no_pid)} == {DagsterRunStatus.STARTED}


def test_finished_runs_are_not_touched(instance: DagsterInstance) -> None:
    tags = {**process_tags(), PID_TAG: str(dead_pid())}
    done = started_run(instance, tags, DagsterRunStatus.SUCCESS)
    failed = started_run(instance, tags, DagsterRunStatus.FAILURE)

    assert fail_orphaned_runs(instance) == []
    assert status(instance, done) == DagsterRunStatus.SUCCESS
    assert status(instance, failed) == DagsterRunStatus.FAILURE


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="start times come from /proc")
def test_a_pid_reused_by_another_process_counts_as_gone(instance: DagsterInstance) -> None:
    # this process's pid, but recorded with another start time: the run's process is not this one
    run_id = started_run(instance, {**process_tags(), STARTED_TAG: "another-boot/1"})

    assert fail_orphaned_runs(instance) == [run_id]
    assert status(instance, run_id) == DagsterRunStatus.FAILURE


def test_a_starting_run_is_failed_and_a_canceling_one_canceled(instance: DagsterInstance) -> None:
    tags = {**process_tags(), PID_TAG: str(dead_pid())}
    starting = started_run(instance, tags, DagsterRunStatus.STARTING)
    canceling = started_run(instance, tags, DagsterRunStatus.CANCELING)

    assert sorted(fail_orphaned_runs(instance)) == sorted([starting, canceling])
    assert status(instance, starting) == DagsterRunStatus.FAILURE
    assert status(instance, canceling) == DagsterRunStatus.CANCELED


def test_the_pool_slots_of_a_failed_run_are_freed_for_the_next_runs(instance: DagsterInstance) -> None:
    """A killed run keeps its claimed slots; with every slot held, later syncs would wait for ever."""
    storage = instance.event_log_storage
    storage.set_concurrency_slots(POOL, 1)
    run_id = started_run(instance, {**process_tags(), PID_TAG: str(dead_pid())})
    assert storage.claim_concurrency_slot(POOL, run_id, "sync_daily").is_claimed
    assert storage.get_concurrency_info(POOL).active_slot_count == 1

    fail_orphaned_runs(instance)

    assert storage.get_concurrency_info(POOL).active_slot_count == 0
    assert storage.claim_concurrency_slot(POOL, "next-run", "sync_daily").is_claimed


def test_a_run_that_inherited_another_runs_process_tags_is_left_alone(instance: DagsterInstance) -> None:
    """A run re-executed from the UI copies its parent's tags; its own process is a run worker."""
    parent_tags = {**process_tags("parent-run-id"), PID_TAG: str(dead_pid())}
    child = started_run(instance, parent_tags)
    own = started_run(instance, {**process_tags(), PID_TAG: str(dead_pid())})

    assert fail_orphaned_runs(instance) == [own]
    assert status(instance, child) == DagsterRunStatus.STARTED


def test_a_run_left_not_started_by_its_killed_process_is_failed(instance: DagsterInstance) -> None:
    """A command-line run killed while Dagster stores its planned events never started."""
    run_id = started_run(instance, {**process_tags(), PID_TAG: str(dead_pid())}, DagsterRunStatus.NOT_STARTED)

    assert fail_orphaned_runs(instance) == [run_id]
    assert status(instance, run_id) == DagsterRunStatus.FAILURE
