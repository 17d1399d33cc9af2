"""The command line's first contact with the service, and its stops: a wrong URL or a refused
connection fails at once (the service was never reached) while a service lost after answering keeps
the retry deadline; a refused key prints no empty table; a base URL with a path is named as the
problem; a Ctrl+C that lands in a library's cleanup adds no traceback."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path

import pytest

from pipelines.cli import main, quiet_interrupts
from pipelines.cli_output import EXIT_REFUSED, EXIT_UNAVAILABLE
from resources.api.budget import RequestBudget
from resources.api.calls import NEVER_REACHED_SECONDS
from resources.api.client import VisibilityClient
from resources.api.errors import TransportError
from sandbox.testing import SandboxHandle
from tests.pipelines.test_cli import env  # noqa: F401  (the fixture)

ONE_DAY = ["run", "--start", "2026-10-30", "--end", "2026-10-31"]


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_refused_connection_at_the_start_fails_after_the_short_deadline_not_the_sync_one(
    env: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VISIBILITY_API_URL", dead_url())  # VISIBILITY_RETRY_DEADLINE_SECONDS: 300 s
    assert main([*ONE_DAY, "--quiet"]) == EXIT_UNAVAILABLE
    err = " ".join(capsys.readouterr().err.split())
    assert f"retry deadline {NEVER_REACHED_SECONDS:g}s" in err
    assert "it never answered: check the URL" in err


def test_a_service_lost_after_it_answered_keeps_the_syncs_retry_deadline(sandbox: SandboxHandle) -> None:
    deadline = NEVER_REACHED_SECONDS + 1
    budget = RequestBudget(2, retry_deadline_seconds=deadline)  # one sync's clients share it
    key = sandbox.keys["workspace"]
    with VisibilityClient(sandbox.url, key, budget=budget) as reached:
        assert list(reached.list_brands())
    with (
        VisibilityClient(dead_url(), key, budget=budget, backoff_base_seconds=0.1) as lost,
        pytest.raises(TransportError) as failed,
    ):
        list(lost.list_brands())
    assert f"retry deadline {deadline:g}s" in str(failed.value)
    assert "never answered" not in str(failed.value)


def test_a_refused_key_prints_the_error_and_no_empty_table(
    env: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VISIBILITY_API_KEY", "vsk_not_a_key_of_this_service")
    assert main([*ONE_DAY, "--quiet"]) == EXIT_REFUSED
    out, err = capsys.readouterr()
    assert "rows landed this run" not in out and "┏" not in out
    assert "no table was written" in " ".join(out.split())
    assert "VISIBILITY_API_KEY" in err


def test_a_base_url_with_a_path_is_named_as_the_problem_not_the_keys_scope(
    env: Path,  # noqa: F811
    sandbox: SandboxHandle,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VISIBILITY_API_URL", f"{sandbox.url}/api")
    assert main([*ONE_DAY, "--quiet"]) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "check VISIBILITY_API_URL" in err and "without a path such as /api" in err
    assert "key's scope" not in err


def test_a_ctrl_c_logged_by_a_library_prints_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    """What logging writes for a record no handler takes (SQLAlchemy's, in the command's process)."""
    quiet_interrupts()
    last_resort = logging.lastResort
    assert last_resort is not None
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        interrupted = sys.exc_info()
    for message, exc_info in (("Exception closing connection", interrupted), ("a real failure", None)):
        record = {"msg": message, "levelno": logging.ERROR, "exc_info": exc_info}
        last_resort.handle(logging.makeLogRecord(record))
    err = capsys.readouterr().err
    assert "Exception closing connection" not in err and "KeyboardInterrupt" not in err
    assert "a real failure" in err
