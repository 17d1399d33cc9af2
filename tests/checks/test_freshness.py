"""The daily assets' freshness policy, as Dagster's freshness daemon applies it to the code location.

The windows are read from docs/SENSORS.md (what operators are told), materializations of a known age
are stored in a real instance, and one iteration of Dagster's own freshness daemon evaluates the
code location ``dagster dev`` loads (``workspace.yaml``): so the test fails if the policy is not
attached, is attached to the wrong assets, or differs from the documentation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from dagster import (
    AssetKey,
    AssetMaterialization,
    DagsterEvent,
    DagsterEventType,
    DagsterInstance,
    instance_for_test,
)

# one iteration of Dagster's own freshness daemon over the code location, on materializations stored
# at a chosen age: no public API runs the daemon once, backdates an event or names freshness states
from dagster._core.definitions.freshness import FreshnessState
from dagster._core.events import StepMaterializationData
from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.test_utils import InProcessTestWorkspaceLoadTarget, create_test_daemon_workspace_context
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._daemon.freshness import FreshnessDaemon

from sync.catalog import ALL_TABLES

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3600.0


def documented_windows() -> tuple[float, float]:
    """(warn, fail) hours as docs/SENSORS.md states them to operators."""
    text = " ".join((ROOT / "docs" / "SENSORS.md").read_text().split())
    found = re.search(
        r"did not land for (\d+) hours turns the asset's freshness WARN, (\d+) hours FAIL", text
    )
    assert found, "docs/SENSORS.md no longer states the freshness windows"
    return float(found[1]), float(found[2])


def materialized(instance: DagsterInstance, table: str, hours_ago: float) -> None:
    """Store a materialization of ``table`` as old as a sync that landed ``hours_ago``."""
    event = DagsterEvent(
        event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
        event_specific_data=StepMaterializationData(AssetMaterialization(AssetKey(table))),
        job_name=RUNLESS_JOB_NAME,
    )
    instance.report_dagster_event(event, run_id=RUNLESS_RUN_ID, timestamp=time.time() - hours_ago * HOUR)


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[DagsterInstance]:
    with instance_for_test(temp_dir=str(tmp_path)) as inst:
        yield inst


def evaluate_freshness(instance: DagsterInstance) -> dict[str, FreshnessState]:
    """One iteration of Dagster's freshness daemon over the project's code location."""
    origin = LoadableTargetOrigin(module_name="pipelines.definitions", attribute="defs")
    target = InProcessTestWorkspaceLoadTarget(InProcessCodeLocationOrigin(origin))
    with create_test_daemon_workspace_context(target, instance) as workspace:
        list(FreshnessDaemon().run_iteration(workspace))
    records = instance.get_freshness_state_records([AssetKey(name) for name in ALL_TABLES])
    return {key.path[-1]: record.freshness_state for key, record in records.items()}


def test_daily_assets_warn_and_fail_after_the_documented_hours_without_a_sync(
    instance: DagsterInstance,
) -> None:
    warn, fail = documented_windows()
    ages = {"brands": warn - 1, "prompt_mentions": warn + 0.5, "competitor_trends": fail + 0.5}
    for table, hours in ages.items():
        materialized(instance, table, hours)
    materialized(instance, "audit_reports", fail + 10)  # sensor-driven: no daily policy

    states = evaluate_freshness(instance)

    assert states["brands"] == FreshnessState.PASS
    assert states["prompt_mentions"] == FreshnessState.WARN
    assert states["competitor_trends"] == FreshnessState.FAIL
    assert states["audit_reports"] == FreshnessState.NOT_APPLICABLE
    never_synced = set(ALL_TABLES) - set(ages) - {"audit_reports"}
    assert {states[table] for table in never_synced} == {FreshnessState.UNKNOWN}  # a policy, no sync yet


def test_the_instance_settings_enable_the_freshness_daemon() -> None:
    """Dagster evaluates the policies only when ``dagster.yaml`` turns freshness on."""
    settings = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    assert settings["freshness"] == {"enabled": True}
