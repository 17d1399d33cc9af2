"""deploy/helm/values.yaml against Dagster's Helm chart (its schema and defaults, vendored under
dagster_chart/), and against the project: the same limits as dagster.yaml, secrets from Secrets."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
CHART = Path(__file__).resolve().parent / "dagster_chart"
PROJECT_YAML = ROOT / "dagster.yaml"
SECRET_SETTINGS = ("VISIBILITY_API_KEY", "VISIBILITY_WAREHOUSE")
DEPLOYMENT = {"name": "x", "image": {"repository": "r", "pullPolicy": "Always"}, "port": 4000}


def _values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def _chart_schema() -> dict[str, Any]:
    """The vendored schema without its references to remote Kubernetes schemas (not reachable here)."""

    def offline(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: offline(value)
                for key, value in node.items()
                if not (key == "$ref" and str(value).startswith("https://"))
            }
        if isinstance(node, list):
            return [offline(item) for item in node]
        return node

    return offline(json.loads((CHART / "values.schema.json").read_text()))


def helm_merge(defaults: Any, override: Any) -> Any:
    """Helm's coalescing of user values onto chart defaults: maps key by key, anything else replaced,
    and ``null`` deletes the default."""
    if not (isinstance(defaults, dict) and isinstance(override, dict)):
        return copy.deepcopy(override)
    merged = copy.deepcopy(defaults)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = helm_merge(merged.get(key), value)
    return merged


def chart_errors(values: Mapping[str, Any]) -> list[str]:
    """What Helm's schema validation would refuse in ``values`` merged onto the chart's defaults."""
    schema = _chart_schema()
    unknown = sorted(set(values) - set(schema["properties"]))
    if unknown:
        return [f"{key}: not a key of the vendored chart schema (copy its definitions)" for key in unknown]
    defaults = yaml.safe_load((CHART / "values.defaults.yaml").read_text())
    merged = {key: helm_merge(defaults.get(key), value) for key, value in values.items()}
    validator = jsonschema.Draft202012Validator(schema)
    errors = [
        f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(merged)
    ]
    return errors + list(_unknown_keys(values, schema, schema, ()))


def _resolve(node: Mapping[str, Any], schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The object schemas ``node`` stands for: its local ``$ref`` followed, its ``anyOf`` branches."""
    if "$ref" in node:
        return _resolve(schema["$defs"][node["$ref"].rsplit("/", 1)[-1]], schema)
    if "anyOf" in node:
        return [found for branch in node["anyOf"] for found in _resolve(branch, schema)]
    return [node]


def _unknown_keys(
    value: Any, node: Mapping[str, Any], schema: Mapping[str, Any], path: tuple
) -> Iterator[str]:
    """Keys the chart does not document, where its schema would let a typo through silently (a
    definition that lists its properties without forbidding others, like a user deployment's)."""
    candidates = _resolve(node, schema)
    if isinstance(value, dict):
        listed = [c for c in candidates if c.get("properties")]
        if not listed:
            return  # a free-form map (env, labels, Kubernetes objects)
        for key, item in value.items():
            owners = [c["properties"][key] for c in listed if key in c["properties"]]
            if not owners:
                yield f"{'.'.join((*path, key))}: not a key the chart documents"
            else:
                yield from _unknown_keys(item, owners[0], schema, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            for candidate in candidates:
                if "items" in candidate:
                    yield from _unknown_keys(item, candidate["items"], schema, (*path, str(index)))


def test_values_fit_the_dagster_chart_schema_merged_onto_its_defaults() -> None:
    assert chart_errors(_values()) == []


@pytest.mark.parametrize(
    ("mistake", "expected"),
    [
        ({"runLauncher": {"type": "K8sLauncher"}}, "runLauncher.type"),
        (
            {
                "dagsterDaemon": {
                    "runCoordinator": {"config": {"queuedRunCoordinator": {"dequeueInterval": 1}}}
                }
            },
            "queuedRunCoordinator.dequeueInterval",
        ),
        (
            {"dagster-user-deployments": {"deployments": [{"name": "x", "port": 4000}]}},
            "'image' is a required",
        ),
        ({"dagster-user-deployments": {"deployments": [{**DEPLOYMENT, "envSecret": []}]}}, "envSecret"),
        ({"concurrency": {"pools": {"defaultLimit": "2"}}}, "concurrency.pools.defaultLimit"),
        ({"dagsterWebserverr": {}}, "dagsterWebserverr"),
    ],
)
def test_the_chart_check_refuses_values_helm_would_refuse_or_ignore(mistake: dict, expected: str) -> None:
    errors = chart_errors(mistake)
    assert errors, f"accepted {mistake}"
    assert any(expected in error for error in errors), errors


def test_run_limits_are_set_once_as_the_chart_templates_require() -> None:
    """The chart fails to render when `concurrency.runs` and the run coordinator both set a limit."""
    values = _values()
    defaults = yaml.safe_load((CHART / "values.defaults.yaml").read_text())
    daemon = helm_merge(defaults["dagsterDaemon"], values["dagsterDaemon"])
    queued = daemon["runCoordinator"]["config"]["queuedRunCoordinator"]
    runs = values["concurrency"]["runs"]
    assert values["concurrency"]["enabled"] is True
    assert runs["maxConcurrentRuns"] is None or queued.get("maxConcurrentRuns") is None
    assert not (runs["tagConcurrencyLimits"] and queued.get("tagConcurrencyLimits"))


def _snake(value: Any) -> Any:
    if isinstance(value, dict):
        return {re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower(): _snake(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_snake(item) for item in value]
    return value


def test_the_chart_instance_has_every_limit_and_setting_of_the_project_dagster_yaml() -> None:
    values = _values()
    daemon = values["dagsterDaemon"]
    concurrency = {key: value for key, value in values["concurrency"].items() if key != "enabled"}
    queued = daemon["runCoordinator"]["config"]["queuedRunCoordinator"]
    from_chart = {
        "concurrency": _snake(concurrency),
        "run_queue": {"dequeue_interval_seconds": queued["dequeueIntervalSeconds"]},
        "python_logs": _snake(values["pythonLogs"]),
        "run_monitoring": _snake(daemon["runMonitoring"]),
        "run_retries": _snake(daemon["runRetries"]),
        "schedules": _snake(daemon["schedules"]),
        "sensors": _snake(daemon["sensors"]),
        "telemetry": values["telemetry"],
        **values["additionalInstanceConfig"],
    }
    project = yaml.safe_load(PROJECT_YAML.read_text())

    assert set(project) <= set(from_chart), "a dagster.yaml setting has no counterpart in the Helm values"
    production = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())
    for key, expected in project.items():
        if key == "run_monitoring":  # the chart adds a start timeout for pods that never start
            assert {k: from_chart[key][k] for k in expected} == expected
        elif key == "concurrency":  # the production limits (deploy/dagster.yaml), the project's too
            assert from_chart[key] == production[key] == expected, "Helm concurrency differs"
        else:
            assert from_chart[key] == expected, f"Helm values for `{key}` differ from dagster.yaml"


def test_secrets_come_from_kubernetes_secrets_and_reach_every_run() -> None:
    (deployment,) = _values()["dagster-user-deployments"]["deployments"]
    text = VALUES.read_text()

    assert deployment["envSecrets"] == [{"name": "visibility-sync"}]
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}  # run pods get the secret too
    assert not set(SECRET_SETTINGS) & set(deployment["env"])
    assert "duckdb://" not in text  # one file cannot be shared by run pods: Postgres or BigQuery
    assert _values()["generatePostgresqlPasswordSecret"] is False
    assert _values()["postgresql"]["enabled"] is False


def test_the_code_location_runs_the_image_command_on_its_port() -> None:
    (deployment,) = _values()["dagster-user-deployments"]["deployments"]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    (cmd,) = re.findall(r"^CMD (\[.*\])$", dockerfile, flags=re.MULTILINE)
    command = json.loads(cmd)

    assert command[:3] == ["dagster", "code-server", "start"]  # what codeServerArgs runs
    assert command[command.index("-p") + 1] == str(deployment["port"])
    assert command[command.index("-m") + 1] == deployment["codeServerArgs"][1] == "pipelines.definitions"


def test_the_readmes_kubectl_secrets_are_the_ones_the_values_read() -> None:
    from tests.doc_blocks import doc_block

    block = doc_block("deploy/README.md", "kubectl create namespace dagster")
    secrets = {
        match[1]: re.findall(r"--from-literal=([\w-]+)=", line)
        for line in block.text.replace("\\\n", " ").splitlines()
        if (match := re.search(r"create secret generic (\S+)", line))
    }
    (deployment,) = _values()["dagster-user-deployments"]["deployments"]

    assert secrets == {
        "dagster-postgresql-secret": ["postgresql-password"],  # the chart's default name and key
        deployment["envSecrets"][0]["name"]: list(SECRET_SETTINGS),
    }
