"""A first run that explains itself: ``visibility-sync demo`` says what it does from its first second
(sandbox, brands, each snapshot table, each date x engine table fetched and landed, in requests
throughout), ends with a query that works as printed for the warehouse in use and with where to see
the runs in the Dagster UI; ``--version`` and ``run --help`` come from the package and the settings.

The demo runs as a user runs it: its own process, its own sandbox, a fresh working directory.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

from pipelines.cli import dagster_hint, main, query_hint
from pipelines.cli_output import EXIT_OK
from resources.api.config import KEY_SETTING, URL_SETTING
from settings import Settings, load_settings
from sync import catalog
from tests.pipelines.terminal import run_on_a_terminal

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 180.0
SNAPSHOTS = [t.spec.name for t in catalog.SNAPSHOTS]
DAILY = [t.spec.name for t in catalog.DAILY]
#: Variables that make rich treat any output as a terminal, or none as one.
RICH_OVERRIDES = ("FORCE_TERMINAL", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "COLUMNS", "LINES")


def demo_env(**extra: str) -> dict[str, str]:
    """A new user's environment: no project settings, no Dagster home, this tree importable."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VISIBILITY_", "DAGSTER_")) and k not in RICH_OVERRIDES
    }
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", TERM="xterm-256color", COLUMNS="120", **extra)
    return env


def demo_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", "demo", "--days", "2", *args]


def hint_command(output: str) -> str:
    """The command printed under ``Query it``."""
    lines = output.splitlines()
    index = next(i for i, line in enumerate(lines) if "Query it" in line)
    return lines[index + 1].strip()


def run_piped(cwd: Path, env: dict[str, str]) -> tuple[int, list[tuple[float, str]], str, str]:
    """Exit code, the merged output's lines with when they came (seconds after the start), stdout and
    stderr apart."""
    started = time.monotonic()
    process = subprocess.Popen(
        demo_command(), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    timed: list[tuple[float, str]] = []
    streams: dict[str, list[str]] = {"out": [], "err": []}

    def read(name: str, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            timed.append((time.monotonic() - started, line.rstrip("\n")))
            streams[name].append(line)

    readers = [
        threading.Thread(target=read, args=("out", process.stdout)),
        threading.Thread(target=read, args=("err", process.stderr)),
    ]
    for reader in readers:
        reader.start()
    try:
        code = process.wait(timeout=TIMEOUT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for reader in readers:
            reader.join(timeout=10)
    return code, sorted(timed), "".join(streams["out"]), "".join(streams["err"])


def test_a_piped_demo_says_each_step_in_requests_and_ends_with_a_query_that_works_and_the_ui(
    tmp_path: Path,
) -> None:
    home = tmp_path / "dagster_home"
    code, timed, out, err = run_piped(tmp_path, demo_env(DAGSTER_HOME=str(home)))

    assert code == EXIT_OK, out + err
    # said before anything else (lines are sorted by arrival; no time bound: load only delays it)
    assert timed[0][1] == "Starting the sandbox on loopback...", timed[:3]
    # stderr: the progress, as it happens; stdout: what a script may keep (no progress in it)
    assert "listing brands" in err and "requests" in err and "calls" not in out + err
    for table in SNAPSHOTS:
        assert re.search(rf"{table}: landed \d+ rows? \(\d+ requests?\)", err), err
    for table in DAILY:
        assert re.search(rf"{table}: fetching, \d+ requests? planned", err), err
        assert re.search(rf"{table}: fetched \(\d+/\d+ requests?\), landing", err), err
        assert re.search(rf"{table}: landed \d+ rows? \(\d+ requests?", err), err
    assert ": landed " not in out and "rows landed this run" in out
    summary_at = next(t for t, line in timed if "rows landed this run" in line)
    landed_at = [t for t, line in timed if ": landed " in line]
    assert len(landed_at) == len(SNAPSHOTS) + len(DAILY) and max(landed_at) <= summary_at

    hint = hint_command(out)
    assert hint.startswith(str(Path(sys.executable).parent)) and "data/visibility.duckdb" in hint
    queried = subprocess.run(hint, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert queried.returncode == 0, queried.stderr
    assert "chatgpt" in queried.stdout and "mentions" in queried.stdout

    assert f"Recorded in Dagster (DAGSTER_HOME={home})" in out and "dagster dev -w" in out
    with DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs(RunsFilter(job_name="visibility_sync"))
        assert [r.status for r in runs] == [DagsterRunStatus.SUCCESS]
        for table in [*SNAPSHOTS, *DAILY]:
            assert instance.get_latest_materialization_event(AssetKey(table)) is not None, table


def test_on_a_terminal_every_table_gets_a_bar_in_requests_and_the_demo_says_how_to_record_runs(
    tmp_path: Path,
) -> None:
    code, shown = run_on_a_terminal(demo_command(), env=demo_env(), cwd=tmp_path, timeout=TIMEOUT_SECONDS)

    assert code == EXIT_OK, shown
    finished = dict(re.findall(r"^(\w+)\s+━+\s+(\d+/\d+) requests\s+landed", shown, re.MULTILINE))
    assert set(SNAPSHOTS + DAILY) <= finished.keys(), shown
    assert all(done == total for done, total in (f.split("/") for f in finished.values()))
    total = re.findall(r"^sync\s+━+\s+(\d+)/(\d+) requests\s+done", shown, re.MULTILINE)
    assert total and total[-1][0] == total[-1][1], shown  # every request of the sync, at the end
    assert "calls" not in shown
    assert "Not recorded for the Dagster UI: DAGSTER_HOME is not set" in shown
    assert "export DAGSTER_HOME=" in shown and "demo && " in shown


def test_without_dagster_home_the_hint_sets_it_with_the_projects_instance_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)

    hint = dagster_hint(cwd=ROOT)

    assert f"export DAGSTER_HOME={ROOT}\n" in hint  # its dagster.yaml: no copy to make
    assert ".venv/bin/dagster dev -w workspace.yaml" in hint  # the programs of this environment
    elsewhere = dagster_hint(cwd=tmp_path)
    assert f"-w {ROOT / 'workspace.yaml'}" in elsewhere


@pytest.mark.postgres
def test_with_postgres_the_closing_query_works_as_printed_without_the_password(
    postgres_url: str, pg_schema: str, tmp_path: Path
) -> None:
    from urllib.parse import urlsplit

    env = demo_env(VISIBILITY_WAREHOUSE=postgres_url, VISIBILITY_SCHEMA=pg_schema)
    result = subprocess.run(
        demo_command("--quiet"),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    assert result.returncode == EXIT_OK, result.stdout + result.stderr

    hint = hint_command(result.stdout)
    assert f"{pg_schema}.prompt_mentions" in hint
    password = urlsplit(postgres_url).password
    if password:  # given through libpq's own variable, as the hint says
        assert password not in result.stdout + result.stderr and "PGPASSWORD" in result.stdout
        env["PGPASSWORD"] = password
    queried = subprocess.run(
        hint, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert queried.returncode == 0, queried.stderr
    assert "chatgpt" in queried.stdout


def test_the_query_hint_never_shows_a_password_and_names_the_bigquery_table() -> None:
    postgres = query_hint(
        load_settings(env={"VISIBILITY_WAREHOUSE": "postgresql+psycopg://ana:s3cret@db.example:5432/wh"})
    )
    assert "s3cret" not in postgres and "postgresql://ana@db.example:5432/wh" in postgres
    assert "PGPASSWORD" in postgres

    bigquery = query_hint(load_settings(env={"VISIBILITY_WAREHOUSE": "bigquery://my-project/landing"}))
    code = bigquery.splitlines()[1].split(" -c ", 1)[1]
    python_code = subprocess.run(
        ["bash", "-c", f"printf %s {code}"], capture_output=True, text=True, check=True
    ).stdout  # the argument exactly as the shell passes it
    compile(python_code, "<hint>", "exec")
    assert "`my-project.landing.prompt_mentions`" in python_code and 'project="my-project"' in python_code


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])

    assert exit_.value.code == 0
    assert (
        capsys.readouterr().out.strip() == f"visibility-sync {importlib.metadata.version('visibility-sync')}"
    )


def test_run_help_lists_every_variable_of_the_settings_with_its_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    run_help = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    demo_help = capsys.readouterr().out

    defaults = load_settings(env={})
    for name in Settings.model_fields:
        variable = Settings.variable(name)
        default = getattr(defaults, name)
        expected = "required" if default is None else f"default {default}"
        assert re.search(rf"^  {variable}\s+{re.escape(expected)}", run_help, re.MULTILINE), variable
        if variable not in (URL_SETTING, KEY_SETTING):  # the demo's come from its sandbox
            assert variable in demo_help
    assert "DAGSTER_HOME" in run_help
    assert URL_SETTING not in demo_help.split("environment", 1)[1].split("(the sandbox")[0]


def test_a_piped_sync_says_what_still_runs_when_nothing_else_was_said_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long fetch (a slow rate limit) still shows on the piped output."""
    import io

    from rich.console import Console

    from pipelines import cli_progress

    monkeypatch.setattr(cli_progress, "HEARTBEAT_SECONDS", 0.3)
    piped, lines = Console(file=io.StringIO(), force_terminal=False), io.StringIO()
    err = Console(file=lines, force_terminal=False, width=200)
    with cli_progress.sync_progress(True, piped, err) as view:
        assert view is not None and not view.live
        view.stage("listing prompts, planning")
        view.on_fetch("cited_pages", 5, 100)
        time.sleep(1.5)
    shown = lines.getvalue()

    assert "cited_pages: fetching, 100 requests planned" in shown
    assert "still running: cited_pages 5/100 requests" in shown
    assert piped.file.getvalue() == ""  # stdout: the summary's alone
