"""A command-line run names the code location that workspace.yaml and deploy/ load, by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.definitions import defs
from pipelines.orphans import CODE_LOCATION, REPOSITORY, code_location_origin

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("workspace", ["workspace.yaml", "deploy/grpc-workspace.yaml"])
def test_the_code_location_a_command_line_run_names_is_the_one_the_workspace_loads(workspace: str) -> None:
    entries = yaml.safe_load((ROOT / workspace).read_text())["load_from"]

    assert [next(iter(e.values()))["location_name"] for e in entries] == [CODE_LOCATION]


def test_the_origin_names_the_location_repository_and_job_a_re_execution_looks_up() -> None:
    origin = code_location_origin("visibility_sync")

    assert origin.location_name == CODE_LOCATION
    assert origin.repository_origin.repository_name == REPOSITORY == defs.get_repository_def().name
    assert origin.job_name == "visibility_sync"


def test_the_helm_code_location_has_the_same_name() -> None:
    values = yaml.safe_load((ROOT / "deploy/helm/values.yaml").read_text())

    assert [d["name"] for d in values["dagster-user-deployments"]["deployments"]] == [CODE_LOCATION]
