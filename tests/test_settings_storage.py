"""Resources built from the settings keep the key out of Dagster's storage, and a run uses it without
the environment ever holding it (the demo's case)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import zlib
from pathlib import Path

import pytest
from dagster import EnvVar, instance_for_test

from pipelines.jobs import SNAPSHOT_JOB
from pipelines.resources import api_resource, build_resources, process_resources
from pipelines.syncs import sync_definitions
from sandbox.testing import SandboxHandle
from settings import load_settings


def _stored_texts(home: Path) -> list[bytes]:
    """Every file under a Dagster home, and every value of its SQLite databases, decompressed (Dagster
    stores run and job snapshots zlib-compressed)."""
    texts: list[bytes] = []
    for file in home.rglob("*"):
        if not file.is_file():
            continue
        texts.append(file.read_bytes())
        if file.suffix != ".db":
            continue
        with sqlite3.connect(file) as db:
            tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                for row in db.execute(f'SELECT * FROM "{table}"'):  # names from sqlite_master
                    for value in row:
                        raw = value.encode() if isinstance(value, str) else value
                        if isinstance(raw, bytes):
                            with contextlib.suppress(zlib.error):
                                raw = zlib.decompress(raw)
                            texts.append(raw)
    return texts


def test_a_run_resolves_the_key_from_the_settings_and_stores_it_nowhere(
    sandbox: SandboxHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VISIBILITY_API_KEY", raising=False)
    key = sandbox.keys["workspace"]
    settings = load_settings(
        {
            "VISIBILITY_API_URL": sandbox.url,
            "VISIBILITY_API_KEY": key,
            "VISIBILITY_WAREHOUSE": f"duckdb:///{tmp_path}/wh.duckdb",
        }
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    environment = dict(os.environ)
    with instance_for_test(temp_dir=str(home)) as instance:
        job = sync_definitions(settings).resolve_job_def(SNAPSHOT_JOB)
        resources = process_resources(settings, api_resource(settings))
        result = job.execute_in_process(instance=instance, resources=resources, raise_on_error=False)
        assert result.success
        assert instance.get_run_records()  # the run and its events are in this storage
        assert "VISIBILITY_API_KEY" not in os.environ  # the key never went through the environment
    assert dict(os.environ) == environment

    texts = _stored_texts(home)
    # the scan reads the job snapshot: the `duckdb` resource's configured file is there
    assert any(f"{tmp_path}/wh.duckdb".encode() in text for text in texts)
    assert not [text[:80] for text in texts if key.encode() in text]


def test_secrets_travel_as_env_vars_and_the_rest_as_values() -> None:
    settings = load_settings(
        {
            "VISIBILITY_API_URL": "https://api.example.com",
            "VISIBILITY_API_KEY": "vsk_0123456789abcdef",
            "VISIBILITY_WAREHOUSE": "postgresql://loader:pw@db.internal/analytics",
        }
    )
    resources = build_resources(settings)
    api, warehouse = resources["api"], resources["warehouse"]
    assert isinstance(api.api_key, EnvVar) and api.api_key == "VISIBILITY_API_KEY"
    assert isinstance(warehouse.url, EnvVar) and warehouse.url == "VISIBILITY_WAREHOUSE"
    assert api.api_url == "https://api.example.com" and not isinstance(api.api_url, EnvVar)

    plain = build_resources(load_settings({"VISIBILITY_WAREHOUSE": "duckdb:///data/x.duckdb"}))["warehouse"]
    assert plain.url == "duckdb:///data/x.duckdb" and not isinstance(plain.url, EnvVar)
