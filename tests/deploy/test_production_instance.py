"""deploy/dagster.yaml: a valid instance with the project's limits, and a real sync recorded through it
on a real Postgres server (the embedded one), runs, materializations, checks and pool slots included;
deploy/README.md's steps for it run as written, with this machine's hosts, ports and paths."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlsplit

import httpx
import psycopg
import pytest
import yaml
from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    DagsterInvalidConfigError,
    DagsterRunStatus,
    QueuedRunCoordinator,
)

# the instance YAML validated without connecting to its storage: no public API does that
from dagster._core.instance.config import dagster_instance_config
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

from pipelines.cli import EXIT_OK, main
from sandbox.testing import SandboxHandle
from tests.doc_blocks import doc_block

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
T = TypeVar("T")
PRODUCTION_YAML = ROOT / "deploy" / "dagster.yaml"
PROJECT_YAML = ROOT / "dagster.yaml"
TWO_DAYS = ["--start", "2026-10-29", "--end", "2026-10-31"]
PG_SETTINGS = (
    "DAGSTER_PG_HOST",
    "DAGSTER_PG_PORT",
    "DAGSTER_PG_DB",
    "DAGSTER_PG_USERNAME",
    "DAGSTER_PG_PASSWORD",
)


@pytest.fixture
def dagster_database(postgres_url: str) -> Iterator[dict[str, str]]:
    """A fresh database for Dagster's storage on the test server; returns the DAGSTER_PG_* settings."""
    name = f"dagster_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    server = urlsplit(postgres_url)
    yield {
        "DAGSTER_PG_HOST": server.hostname or "127.0.0.1",
        "DAGSTER_PG_PORT": str(server.port or 5432),
        "DAGSTER_PG_DB": name,
        "DAGSTER_PG_USERNAME": unquote(server.username or "postgres"),
        "DAGSTER_PG_PASSWORD": unquote(server.password or "unused-with-trust-auth"),
    }
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _production_home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PRODUCTION_YAML, home / "dagster.yaml")
    return home


def _dagster_dsn(settings: dict[str, str]) -> str:
    return (
        f"host={settings['DAGSTER_PG_HOST']} port={settings['DAGSTER_PG_PORT']} "
        f"dbname={settings['DAGSTER_PG_DB']} user={settings['DAGSTER_PG_USERNAME']} "
        f"password={settings['DAGSTER_PG_PASSWORD']}"
    )


@pytest.mark.postgres
def test_a_sync_records_its_run_materializations_and_checks_in_postgres(
    sandbox: SandboxHandle,
    postgres_url: str,
    pg_schema: str,
    dagster_database: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in list(os.environ):
        if name.startswith(("VISIBILITY_", "DAGSTER_")):
            monkeypatch.delenv(name)
    home = _production_home(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for name, value in dagster_database.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("VISIBILITY_API_URL", sandbox.url)
    monkeypatch.setenv("VISIBILITY_API_KEY", sandbox.keys["workspace"])
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", postgres_url)  # the whole deployment on Postgres
    monkeypatch.setenv("VISIBILITY_SCHEMA", pg_schema)

    assert main(["run", *TWO_DAYS, "--quiet"]) == EXIT_OK

    with DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)  # what the daemon dequeues
        (run,) = instance.get_runs()
        assert run.job_name == "visibility_sync"
        assert run.status == DagsterRunStatus.SUCCESS
        materialized = {
            record.dagster_event.asset_key
            for record in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        }
        checks = {
            record.dagster_event.event_specific_data.check_name
            for record in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
        }
        # the sync steps' pool, with the instance's default limit, its slots given back
        pool = instance.event_log_storage.get_concurrency_info("visibility_api")
        assert pool.slot_count == 8
        assert pool.claimed_slots == [] and pool.pending_steps == []

    assert {AssetKey("brands"), AssetKey("prompts"), AssetKey("prompt_mentions"), AssetKey("answers")} <= (
        materialized
    )
    assert {"keys_unique", "no_empty_partitions"} <= checks

    # the records are in Dagster's Postgres database, not in a SQLite file under DAGSTER_HOME
    with psycopg.connect(_dagster_dsn(dagster_database)) as conn:
        status = conn.execute("SELECT status FROM runs WHERE run_id = %s", [run.run_id]).fetchone()
        by_type = dict(
            conn.execute(
                "SELECT dagster_event_type, count(*) FROM event_logs WHERE run_id = %s GROUP BY 1",
                [run.run_id],
            ).fetchall()
        )
    assert status == ("SUCCESS",)
    assert by_type["ASSET_MATERIALIZATION"] >= len(materialized)
    assert by_type["ASSET_CHECK_EVALUATION"] >= len(checks)
    assert not [path for path in home.rglob("*.db")]

    with psycopg.connect(postgres_url) as conn:
        (mentions,) = conn.execute(f'SELECT count(*) FROM "{pg_schema}".prompt_mentions').fetchone()
    assert mentions > 0


@pytest.fixture
def offline_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DAGSTER_HOME with the production YAML and placeholder DAGSTER_PG_* settings (no server)."""
    for name in PG_SETTINGS:
        monkeypatch.setenv(name, "5432" if name.endswith("PORT") else "x")
    return _production_home(tmp_path)


def test_production_yaml_is_a_valid_instance_with_postgres_storage(offline_home: Path) -> None:

    config, custom_class = dagster_instance_config(str(offline_home))

    assert custom_class is None
    assert set(config["storage"]) == {"postgres"}
    assert config["concurrency"]["pools"] == {"default_limit": 8, "granularity": "op"}


def test_a_missing_postgres_setting_fails_the_instance_naming_it(
    offline_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_PG_HOST")

    with pytest.raises(DagsterInvalidConfigError, match="DAGSTER_PG_HOST"):
        DagsterInstance.from_config(str(offline_home))  # before any connection is attempted


def test_production_yaml_keeps_every_setting_of_the_project_instance_but_storage() -> None:
    production = yaml.safe_load(PRODUCTION_YAML.read_text())
    project = yaml.safe_load(PROJECT_YAML.read_text())

    assert set(production) == {*project, "storage"}
    for key, value in project.items():
        # the limits too: pods hand a backfill's tables over through the warehouse, as one machine does
        assert production[key] == value, f"deploy/dagster.yaml `{key}` differs from dagster.yaml"


# --- deploy/README.md's steps, as written ---------------------------------------------------------

WORKSPACE_QUERY = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }"""
DAEMONS_QUERY = "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy } } } }"
#: Processes that serve until stopped: started in the background, their output in a log each.
SERVERS = {
    "dagster code-server start": "code",
    "dagster-daemon run": "daemon",
    "dagster-webserver": "webserver",
}
#: The daemons the webserver must report healthy, from their heartbeats in Postgres.
DAEMONS = {"SENSOR", "SCHEDULER", "QUEUED_RUN_COORDINATOR", "BACKFILL"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _deploy_steps(here: dict[str, str], settings: dict[str, str], logs: Path, ports: tuple[int, int]) -> str:
    """The README's block as a script: its commands, with this machine's values for the block's
    (``here``: written -> used), the ``DAGSTER_PG_*`` export given the test server's settings, and the
    servers in the background (``ports``: the code server's, the webserver's); after the code
    server, a wait for it as its user would wait."""
    code_port, web_port = ports
    block = doc_block("deploy/README.md", "pip install '.[production]'")
    script = ["set -e", f'export PATH="{BIN}:$PATH"']
    for line in block.lines():
        command = re.sub(r"\s+#\s.*$", "", line)
        for written, used in here.items():
            command = command.replace(written, used)
        if command.startswith("export DAGSTER_PG_"):
            names = [word.split("=")[0] for word in shlex.split(command)[1:]]
            assert names == list(PG_SETTINGS), command  # the README names every setting
            command = "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in settings.items())
        server = next((name for start, name in SERVERS.items() if command.startswith(start)), None)
        if server == "webserver":
            command += f" -h 127.0.0.1 -p {web_port}"  # its default port may be taken here
        if server:
            command += f" > {logs / server}.log 2>&1 &"
        script.append(command)
        if server == "code":
            script.append(
                f"for _ in $(seq 60); do dagster api grpc-health-check -p {code_port} "
                "> /dev/null 2>&1 && break; sleep 1; done"
            )
    assert [written for written in here if written not in block.text] == []  # the README says them
    return "\n".join(script)


def _wait_for(what: str, answer: Callable[[], T | None], logs: Path, timeout: float = 180.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if found := answer():
                return found
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            tails = {p.name: p.read_text()[-1500:] for p in logs.glob("*.log")}
            raise AssertionError(f"{what} within {timeout} s; logs: {tails}")
        time.sleep(1)


def _stop_group(pgid: int) -> None:
    """SIGTERM to the block's processes, SIGKILL to what is left after 10 s (the code server's
    `code-server start` outlives a SIGTERM)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            os.killpg(pgid, 0)  # ProcessLookupError: all gone
            time.sleep(0.5)
        os.killpg(pgid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.postgres
def test_the_deploy_readmes_steps_start_the_code_server_daemon_and_webserver_on_postgres(
    sandbox: SandboxHandle,
    postgres_url: str,
    pg_schema: str,
    dagster_database: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code_port, web_port = _free_port(), _free_port()
    workspace = tmp_path / "grpc-workspace.yaml"  # the shipped one, on this machine's port
    written = (ROOT / "deploy" / "grpc-workspace.yaml").read_text()
    assert "port: 4000" in written
    workspace.write_text(written.replace("port: 4000", f"port: {code_port}"))
    home, logs = tmp_path / "dagster_home", tmp_path / "logs"
    logs.mkdir()
    here = {
        # the extra resolved against this environment (the dev extra has it), nothing installed
        "pip install '.[production]'": "pip install --dry-run --no-index --no-build-isolation "
        "'.[production]'",
        "/opt/dagster/dagster_home": str(home),
        "-p 4000": f"-p {code_port}",
        "-h 0.0.0.0": "-h 127.0.0.1",
        "DAGSTER_CODE_SERVER_HOST=code.internal": "DAGSTER_CODE_SERVER_HOST=127.0.0.1",
        "deploy/grpc-workspace.yaml": str(workspace),
    }
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VISIBILITY_", "DAGSTER_"))},
        "VISIBILITY_API_URL": sandbox.url,  # the code server's settings (the others need none)
        "VISIBILITY_API_KEY": sandbox.keys["workspace"],
        "VISIBILITY_WAREHOUSE": postgres_url,
        "VISIBILITY_SCHEMA": pg_schema,
    }
    steps = subprocess.Popen(
        ["bash", "-c", _deploy_steps(here, dagster_database, logs, (code_port, web_port))],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the servers stay in its process group: stopped together below
    )
    try:
        output, _ = steps.communicate(timeout=300)
        assert steps.returncode == 0, output
        assert "Would install visibility-sync" in output

        def graphql(query: str) -> dict:
            answer = httpx.post(f"http://127.0.0.1:{web_port}/graphql", json={"query": query}, timeout=30)
            return answer.json()["data"]

        def location() -> list[dict] | None:
            entries = graphql(WORKSPACE_QUERY)["workspaceOrError"]["locationEntries"]
            return entries if entries and entries[0]["loadStatus"] == "LOADED" else None

        def daemons() -> set[str] | None:
            statuses = graphql(DAEMONS_QUERY)["instance"]["daemonHealth"]["allDaemonStatuses"]
            healthy = {s["daemonType"] for s in statuses if s["healthy"]}
            return healthy if healthy >= DAEMONS else None

        (entry,) = _wait_for("the webserver loads the code location from the code server", location, logs)
        assert entry["name"] == "visibility"  # the name runs are recorded under (README)
        assert entry["locationOrLoadError"]["__typename"] == "RepositoryLocation", entry
        _wait_for("the daemon's heartbeats, read by the webserver", daemons, logs)
    finally:
        _stop_group(steps.pid)

    # the instance the block's `cp` put in DAGSTER_HOME, loaded against the test's Postgres server
    for name, value in dagster_database.items():
        monkeypatch.setenv(name, value)
    with DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
    with psycopg.connect(_dagster_dsn(dagster_database)) as conn:
        heartbeats = {row[0] for row in conn.execute("SELECT daemon_type FROM daemon_heartbeats")}
    assert {"SENSOR", "BACKFILL", "QUEUED_RUN_COORDINATOR"} <= heartbeats  # kept in Postgres, not a file
    assert not [path for path in home.rglob("*.db")]
