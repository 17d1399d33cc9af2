"""deploy/: it ships every file its README names; the gRPC workspace and the Docker Compose file
fit the image and the instance (Docker itself is not run here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from dagster._core.workspace.config_schema import process_workspace_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = yaml.safe_load((DEPLOY / "docker-compose.yaml").read_text())
DAGSTER_HOME = re.search(r"DAGSTER_HOME=(\S+)", (DEPLOY / "Dockerfile").read_text()).group(1)  # type: ignore[union-attr]
DAGSTER_SERVICES = ("code", "webserver", "daemon")


def mounts(service: str) -> dict[str, str]:
    """Container path -> the host file, resolved from the compose file's folder."""
    out = {}
    for volume in COMPOSE["services"][service].get("volumes", []):
        host, container, *_ = volume.split(":")
        if host.startswith("."):
            out[container] = str((DEPLOY / host).resolve())
    return out


def test_every_file_the_deploy_readme_names_is_shipped() -> None:
    text = (DEPLOY / "README.md").read_text()
    named = set(re.findall(r"`(?:deploy/)?([\w./-]+\.(?:ya?ml|dockerignore)|Dockerfile)`", text))
    assert {"grpc-workspace.yaml", "docker-compose.yaml", "dagster.yaml", "helm/values.yaml"} <= named
    assert not [name for name in named if not (DEPLOY / name).exists()]


def test_the_grpc_workspace_passes_dagsters_schema_and_points_at_the_code_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = yaml.safe_load((DEPLOY / "grpc-workspace.yaml").read_text())
    monkeypatch.delenv("DAGSTER_CODE_SERVER_HOST", raising=False)
    unset = process_workspace_config(config)
    assert not unset.success and "DAGSTER_CODE_SERVER_HOST" in str(unset.errors)  # named when missing
    monkeypatch.setenv("DAGSTER_CODE_SERVER_HOST", "code")
    assert process_workspace_config(config).success
    [entry] = config["load_from"]
    server = entry["grpc_server"]
    assert server["host"] == {"env": "DAGSTER_CODE_SERVER_HOST"}
    image_cmd = (DEPLOY / "Dockerfile").read_text().rsplit("CMD", 1)[1]
    assert f'"-p", "{server["port"]}"' in image_cmd  # the port the image's code server listens on


def test_compose_mounts_the_instance_into_every_dagster_container() -> None:
    instance = str((DEPLOY / "dagster.yaml").resolve())
    workspace = str((DEPLOY / "grpc-workspace.yaml").resolve())
    for service in DAGSTER_SERVICES:
        assert mounts(service).get(f"{DAGSTER_HOME}/dagster.yaml") == instance, service
        env = COMPOSE["services"][service]["environment"]
        assert env["DAGSTER_PG_HOST"] == "dagster-db"  # what deploy/dagster.yaml reads
        assert {"DAGSTER_PG_PORT", "DAGSTER_PG_DB", "DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD"} <= set(env)
    for service in ("webserver", "daemon"):
        command = COMPOSE["services"][service]["command"]
        path = command[command.index("-w") + 1]
        assert mounts(service)[path] == workspace
        assert COMPOSE["services"][service]["environment"]["DAGSTER_CODE_SERVER_HOST"] == "code"
    assert "command" not in COMPOSE["services"]["code"]  # the image's own: the code server


def test_the_key_and_the_warehouse_url_reach_the_code_container_only_by_reference() -> None:
    for service, spec in COMPOSE["services"].items():
        env = spec.get("environment", {})
        for secret in (
            "VISIBILITY_API_KEY",
            "VISIBILITY_WAREHOUSE",
            "DAGSTER_PG_PASSWORD",
            "POSTGRES_PASSWORD",
        ):
            if secret in env:
                assert str(env[secret]).startswith("${"), (service, secret)  # never a literal
        if service != "code":
            assert not any(name.startswith("VISIBILITY_") for name in env), service
