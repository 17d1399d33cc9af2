"""deploy/dagster.yaml: a valid instance with the project's limits, and a real sync recorded through it
on a real Postgres server (the embedded one), runs, materializations, checks and pool slots included."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

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

ROOT = Path(__file__).resolve().parents[2]
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
