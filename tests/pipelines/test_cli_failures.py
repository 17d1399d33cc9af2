"""How ``visibility-sync`` fails: before any request on a bad warehouse, readably on a refused key, and
once on an unreachable service."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.cli_output import EXIT_CONFIG, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE
from sandbox.testing import SandboxHandle
from tests.pipelines.test_cli import ROOT

ONE_DAY = ["--start", "2026-10-30", "--end", "2026-10-31", "--quiet"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_postgres_warehouse_fails_before_any_request(
    env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", f"postgresql://u:hunter2@127.0.0.1:{_closed_port()}/db")
    sandbox.reset_stats()
    assert main(["run", *ONE_DAY]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "VISIBILITY_WAREHOUSE" in err and "u:***@127.0.0.1" in err
    assert "hunter2" not in err
    assert sandbox.stats() == {}


def test_a_duckdb_folder_that_cannot_be_created_fails_before_any_request(
    env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    blocker = env.parent / "not-a-folder"
    blocker.write_text("a file where the warehouse's folder should be")
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", f"duckdb:///{blocker}/visibility.duckdb")
    sandbox.reset_stats()
    assert main(["run", *ONE_DAY]) == EXIT_CONFIG
    assert "VISIBILITY_WAREHOUSE" in capsys.readouterr().err
    assert sandbox.stats() == {}


def test_a_revoked_key_prints_the_api_error_and_stops_after_the_first_run(
    env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("VISIBILITY_API_KEY", sandbox.keys["revoked"])
    sandbox.reset_stats()
    assert main(["run", "--engine", "chatgpt", "--engine", "all", *ONE_DAY]) == EXIT_REFUSED
    captured = capsys.readouterr()
    output = captured.out + captured.err
    err = " ".join(captured.err.split())  # the console wraps long lines
    failures = err.count("failed ")
    assert failures == err.count("failed visibility_sync chatgpt..chatgpt: sync_snapshots:") == 1
    assert "invalid_api_key" in err and "X-Request-Id" in err
    assert "Error occurred while executing" not in output
    assert "Traceback" not in output
    assert sandbox.keys["revoked"] not in output
    # one refused request, then nothing: the rest of the snapshot step, the date x engine step and
    # the second engine span's run never started
    assert "skipped visibility_sync chatgpt..chatgpt: sync_daily" in err
    stats = sandbox.stats()
    assert {status for by_status in stats.values() for status in by_status} == {"401"}
    assert sum(sum(by_status.values()) for by_status in stats.values()) <= failures


def test_an_unreachable_service_stops_the_sync_after_its_first_run(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Every later run would meet the same dead service: the second engine span's run never starts."""
    monkeypatch.setenv("VISIBILITY_API_URL", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("VISIBILITY_RETRY_DEADLINE_SECONDS", "2")
    assert main(["run", "--engine", "chatgpt", "--engine", "all", *ONE_DAY]) == EXIT_UNAVAILABLE
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "failed visibility_sync chatgpt..chatgpt: sync_snapshots:" in err
    assert "(exit 4)" in err
    assert "visibility_daily" not in err  # the run of the second span (all..all)


def test_verbose_shows_dagster_s_own_log(
    env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("VISIBILITY_API_KEY", sandbox.keys["revoked"])
    assert main(["run", "--engine", "chatgpt", *ONE_DAY, "--verbose"]) == EXIT_REFUSED
    assert "STEP_FAILURE" in capsys.readouterr().err


def test_a_bad_audit_setting_does_not_stop_a_sync(env: Path) -> None:
    """The sync uses no sensor: a malformed VISIBILITY_AUDIT_* value is the sensor's problem."""
    environ = {**os.environ, "VISIBILITY_AUDITS_PER_DAY": "ten"}
    result = subprocess.run(
        [str(ROOT / ".venv/bin/visibility-sync"), "run", "--engine", "chatgpt", *ONE_DAY],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == EXIT_OK, result.stderr


def test_the_duckdb_check_creates_the_folder_but_not_the_file(tmp_path: Path) -> None:
    """A first sync starts from nothing: the folder is made, the file is left to the first write."""
    from resources.warehouse.duckdb import DuckDBWarehouse

    path = tmp_path / "new" / "visibility.duckdb"
    DuckDBWarehouse(path).check_connection()
    assert path.parent.is_dir()
    assert list(path.parent.iterdir()) == []
