"""``visibility-sync run`` asks the API while Dagster is still importing, and its daily step lands
those fetches without asking anything again (``sync/head_start.py``), recorded or not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli_output import EXIT_OK
from sandbox.testing import SandboxHandle
from sync.catalog import DAILY
from tests.pipelines.test_cli import env  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]
ONE_DAY = ["run", "--start", "2026-10-30", "--end", "2026-10-31", "--quiet"]

#: The command in a fresh interpreter that notes whether Dagster and the definitions were loaded at its
#: first request, and which tables the daily step took from the head start or fetched itself.
_PROBE = """
import json, sys
import httpx
from sync import driver
seen = {"definitions_at_first_request": None, "taken": [], "fetched_by_the_step": []}
send = httpx.Client.send
def noting_send(self, request, *args, **kwargs):
    if seen["definitions_at_first_request"] is None:  # imported once Dagster's import has ended
        seen["definitions_at_first_request"] = "pipelines.syncs" in sys.modules
    return send(self, request, *args, **kwargs)
httpx.Client.send = noting_send
take, own = driver._DailyFetch._take_ahead, driver._DailyFetch._fetch_own
def noting_take(self, table, stop):
    outcome = take(self, table, stop)
    if outcome is not None:
        seen["taken"].append(table.spec.name)
    return outcome
def noting_own(self, table, *args, **kwargs):
    seen["fetched_by_the_step"].append(table.spec.name)
    return own(self, table, *args, **kwargs)
driver._DailyFetch._take_ahead, driver._DailyFetch._fetch_own = noting_take, noting_own
from pipelines.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, **seen}))
"""


def probe(argv: list[str], environ: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        cwd=ROOT,
        env={**environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    return json.loads(lines[-1])


@pytest.mark.parametrize("recorded", [False, True], ids=["ephemeral instance", "DAGSTER_HOME"])
def test_the_daily_step_lands_what_the_command_fetched_before_dagster_was_ready(
    env: Path,  # noqa: F811
    sandbox: SandboxHandle,
    tmp_path: Path,
    recorded: bool,
) -> None:
    environ = dict(os.environ)
    if recorded:
        home = tmp_path / "dagster_home"
        home.mkdir()
        environ["DAGSTER_HOME"] = str(home)
    sandbox.reset_stats()

    seen = probe(ONE_DAY, environ)

    assert seen["code"] == EXIT_OK, seen
    assert seen["taken"] == [table.spec.name for table in DAILY]
    assert seen["fetched_by_the_step"] == []
    # an ephemeral instance's journal folder is known before Dagster: the fetch starts before it loads
    assert seen["definitions_at_first_request"] is recorded
    stats = sandbox.stats()
    assert sum(stats["GET /v1/brands"].values()) == 1  # one listing for the head start and both steps
    assert sum(stats["GET /v1/brands/{id}/prompts"].values()) == 3


def test_a_second_engine_span_is_fetched_by_its_own_run(
    env: Path,  # noqa: F811
    sandbox: SandboxHandle,
) -> None:
    # chatgpt and all are not adjacent in Dagster's engine order: two runs, the head start for the first
    seen = probe([*ONE_DAY, "--engine", "chatgpt", "--engine", "all"], dict(os.environ))

    assert seen["code"] == EXIT_OK, seen
    assert seen["taken"] == [table.spec.name for table in DAILY]
    assert seen["fetched_by_the_step"] == [table.spec.name for table in DAILY]
