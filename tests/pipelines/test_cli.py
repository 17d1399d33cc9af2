"""``visibility-sync`` run, check and demo, exit codes included, against the sandbox."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipelines.cli import main
from pipelines.cli_output import EXIT_CONFIG, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE
from sandbox.testing import SandboxHandle

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, sandbox: SandboxHandle, tmp_path: Path) -> Path:
    """The sandbox's URL and workspace key, and a fresh DuckDB file; returns the file."""
    db = tmp_path / "cli.duckdb"
    for name in list(os.environ):
        if name.startswith(("VISIBILITY_", "DAGSTER_HOME")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("VISIBILITY_API_URL", sandbox.url)
    monkeypatch.setenv("VISIBILITY_API_KEY", sandbox.keys["workspace"])
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", f"duckdb:///{db}")
    return db


def served(sandbox: SandboxHandle) -> int:
    return sum(sum(by_status.values()) for by_status in sandbox.stats().values())


def test_check_passes_with_a_valid_key_in_one_request(env: Path, sandbox: SandboxHandle, capsys) -> None:
    sandbox.reset_stats()
    assert main(["check"]) == EXIT_OK
    out = " ".join(capsys.readouterr().out.split())
    assert "OK" in out and sandbox.url in out and "takes writes" in out  # the URL and the warehouse
    assert sandbox.stats() == {"GET /v1/brands": {"200": 1}}


def test_check_answers_without_loading_dagster(env: Path) -> None:
    probe = (
        "import sys; from pipelines.cli import main; code = main(['check']); "
        "print(code, 'dagster' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.stdout.strip().splitlines()[-1:] == [f"{EXIT_OK} False"], done.stdout + done.stderr


def test_check_also_checks_the_warehouse(env: Path, sandbox: SandboxHandle, capsys) -> None:
    env.write_text("not a database")  # an existing file that is not DuckDB's
    assert main(["check"]) == EXIT_CONFIG
    assert "VISIBILITY_WAREHOUSE" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("role", "code"),
    [
        ("revoked", "invalid_api_key"),
        ("past_due", "subscription_required"),
        ("no_api_plan", "plan_not_eligible"),
    ],
)
def test_check_says_what_is_wrong_with_a_refused_key(
    role: str, code: str, env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("VISIBILITY_API_KEY", sandbox.keys[role])
    assert main(["check"]) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert code in err
    assert sandbox.keys[role] not in err


def test_wrong_config_fails_before_any_request_naming_the_setting(
    env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    sandbox.reset_stats()
    monkeypatch.setenv("VISIBILITY_API_URL", "http://visibility.example.com")
    assert main(["check"]) == EXIT_CONFIG
    assert "VISIBILITY_API_URL" in capsys.readouterr().err
    monkeypatch.setenv("VISIBILITY_API_URL", sandbox.url)
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", "duckdb://no-file")
    assert main(["run", "--quiet"]) == EXIT_CONFIG
    assert "VISIBILITY_WAREHOUSE" in capsys.readouterr().err
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", f"duckdb:///{env}")
    monkeypatch.delenv("VISIBILITY_API_KEY")
    assert main(["run", "--quiet"]) == EXIT_CONFIG
    assert "VISIBILITY_API_KEY" in capsys.readouterr().err
    monkeypatch.setenv("VISIBILITY_API_KEY", sandbox.keys["workspace"])
    monkeypatch.setenv("VISIBILITY_CITATION_URLS", "javascript:alert(1)")
    assert main(["run", "--quiet", "--brand", "a brand looked up by name"]) == EXIT_CONFIG
    assert "VISIBILITY_CITATION_URLS" in capsys.readouterr().err
    assert sandbox.stats() == {}


def test_check_reports_an_unreachable_service(env: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("VISIBILITY_API_URL", f"http://127.0.0.1:{port}")
    assert main(["check"]) == EXIT_UNAVAILABLE
    assert f"http://127.0.0.1:{port}" in capsys.readouterr().err  # names what it could not reach


@pytest.mark.parametrize("deadline", ["2", None])
def test_check_honours_the_retry_deadline_setting(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys, deadline: str | None
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("VISIBILITY_API_URL", f"http://127.0.0.1:{port}")
    if deadline is not None:
        monkeypatch.setenv("VISIBILITY_RETRY_DEADLINE_SECONDS", deadline)
    assert main(["check"]) == EXIT_UNAVAILABLE
    said = "2s" if deadline else "3s"  # unset: the check's own few seconds
    assert f"retry deadline {said}" in capsys.readouterr().err


def test_run_lands_the_range_and_prints_what_landed(env: Path, capsys) -> None:
    argv = ["run", "--start", "2026-10-30", "--end", "2026-10-31", "--engine", "chatgpt", "--engine", "all"]
    assert main([*argv, "--quiet"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "prompt_mentions" in out and "competitor_trends" in out
    with duckdb.connect(str(env), read_only=True) as con:
        engines = {
            r[0] for r in con.execute("SELECT DISTINCT engine FROM visibility.competitor_trends").fetchall()
        }
        mentions = con.execute(
            "SELECT DISTINCT checked_on::VARCHAR, engine FROM visibility.prompt_mentions"
        ).fetchall()
        brands = con.execute("SELECT COUNT(*) FROM visibility.brands").fetchone()[0]
    assert engines == {"chatgpt", "all"}
    assert mentions == [("2026-10-30", "chatgpt")]
    assert brands == 3


def test_run_with_a_revoked_key_exits_with_the_refused_code(
    env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("VISIBILITY_API_KEY", sandbox.keys["revoked"])
    argv = ["run", "--start", "2026-10-30", "--end", "2026-10-31", "--engine", "all", "--quiet"]
    assert main(argv) == EXIT_REFUSED
    assert "invalid_api_key" in capsys.readouterr().err


def test_demo_syncs_into_duckdb_and_prints_the_table_sizes(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.delenv("VISIBILITY_API_URL")
    monkeypatch.delenv("VISIBILITY_API_KEY")
    assert main(["demo", "--days", "1", "--quiet"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "rows in table" in out
    with duckdb.connect(str(env), read_only=True) as con:
        assert con.execute("SELECT COUNT(*) FROM visibility.prompt_mentions").fetchone()[0] > 0
        assert (
            con.execute("SELECT COUNT(*) FROM visibility.cited_pages WHERE engine = 'all'").fetchone()[0] > 0
        )


def test_the_console_script_exits_with_the_documented_code(env: Path, sandbox: SandboxHandle) -> None:
    environ = {**os.environ, "VISIBILITY_API_KEY": sandbox.keys["revoked"]}
    result = subprocess.run(
        [str(ROOT / ".venv/bin/visibility-sync"), "check"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == EXIT_REFUSED
    assert "VISIBILITY_API_KEY" in result.stderr
    assert sandbox.keys["revoked"] not in result.stdout + result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_resume_folder_another_user_made_first_stops_the_run_with_one_line_naming_it(
    env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    theirs = tmp_path / f"visibility-resume-{os.getuid()}"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 54321, 54321)
    argv = ["run", "--start", "2026-10-30", "--end", "2026-10-31", "--engine", "chatgpt", "--quiet"]
    assert main(argv) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"the folder {theirs} is owned by uid 54321" in err and "set TMPDIR to another folder" in err
    assert "Traceback" not in err and list(theirs.iterdir()) == []
