"""dbt green on day one: the README's `dbt build` (its tests included) passes over a fresh warehouse
after one sync and after the demo, on DuckDB and on Postgres: every table (even one only a sensor
lands) is there from the first sync on.

The README's commands run as written from a folder laid out like the clone (`.venv`, `dbt/`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipelines.cli_output import EXIT_OK
from sandbox.testing import SandboxHandle
from tests.doc_blocks import ROOT, doc_block
from tests.pipelines.test_cli_first_run import TIMEOUT_SECONDS, demo_command, demo_env

ONE_DAY = ["--start", "2026-10-30", "--end", "2026-10-31"]


def readme_dbt_build() -> str:
    """The README's `dbt build` line (the block's other line installs what the dev extra has)."""
    block = doc_block("README.md", ".venv/bin/pip install -q -e '.[dbt]'")
    [command] = [line for line in block.lines() if " build " in line]
    return command


def clone_layout(tmp_path: Path) -> Path:
    """A working folder with the clone's `.venv` and `dbt/`; dbt's artefacts go under it."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    (tmp_path / "dbt").symlink_to(ROOT / "dbt", target_is_directory=True)
    return tmp_path


def shell(command: str, cwd: Path, env: dict[str, str]) -> str:
    env = {**env, "DBT_TARGET_PATH": str(cwd / "target"), "DBT_LOG_PATH": str(cwd / "logs")}
    done = subprocess.run(
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECONDS
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done.stdout


def assert_every_source_test_passed(output: str) -> None:
    done = re.search(r"PASS=(\d+) WARN=(\d+) ERROR=(\d+) SKIP=(\d+)", output)
    assert done is not None, output[-2000:]
    passed, warned, errors, skipped = map(int, done.groups())
    assert passed > 20 and (warned, errors, skipped) == (0, 0, 0), done.group(0)
    assert "audit_reports" in output  # the sensor's table is tested too, empty


@pytest.mark.slow
def test_dbt_build_and_test_pass_on_duckdb_after_the_demo(tmp_path: Path) -> None:
    cwd = clone_layout(tmp_path)
    env = demo_env()  # the default warehouse: data/visibility.duckdb in the working folder
    start_the_warehouse("the demo", cwd, env, sandbox=None)

    build = readme_dbt_build()
    assert_every_source_test_passed(shell(build, cwd, env))
    assert_every_source_test_passed(shell(build.replace(" build ", " test "), cwd, env))
    # and the README's query for BI tools, on the same file
    [query] = doc_block("README.md", '.venv/bin/python -c "import duckdb;').lines()
    assert "is_current" in shell(query, cwd, env)


def start_the_warehouse(start: str, cwd: Path, env: dict[str, str], sandbox: SandboxHandle | None) -> None:
    """``one sync``: one day from the test's sandbox; ``the demo``: the demo, with a sandbox of its own."""
    if start == "the demo":
        command = demo_command("--quiet")
    else:
        assert sandbox is not None
        env.update(VISIBILITY_API_URL=sandbox.url, VISIBILITY_API_KEY=sandbox.keys["workspace"])
        command = [sys.executable, "-m", "pipelines.cli", "run", *ONE_DAY, "--quiet"]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr


def postgres_env(postgres_url: str, pg_schema: str) -> dict[str, str]:
    """The warehouse's settings for the sync, and libpq's for dbt (as the README says for Postgres)."""
    url = urlsplit(postgres_url)
    return {
        "VISIBILITY_WAREHOUSE": postgres_url,
        "VISIBILITY_SCHEMA": pg_schema,
        "PGHOST": url.hostname or "",
        "PGPORT": str(url.port or 5432),
        "PGUSER": url.username or "",
        "PGPASSWORD": url.password or "",
        "PGDATABASE": url.path.lstrip("/"),
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("warehouse", "start"),
    [  # DuckDB after the demo: the test above, which also runs `dbt test` and the README's query
        ("duckdb", "one sync"),
        pytest.param("postgres", "one sync", marks=pytest.mark.postgres),
        pytest.param("postgres", "the demo", marks=pytest.mark.postgres),
    ],
)
def test_dbt_build_passes_on_a_fresh_warehouse_after_either_start(
    warehouse: str, start: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    cwd = clone_layout(tmp_path)
    build = readme_dbt_build()  # its tests included: one dbt invocation
    env = demo_env()  # DuckDB: the default warehouse, data/visibility.duckdb in the working folder
    if warehouse == "postgres":
        server, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("pg_schema")
        env.update(postgres_env(server, schema))
        build += " --target postgres"
    sandbox = request.getfixturevalue("sandbox") if start == "one sync" else None

    start_the_warehouse(start, cwd, env, sandbox)

    assert_every_source_test_passed(shell(build, cwd, env))
