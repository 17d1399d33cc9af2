"""``visibility-sync run`` is the ``visibility_sync`` job the schedule launches: recorded under its
name, listing brands once, and stopping at the first sign of an unreachable service."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from dagster import DagsterInstance

from pipelines.cli import main
from pipelines.cli_output import EXIT_OK, EXIT_UNAVAILABLE
from sandbox.testing import SandboxHandle
from tests.pipelines.test_cli import env  # noqa: F401  (the fixture)

ONE_DAY = ["--start", "2026-10-30", "--end", "2026-10-31"]


def test_a_recorded_sync_is_one_visibility_sync_run_with_its_checks_listing_brands_once(
    env: Path,  # noqa: F811
    sandbox: SandboxHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    sandbox.reset_stats()

    assert main(["run", *ONE_DAY, "--quiet"]) == EXIT_OK

    stats = sandbox.stats()
    assert sum(stats["GET /v1/brands"].values()) == 1  # shared by both steps and every table
    brands = 3
    assert sum(stats["GET /v1/brands/{id}/prompts"].values()) == brands
    assert sum(stats["GET /v1/brands/{id}/tracked-competitors"].values()) == brands
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        assert run.job_name == "visibility_sync"  # what the UI lists, as for a scheduled run
        assert run.tags["visibility/pid"]  # so a later command can fail it if this one is killed
        checks = {e.check_name for e in _evaluations(instance, run.run_id)}
    assert {"keys_unique", "share_of_voice_sums_to_100", "no_empty_partitions"} <= checks


def _evaluations(instance: DagsterInstance, run_id: str) -> list:
    from dagster import DagsterEventType

    records = instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    return [r.dagster_event.event_specific_data for r in records]


def test_an_unreachable_service_fails_the_sync_once_and_skips_the_rest(
    env: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("VISIBILITY_API_URL", dead)
    monkeypatch.setenv("VISIBILITY_RETRY_DEADLINE_SECONDS", "2")

    assert main(["run", *ONE_DAY, "--quiet"]) == EXIT_UNAVAILABLE

    # one deadline for the whole sync, not one per step: the first step's failure skips the second
    err = capsys.readouterr().err
    assert [line.split(":")[0] for line in err.splitlines() if line.startswith("failed")] == [
        "failed visibility_sync chatgpt..all"
    ]
    assert dead in err
    assert "skipped visibility_sync chatgpt..all: sync_daily" in err
