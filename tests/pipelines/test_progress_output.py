"""``visibility-sync run`` shows its progress bars on a terminal and keeps a piped output clean.

The command runs in its own process against the sandbox, once under a pseudo-terminal (what a user's
shell gives it) and once with its output piped (what cron, CI or ``| tee`` give it).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli_output import EXIT_OK
from tests.assets.conftest import FACTS, TRENDS
from tests.pipelines.terminal import run_on_a_terminal
from tests.pipelines.test_cli import env  # noqa: F401  # the sandbox URL and key, a fresh DuckDB file

ROOT = Path(__file__).resolve().parents[2]
ARGV = ["run", "--start", "2026-10-30", "--end", "2026-10-31", "--engine", "chatgpt"]
TIMEOUT_SECONDS = 120.0
#: A progress line: the table, its bar, requests done / planned (made, once landed).
PROGRESS_LINE = re.compile(r"^(\w+)\s+━+\s+(\d+)/(\d+)\s+requests\b", re.MULTILINE)
#: Variables that make rich treat any output as a terminal, or none as one.
RICH_OVERRIDES = ("FORCE_TERMINAL", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "COLUMNS", "LINES")


def command_env() -> dict[str, str]:
    """The test's environment (the ``env`` fixture's settings) for the command, importing this tree."""
    environ = {k: v for k, v in os.environ.items() if k not in RICH_OVERRIDES}
    environ.update(PYTHONPATH=str(ROOT), TERM="xterm-256color")
    return environ


def command() -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", *ARGV]


def test_a_terminal_shows_a_progress_bar_per_daily_table_up_to_its_planned_calls(env: Path) -> None:  # noqa: F811
    code, shown = run_on_a_terminal(command(), env=command_env(), cwd=ROOT, timeout=TIMEOUT_SECONDS)

    assert code == EXIT_OK, shown
    finished = {table: (done, planned) for table, done, planned in PROGRESS_LINE.findall(shown)}
    assert set(FACTS + TRENDS) <= finished.keys(), shown
    assert all(done == planned for done, planned in finished.values()), sorted(finished.items())
    # every daily table plans calls; a snapshot table the daily fetches listed made none of its own
    assert all(int(finished[table][1]) > 0 for table in FACTS + TRENDS), sorted(finished.items())
    assert "rows landed this run" in shown


def test_a_piped_output_holds_the_summary_and_no_progress_bar(env: Path) -> None:  # noqa: F811
    result = subprocess.run(
        command(), capture_output=True, text=True, env=command_env(), cwd=ROOT, timeout=TIMEOUT_SECONDS
    )

    assert result.returncode == EXIT_OK, result.stderr
    assert "rows landed this run" in result.stdout and "prompt_mentions" in result.stdout
    assert not PROGRESS_LINE.findall(result.stdout + result.stderr)
    assert "\x1b[" not in result.stdout  # no cursor movement or colour either
    fetching = re.findall(r"\] (\w+): fetching, ", result.stdout + result.stderr)
    assert fetching and len(fetching) == len(set(fetching)), fetching  # once, head start or not


def test_status_lines_show_one_api_wait_per_cause_every_few_seconds_and_each_warehouse_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every thread waiting for the rate window announces its wait; a user reads one line of it. The
    DuckDB lock warnings come spaced by their source, each after the one before."""
    from pipelines.cli import _status_lines
    from resources.api.budget import RequestBudget

    budget = RequestBudget(8)
    warehouse = logging.getLogger("visibility.warehouse")
    with _status_lines(budget, None):
        for _ in range(4):  # four fetch threads, the same window
            budget.announce("rate_limit", 2.0, "rate limit: waiting 2.0 s (X-RateLimit-Reset)")
        budget.announce("unreachable", 1.0, "service unreachable", warning=True)
        warehouse.warning("DuckDB file x.duckdb is in use by another process")
        warehouse.warning("waiting for the DuckDB lock on x.duckdb")
    assert capsys.readouterr().err.splitlines() == [
        "waiting: rate limit: waiting 2.0 s (X-RateLimit-Reset)",
        "waiting: service unreachable",
        "waiting: DuckDB file x.duckdb is in use by another process",
        "waiting: waiting for the DuckDB lock on x.duckdb",
    ]
