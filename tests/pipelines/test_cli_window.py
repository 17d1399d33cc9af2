"""``visibility-sync run``'s dates: without ``--start``, the daily schedule's window (yesterday and the
lookback days, from the first partition); an explicit ``--start`` before the first partition is refused."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from pipelines.cli import main
from pipelines.cli_output import EXIT_CONFIG, EXIT_OK
from sandbox.testing import SandboxHandle


def test_run_without_start_begins_at_the_first_partition_when_the_lookback_reaches_before_it(
    env: Path, sandbox_factory: Callable[..., SandboxHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    today = dt.datetime.now(dt.UTC).date()
    yesterday = today - dt.timedelta(days=1)
    current = sandbox_factory(today=today)  # the command's window ends at the real yesterday
    monkeypatch.setenv("VISIBILITY_API_URL", current.url)
    monkeypatch.setenv("VISIBILITY_API_KEY", current.keys["workspace"])
    monkeypatch.setenv("VISIBILITY_START_DATE", yesterday.isoformat())  # the lookback reaches 3 days back
    assert main(["run", "--engine", "all", "--quiet"]) == EXIT_OK
    with duckdb.connect(str(env), read_only=True) as con:
        dates = con.execute("SELECT DISTINCT date FROM visibility.competitor_trends").fetchall()
    assert dates == [(yesterday,)]


def test_an_explicit_start_before_the_first_partition_fails_naming_it(
    env: Path, sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VISIBILITY_START_DATE", "2026-10-30")
    sandbox.reset_stats()
    assert main(["run", "--start", "2026-10-29", "--end", "2026-10-31", "--quiet"]) == EXIT_CONFIG
    err = " ".join(capsys.readouterr().err.split())
    assert "--start 2026-10-29 is before the first partition 2026-10-30" in err
    assert sandbox.stats() == {}  # refused before any request


def test_run_without_start_before_the_first_partition_says_there_is_none_yet(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    today = dt.datetime.now(dt.UTC).date()
    monkeypatch.setenv("VISIBILITY_START_DATE", today.isoformat())
    assert main(["run", "--quiet"]) == EXIT_CONFIG
    assert f"no partition yet: VISIBILITY_START_DATE {today} is today or later" in capsys.readouterr().err
