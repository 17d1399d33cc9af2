"""``visibility-sync audit | untrack-competitor | topic create | topic rename`` against the sandbox:
confirmation, one line per outcome, the documented exit codes, errors with code and X-Request-Id."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pydantic
import pytest
from dagster import DagsterInstance, RunsFilter

from pipelines.cli import build_parser, main
from pipelines.cli_output import EXIT_CONFIG, EXIT_OK, EXIT_PARTIAL, EXIT_REFUSED, EXIT_UNAVAILABLE
from pipelines.operation_jobs import AuditUrlConfig
from resources.api import write_operations
from resources.api.client import VisibilityClient
from sandbox.testing import SandboxHandle
from tests.operations.helpers import changes, first_brand, topic_names, tracked_names

ROOT = Path(__file__).resolve().parents[2]


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_untrack_competitor_by_name_untracks_it(
    env: Path, sandbox: SandboxHandle, client: VisibilityClient, capsys: pytest.CaptureFixture[str]
) -> None:
    brand = first_brand(client)
    competitor = tracked_names(client, brand["id"])[0]
    assert main(["untrack-competitor", competitor.lower(), "--brand", brand["name"], "--yes"]) == EXIT_OK
    out = one_line(capsys.readouterr().out)
    assert f"About to untrack competitor '{competitor}'" in out and f"'{competitor}'" in out
    assert out.endswith(": untracked")
    assert competitor not in tracked_names(client, brand["id"])
    assert sandbox.keys["workspace"] not in out


def test_without_a_terminal_and_without_yes_nothing_is_requested(
    env: Path, sandbox: SandboxHandle, client: VisibilityClient, capsys: pytest.CaptureFixture[str]
) -> None:
    brand = first_brand(client)
    competitor = tracked_names(client, brand["id"])[0]
    sandbox.reset_stats()
    assert main(["untrack-competitor", competitor, "--brand", brand["id"]]) == EXIT_CONFIG
    assert main(["topic", "create", "Anything", "--brand", brand["id"]]) == EXIT_CONFIG
    err = one_line(capsys.readouterr().err)
    assert "stdin is not a terminal: pass --yes" in err and "visibility-sync topic create" in err
    assert sandbox.stats() == {}  # refused before the first request
    assert competitor in tracked_names(client, brand["id"])


def run_at_a_terminal(argv: list[str], answer: str) -> subprocess.CompletedProcess[str]:
    """The real command with a terminal on stdin that answers ``answer`` to the prompt."""
    import pty

    leader, follower = pty.openpty()
    try:
        os.write(leader, f"{answer}\n".encode())
        return subprocess.run(
            [sys.executable, "-c", "from pipelines.cli import console_main; console_main()", *argv],
            stdin=follower,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        os.close(follower)
        os.close(leader)


def test_answering_no_at_the_prompt_changes_nothing_and_yes_goes_ahead(
    env: Path, sandbox: SandboxHandle, client: VisibilityClient
) -> None:
    brand = first_brand(client)
    competitor = tracked_names(client, brand["id"])[0]
    argv = ["untrack-competitor", competitor, "--brand", brand["name"]]
    declined = run_at_a_terminal(argv, "n")
    assert declined.returncode == EXIT_PARTIAL, declined.stderr
    assert "Proceed? [y/N]" in declined.stdout and "cancelled: nothing was changed" in declined.stderr
    assert changes(sandbox) == {}
    assert competitor in tracked_names(client, brand["id"])
    accepted = run_at_a_terminal(argv, "y")
    assert accepted.returncode == EXIT_OK, accepted.stderr
    assert one_line(accepted.stdout).endswith(": untracked")
    assert competitor not in tracked_names(client, brand["id"])


def test_topic_create_then_rename_with_one_line_each(
    env: Path, client: VisibilityClient, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    brand = first_brand(client)
    assert main(["topic", "create", "Onboarding", "--brand", brand["name"], "-y"]) == EXIT_OK
    assert one_line(capsys.readouterr().out).endswith(": created")
    sandbox.reset_stats()
    assert main(["topic", "create", "onboarding", "--brand", brand["name"], "-y"]) == EXIT_OK
    assert "already has topic 'Onboarding'" in one_line(capsys.readouterr().out)
    assert changes(sandbox) == {}  # the same name again creates nothing
    assert main(["topic", "rename", "Onboarding", "Getting started", "--brand", brand["id"], "-y"]) == EXIT_OK
    assert one_line(capsys.readouterr().out).endswith("renamed from 'Onboarding' to 'Getting started'")
    names = topic_names(client, brand["id"])
    assert "Getting started" in names and "Onboarding" not in names


def test_audit_waits_for_the_report_and_lands_it(
    env: Path, client: VisibilityClient, capsys: pytest.CaptureFixture[str]
) -> None:
    brand = first_brand(client)
    url = f"https://{brand['domain']}/blog/launch"
    argv = ["audit", url, "--brand", brand["name"], "--yes", "--poll-interval", "0.1"]
    assert main(argv) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert "waiting up to 300s for its report" in one_line("\n".join(lines))
    assert "complete, score" in lines[-1] and lines[-1].endswith("landed in audit_reports")
    with duckdb.connect(str(env), read_only=True) as con:
        rows = con.sql("SELECT url, status, report IS NOT NULL FROM visibility.audit_reports").fetchall()
    assert rows == [(url, "complete", True)]


def test_an_audit_past_its_timeout_exits_1_naming_the_poll_path(
    env: Path,
    sandbox_factory: Callable[..., SandboxHandle],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    slow = sandbox_factory(audit_delay_seconds=60.0)
    monkeypatch.setenv("VISIBILITY_API_URL", slow.url)
    monkeypatch.setenv("VISIBILITY_API_KEY", slow.keys["workspace"])
    with VisibilityClient(slow.url, slow.keys["workspace"]) as client:
        brand_id = first_brand(client)["id"]
    argv = [
        "audit",
        "https://example.com/",
        "--brand",
        brand_id,
        "-y",
        "--timeout",
        "0.3",
        "--poll-interval",
        "0.1",
    ]
    assert main(argv) == EXIT_PARTIAL
    err = one_line(capsys.readouterr().err)
    assert "still pending after 0.3s" in err and "/v1/audit-reports/" in err and "landed as pending" in err
    with duckdb.connect(str(env), read_only=True) as con:
        assert con.sql("SELECT status FROM visibility.audit_reports").fetchall() == [("pending",)]


def test_unknown_names_exit_1_with_what_is_known(
    env: Path, sandbox: SandboxHandle, client: VisibilityClient, capsys: pytest.CaptureFixture[str]
) -> None:
    brand = first_brand(client)
    assert main(["untrack-competitor", "Nobody", "--brand", "No Such Brand", "-y"]) == EXIT_PARTIAL
    assert "no brand reachable with this key has the id or name 'No Such Brand'" in one_line(
        capsys.readouterr().err
    )
    assert main(["untrack-competitor", "Nobody", "--brand", brand["name"], "-y"]) == EXIT_PARTIAL
    assert "no competitor tracked by brand" in one_line(capsys.readouterr().err)
    assert main(["topic", "rename", "Nothing", "X", "--brand", brand["name"], "-y"]) == EXIT_PARTIAL
    assert "no topic of brand" in one_line(capsys.readouterr().err)
    assert changes(sandbox) == {}


def test_a_malformed_url_is_a_usage_error_before_any_request(
    env: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.reset_stats()
    assert main(["audit", "example.com/page", "--brand", "x", "-y"]) == EXIT_CONFIG
    assert "absolute http(s) URL" in capsys.readouterr().err
    assert sandbox.stats() == {}


WAIT_FLAGS = [
    ("--poll-interval", "poll_interval_seconds", write_operations.MAX_POLL_INTERVAL_SECONDS),
    ("--timeout", "timeout_seconds", write_operations.MAX_AUDIT_TIMEOUT_SECONDS),
]


@pytest.mark.parametrize(("flag", "field", "most"), WAIT_FLAGS)
def test_an_audit_wait_flag_the_job_would_refuse_is_a_usage_error_naming_the_flag_before_any_request(
    env: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str], flag: str, field: str, most: float
) -> None:
    over = f"{most + 1:g}"
    with pytest.raises(pydantic.ValidationError, match=field):  # the job refuses it ...
        AuditUrlConfig(brand="b", url="https://example.com/page", **{field: most + 1})
    sandbox.reset_stats()
    with pytest.raises(SystemExit) as exited:  # ... so the command refuses it, before prompt or request
        main(["audit", "https://example.com/page", "--brand", "x", "-y", flag, over])
    assert exited.value.code == EXIT_CONFIG
    err = one_line(capsys.readouterr().err)
    assert f"argument {flag}: must be more than 0 and at most {most:g} seconds, got '{over}'" in err
    assert sandbox.stats() == {}


@pytest.mark.parametrize(("flag", "field", "most"), WAIT_FLAGS)
def test_an_audit_wait_flag_at_the_job_s_bound_is_taken_by_both(flag: str, field: str, most: float) -> None:
    args = build_parser().parse_args(["audit", "https://example.com/page", "--brand", "x", flag, f"{most:g}"])
    assert getattr(args, field.removesuffix("_seconds")) == most
    assert getattr(AuditUrlConfig(brand="b", url="https://example.com/page", **{field: most}), field) == most


def test_a_refused_audit_quotes_the_code_and_the_request_id(
    env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VISIBILITY_API_KEY", sandbox.keys["trialing"])  # a trial may not order audits
    with VisibilityClient(sandbox.url, sandbox.keys["trialing"]) as client:
        brand_id = first_brand(client)["id"]
    assert main(["audit", "https://example.com/", "--brand", brand_id, "-y"]) == EXIT_REFUSED
    err = one_line(capsys.readouterr().err)
    assert "HTTP 403 forbidden" in err and "X-Request-Id" in err
    assert sandbox.keys["trialing"] not in err


def test_a_failing_service_exits_4_with_code_and_request_id(
    env: Path, sandbox: SandboxHandle, client: VisibilityClient, capsys: pytest.CaptureFixture[str]
) -> None:
    brand = first_brand(client)
    sandbox.configure(fail_endpoints=["POST /v1/brands/{id}/topics"])
    assert main(["topic", "create", "Doomed", "--brand", brand["id"], "-y"]) == EXIT_UNAVAILABLE
    err = one_line(capsys.readouterr().err)
    assert "internal_error" in err and "X-Request-Id" in err
    assert sandbox.keys["workspace"] not in err


def test_with_dagster_home_the_change_is_recorded_as_a_run_of_its_job(
    env: Path, client: VisibilityClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    brand = first_brand(client)
    assert main(["topic", "create", "Recorded", "--brand", brand["id"], "-y"]) == EXIT_OK
    with DagsterInstance.get() as instance:
        runs = instance.get_runs(RunsFilter(job_name="create_topic"))
    assert len(runs) == 1 and runs[0].is_success
    assert runs[0].tags["visibility/launched_by"] == "visibility-sync"
