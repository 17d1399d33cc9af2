"""dbt green on day one: the README's `dbt build` passes over a warehouse one sync made, every table
(even one only a sensor lands) there from the first sync on, on DuckDB and on Postgres."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipelines.cli_output import EXIT_OK
from sandbox.testing import SandboxHandle
from tests.pipelines.test_cli_first_run import ROOT, TIMEOUT_SECONDS, demo_command, demo_env

BIN = Path(sys.executable).parent
ONE_DAY = ["--start", "2026-10-30", "--end", "2026-10-31"]


def readme_dbt_command() -> str:
    """The README's `dbt build` line, as written (its `.venv/bin/` is this environment's)."""
    section = (ROOT / "README.md").read_text().split("### dbt\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert block is not None, "README's dbt section has no command"
    [command] = [line for line in block.group(1).splitlines() if " build " in line]
    return command.replace(".venv/bin/", f"{BIN}/")


def dbt(command: str, env: dict[str, str], tmp_path: Path) -> str:
    """Run a dbt command from the repository (as the README does), its artefacts under ``tmp_path``."""
    env = {**env, "DBT_TARGET_PATH": str(tmp_path / "target"), "DBT_LOG_PATH": str(tmp_path / "logs")}
    done = subprocess.run(
        command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECONDS
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
    env = demo_env(VISIBILITY_WAREHOUSE=f"duckdb:///{tmp_path / 'warehouse.duckdb'}")
    demo = subprocess.run(
        demo_command("--quiet"),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    assert demo.returncode == EXIT_OK, demo.stdout + demo.stderr

    command = readme_dbt_command()
    assert_every_source_test_passed(dbt(command, env, tmp_path))
    assert_every_source_test_passed(dbt(command.replace(" build ", " test "), env, tmp_path))


@pytest.mark.slow
@pytest.mark.postgres
def test_dbt_build_passes_on_postgres_after_one_sync(
    sandbox: SandboxHandle, postgres_url: str, pg_schema: str, tmp_path: Path
) -> None:
    env = demo_env(
        VISIBILITY_API_URL=sandbox.url,
        VISIBILITY_API_KEY=sandbox.keys["workspace"],
        VISIBILITY_WAREHOUSE=postgres_url,
        VISIBILITY_SCHEMA=pg_schema,
    )
    sync = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "run", *ONE_DAY, "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    assert sync.returncode == EXIT_OK, sync.stdout + sync.stderr

    url = urlsplit(postgres_url)
    libpq = {
        "PGHOST": url.hostname or "",
        "PGPORT": str(url.port or 5432),
        "PGUSER": url.username or "",
        "PGPASSWORD": url.password or "",
        "PGDATABASE": url.path.lstrip("/"),
    }
    command = f"{readme_dbt_command()} --target postgres"
    assert_every_source_test_passed(dbt(command, {**env, **libpq}, tmp_path))
