"""The operation jobs, run by Dagster with the real ``api`` and ``warehouse`` resources: each changes
the sandbox as the spec says, reports its outcome in metadata (never the key), and the audit job
lands the audit in ``audit_reports`` as the audit sensor would."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dagster import DagsterInstance, ExecuteInProcessResult, JobDefinition

from pipelines.definitions import build_definitions
from pipelines.operation_jobs import (
    AUDIT_URL_JOB,
    CREATE_TOPIC_JOB,
    RENAME_TOPIC_JOB,
    UNTRACK_COMPETITOR_JOB,
    audit_url_job,
    create_topic_job,
    op_name,
    operation_jobs,
    rename_topic_job,
    untrack_competitor_job,
)
from resources.api.client import VisibilityClient
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.resource import WarehouseResource
from sandbox.testing import SandboxHandle
from settings import load_settings
from tests.operations.helpers import changes, first_brand, topic_names, tracked_names


def resources_for(sandbox: SandboxHandle, db: Path, key_role: str = "workspace") -> dict[str, Any]:
    return {
        "api": VisibilityAPIResource(
            api_url=sandbox.url, api_key=sandbox.keys[key_role], retry_deadline_seconds=5
        ),
        "warehouse": WarehouseResource(url=f"duckdb:///{db}"),
    }


def run(
    job: JobDefinition, config: dict[str, Any], resources: dict[str, Any], *, instance: DagsterInstance
) -> ExecuteInProcessResult:
    return job.execute_in_process(
        run_config={"ops": {op_name(job.name): {"config": config}}},
        resources=resources,
        instance=instance,
        raise_on_error=False,
    )


def metadata_of(result: ExecuteInProcessResult) -> dict[str, Any]:
    """The op output's metadata, as plain values."""
    output = next(e for e in result.all_events if e.event_type_value == "STEP_OUTPUT")
    return {k: getattr(v, "value", v) for k, v in output.event_specific_data.metadata.items()}


def audit_rows(db: Path) -> list[dict[str, Any]]:
    with duckdb.connect(str(db), read_only=True) as con:
        table = con.sql("SELECT * FROM visibility.audit_reports ORDER BY id").to_arrow_table()
    return table.to_pylist()


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with DagsterInstance.ephemeral() as opened:
        yield opened


def test_the_code_location_registers_every_operation_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISIBILITY_API_URL", "http://127.0.0.1:9")
    jobs = {job.name for job in build_definitions(load_settings()).resolve_all_job_defs()}
    assert {AUDIT_URL_JOB, UNTRACK_COMPETITOR_JOB, CREATE_TOPIC_JOB, RENAME_TOPIC_JOB} <= jobs


@pytest.mark.parametrize("job", operation_jobs, ids=lambda job: job.name)
def test_every_launchpad_field_is_typed_and_described(job: JobDefinition) -> None:
    fields = job.graph.node_named(op_name(job.name)).definition.config_schema.as_field().config_type.fields
    assert "brand" in fields
    for name, field in fields.items():
        assert field.description, f"{job.name}.{name} has no description for the launchpad"


def test_the_audit_fields_have_their_types_and_defaults() -> None:
    fields = audit_url_job.graph.node_named(op_name(AUDIT_URL_JOB)).definition.config_schema.as_field()
    by_name = fields.config_type.fields
    assert [name for name, field in by_name.items() if field.is_required] == ["brand", "url"]
    assert by_name["timeout_seconds"].config_type.key.endswith("Float")
    assert by_name["wait"].config_type.key.endswith("BoolSourceType")
    assert by_name["wait"].default_value is True and by_name["timeout_seconds"].default_value == 300.0


def test_the_audit_job_lands_the_finished_report_in_audit_reports(
    sandbox: SandboxHandle, client: VisibilityClient, tmp_path: Path, instance: DagsterInstance
) -> None:
    brand = first_brand(client)
    db = tmp_path / "ops.duckdb"
    url = f"https://{brand['domain']}/features"
    config = {"brand": brand["name"], "url": url, "poll_interval_seconds": 0.1}
    result = run(audit_url_job, config, resources_for(sandbox, db), instance=instance)
    assert result.success
    outcome = result.output_for_node(op_name(AUDIT_URL_JOB))
    assert outcome.complete and outcome.brand.id == brand["id"]
    [row] = audit_rows(db)
    assert (row["id"], row["status"], row["url"], row["brand_id"]) == (
        outcome.audit_id,
        "complete",
        url,
        brand["id"],
    )
    assert row["_run_id"] == result.run_id and row["completed_at"] is not None
    assert json.loads(row["report"])["score"] == outcome.report["score"]
    statuses = [
        m.metadata["status"].value
        for m in result.asset_materializations_for_node(op_name(AUDIT_URL_JOB))
        if m.asset_key.to_user_string() == "audit_reports"
    ]
    assert statuses == ["pending", "complete"]  # landed as soon as accepted, then with its report
    metadata = metadata_of(result)
    assert metadata["status"] == "complete" and metadata["score"] == outcome.report["score"]
    assert sandbox.keys["workspace"] not in json.dumps(metadata, default=str)
    assert changes(sandbox) == {"POST /v1/audit-reports": {"202": 1}}


def test_an_audit_without_waiting_lands_pending(
    sandbox: SandboxHandle, client: VisibilityClient, tmp_path: Path, instance: DagsterInstance
) -> None:
    db = tmp_path / "ops.duckdb"
    config = {"brand": first_brand(client)["id"], "url": "https://example.com/a", "wait": False}
    result = run(audit_url_job, config, resources_for(sandbox, db), instance=instance)
    assert result.success and not result.output_for_node(op_name(AUDIT_URL_JOB)).complete
    assert [row["status"] for row in audit_rows(db)] == ["pending"]
    assert "GET /v1/audit-reports/{id}" not in sandbox.stats()  # never polled


def test_an_audit_still_pending_at_the_timeout_fails_the_run_and_stays_pending(
    sandbox_factory: Callable[..., SandboxHandle], tmp_path: Path, instance: DagsterInstance
) -> None:
    slow = sandbox_factory(audit_delay_seconds=60.0)
    db = tmp_path / "ops.duckdb"
    with VisibilityClient(slow.url, slow.keys["workspace"]) as client:
        brand_id = first_brand(client)["id"]
    config = {
        "brand": brand_id,
        "url": "https://example.com/b",
        "timeout_seconds": 0.3,
        "poll_interval_seconds": 0.1,
    }
    result = run(audit_url_job, config, resources_for(slow, db), instance=instance)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    description = failure.event_specific_data.user_failure_data.description
    [row] = audit_rows(db)
    assert row["status"] == "pending" and row["poll"] in description and "landed as pending" in description


def test_a_malformed_url_fails_the_run_before_any_request(
    sandbox: SandboxHandle, tmp_path: Path, instance: DagsterInstance
) -> None:
    sandbox.reset_stats()
    result = run(
        audit_url_job,
        {"brand": "x", "url": "ftp://example.com/"},
        resources_for(sandbox, tmp_path / "d"),
        instance=instance,
    )
    assert not result.success
    assert sandbox.stats() == {}


def test_the_untrack_job_removes_the_competitor_and_reports_it(
    sandbox: SandboxHandle, client: VisibilityClient, tmp_path: Path, instance: DagsterInstance
) -> None:
    brand = first_brand(client)
    competitor = tracked_names(client, brand["id"])[-1]
    config = {"brand": brand["id"], "competitor": competitor.upper()}
    result = run(untrack_competitor_job, config, resources_for(sandbox, tmp_path / "d"), instance=instance)
    assert result.success
    assert competitor not in tracked_names(client, brand["id"])
    metadata = metadata_of(result)
    assert (metadata["competitor_name"], metadata["untracked"]) == (competitor, True)
    assert sandbox.keys["workspace"] not in json.dumps(metadata, default=str)


def test_an_unknown_competitor_fails_the_untrack_job_without_a_delete(
    sandbox: SandboxHandle, client: VisibilityClient, tmp_path: Path, instance: DagsterInstance
) -> None:
    config = {"brand": first_brand(client)["id"], "competitor": "Nobody Inc"}
    result = run(untrack_competitor_job, config, resources_for(sandbox, tmp_path / "d"), instance=instance)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "Nobody Inc" in failure.event_specific_data.error.to_string()
    assert changes(sandbox) == {}


def test_the_topic_jobs_create_then_rename_a_topic(
    sandbox: SandboxHandle, client: VisibilityClient, tmp_path: Path, instance: DagsterInstance
) -> None:
    brand = first_brand(client)
    resources = resources_for(sandbox, tmp_path / "d")
    created = run(
        create_topic_job, {"brand": brand["name"], "name": "Security"}, resources, instance=instance
    )
    assert created.success and metadata_of(created)["action"] == "created"
    topic_id = metadata_of(created)["topic_id"]
    config = {"brand": brand["name"], "topic": "security", "new_name": "Trust & Security"}
    renamed = run(rename_topic_job, config, resources, instance=instance)
    assert renamed.success
    expected = {"topic_id": topic_id, "previous_name": "Security", "action": "renamed"}
    assert metadata_of(renamed).items() >= expected.items()
    names = topic_names(client, brand["id"])
    assert "Trust & Security" in names and "Security" not in names


def test_an_unusable_warehouse_fails_the_audit_job_before_the_audit_is_ordered(
    sandbox: SandboxHandle, client: VisibilityClient, tmp_path: Path, instance: DagsterInstance
) -> None:
    db = tmp_path / "broken.duckdb"
    db.write_text("not a database")
    config = {"brand": first_brand(client)["id"], "url": "https://example.com/c"}
    result = run(audit_url_job, config, resources_for(sandbox, db), instance=instance)
    assert not result.success
    assert changes(sandbox) == {}  # nothing charged
    [failure] = [e for e in result.all_events if e.is_step_failure]
    # DuckDB's own refusal of the file, not a wait for a creation that never happens (a lock timeout)
    assert "not a valid DuckDB database file" in str(failure.step_failure_data.error), failure
