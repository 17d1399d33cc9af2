"""The audit sensor evaluated for real: Dagster ticks on a persistent instance, HTTP to the sandbox,
runs landing into a DuckDB file."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest
from dagster import DagsterInstance, RunsFilter

from assets.audits import TAG_AUDIT_ID, TAG_AUDIT_STATUS
from pipelines.sensors.audit_cursor import parse_cursor
from pipelines.sensors.audits import AuditSensorSettings, audit_sensor
from resources.warehouse.resource import WarehouseResource
from sandbox.testing import SandboxHandle, run_sandbox
from tests.fixtures_sandbox import loose_limits, test_sandbox_config
from tests.sensors.conftest import (
    api_resource,
    audit_rows,
    count,
    evaluate,
    launch,
    sandbox_brands,
    seed_brands,
    seed_cited_pages,
    utc_today,
)

POST = "POST /v1/audit-reports"
POLL = "GET /v1/audit-reports/{id}"


@pytest.fixture(scope="module")
def audit_sandbox() -> Iterator[tuple[SandboxHandle, list[dict[str, Any]]]]:
    """One sandbox for this module; each test resets what it changes (delay, limits, counters)."""
    with run_sandbox(test_sandbox_config()) as handle:
        yield handle, sandbox_brands(handle)


@pytest.fixture
def world(
    audit_sandbox: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource
) -> tuple[SandboxHandle, list[dict[str, Any]]]:
    """Audits stay pending (until a test shortens the delay), fresh limits and counters; brands landed."""
    handle, brands = audit_sandbox
    handle.configure(audit_delay_seconds=3600.0, limits=asdict(loose_limits()), fail_endpoints=[])
    handle.reset_stats()
    seed_brands(warehouse, brands)
    return handle, brands


def resources(handle: SandboxHandle, warehouse: WarehouseResource, **settings: Any) -> dict[str, Any]:
    return {
        "api": api_resource(handle),
        "warehouse": warehouse,
        "audit_settings": AuditSensorSettings(**settings),
    }


def test_audit_is_submitted_once_polled_while_pending_and_landed_once_when_complete(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    handle, brands = world
    url = f"https://{brands[0]['domain']}/pricing"
    res = resources(handle, warehouse, urls=[url])

    first = evaluate(audit_sensor, instance, None, res)
    assert [r.tags[TAG_AUDIT_STATUS] for r in first.run_requests] == ["pending"]
    audit_id = first.run_requests[0].tags[TAG_AUDIT_ID]
    assert [p.id for p in parse_cursor(first.cursor).pending] == [audit_id]

    second = evaluate(audit_sensor, instance, first.cursor, res)  # still pending: polled, not landed
    assert second.run_requests == [] and second.skip_reason is not None
    assert "1 audit(s) pending" in second.skip_reason.skip_message
    stats = handle.stats()
    assert count(stats, POST) == 1 and count(stats, POLL) == 1

    handle.configure(audit_delay_seconds=0)
    third = evaluate(audit_sensor, instance, second.cursor, res)
    assert [(r.run_key, r.tags[TAG_AUDIT_STATUS]) for r in third.run_requests] == [(audit_id, "complete")]
    fourth = evaluate(audit_sensor, instance, third.cursor, res)  # nothing pending, URL not due again
    assert fourth.run_requests == []
    assert parse_cursor(fourth.cursor).pending == ()
    stats = handle.stats()
    assert count(stats, POST) == 1 and count(stats, POLL) == 2

    for request in [*first.run_requests, *third.run_requests]:
        assert launch(instance, request, warehouse)
    assert not launch(instance, third.run_requests[0], warehouse)  # the daemon's run-key dedupe
    rows = audit_rows(warehouse)
    assert len(rows) == 1
    row = rows[0]
    assert (row["id"], row["status"], row["url"], row["brand_id"]) == (
        audit_id,
        "complete",
        url,
        brands[0]["id"],
    )
    assert row["requested_at"] <= row["completed_at"] and row["timed_out_at"] is None
    assert json.loads(row["report"])["status"] == "complete"
    runs = instance.get_runs(filters=RunsFilter(tags={TAG_AUDIT_ID: audit_id}))
    assert sorted(r.tags[TAG_AUDIT_STATUS] for r in runs) == ["complete", "pending"]


def test_audit_pending_past_the_deadline_lands_as_timed_out(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    handle, brands = world
    res = resources(handle, warehouse, urls=[f"https://{brands[0]['domain']}/slow"], deadline_minutes=0.01)
    first = evaluate(audit_sensor, instance, None, res)
    audit_id = first.run_requests[0].tags[TAG_AUDIT_ID]
    time.sleep(0.7)  # past the 0.6 s deadline; the sandbox keeps it pending for an hour

    second = evaluate(audit_sensor, instance, first.cursor, res)
    assert [(r.run_key, r.tags[TAG_AUDIT_STATUS]) for r in second.run_requests] == [(audit_id, "timed_out")]
    observed = [e.metadata["status"].value for e in second.asset_events]
    assert observed == ["timed_out"]
    assert parse_cursor(second.cursor).pending == ()
    third = evaluate(audit_sensor, instance, second.cursor, res)
    assert third.run_requests == []  # neither polled again nor resubmitted
    assert count(handle.stats(), POST) == 1

    for request in [*first.run_requests, *second.run_requests]:
        launch(instance, request, warehouse)
    [row] = audit_rows(warehouse)
    assert (row["id"], row["status"], row["completed_at"]) == (audit_id, "timed_out", None)
    assert row["timed_out_at"] > row["requested_at"]
    timed_out_runs = instance.get_runs(filters=RunsFilter(tags={TAG_AUDIT_STATUS: "timed_out"}))
    assert [r.tags[TAG_AUDIT_ID] for r in timed_out_runs] == [audit_id]


def test_pending_audits_survive_a_restart_and_are_never_resubmitted(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    handle, brands = world
    urls = [f"https://{brands[0]['domain']}/a", f"https://{brands[1]['domain']}/b"]
    first = evaluate(audit_sensor, instance, None, resources(handle, warehouse, urls=urls))
    submitted = {r.tags[TAG_AUDIT_ID] for r in first.run_requests}
    assert len(submitted) == 2

    # A daemon restart: new resources, new context, same instance and stored cursor.
    handle.configure(audit_delay_seconds=0)
    after = evaluate(audit_sensor, instance, first.cursor, resources(handle, warehouse, urls=urls))
    assert {r.run_key for r in after.run_requests} == submitted
    assert count(handle.stats(), POST) == 2


def test_daily_budget_caps_submissions_per_brand(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    handle, brands = world
    domain = brands[0]["domain"]
    res = resources(handle, warehouse, urls=[f"https://{domain}/{i}" for i in range(4)], audits_per_day=2)
    first = evaluate(audit_sensor, instance, None, res)
    second = evaluate(audit_sensor, instance, first.cursor, res)
    assert len(first.run_requests) == 2 and second.run_requests == []
    assert count(handle.stats(), POST) == 2


def test_newly_cited_own_pages_are_audited_and_other_domains_are_not(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    handle, brands = world
    brand = brands[0]
    yesterday = utc_today() - dt.timedelta(days=1)
    old_day = utc_today() - dt.timedelta(days=60)
    own, old = f"https://{brand['domain']}/new-guide", f"https://{brand['domain']}/old"
    seed_cited_pages(
        warehouse,
        [
            {
                "brand_id": brand["id"],
                "date": yesterday,
                "engine": "chatgpt",
                "url": own,
                "root_domain": brand["domain"],
                "citation_count": 5,
            },
            {
                "brand_id": brand["id"],
                "date": yesterday,
                "engine": "chatgpt",
                "url": "https://rival.example/x",
                "root_domain": "rival.example",
                "citation_count": 9,
            },
            {
                "brand_id": brand["id"],
                "date": old_day,
                "engine": "chatgpt",
                "url": old,
                "root_domain": brand["domain"],
                "citation_count": 3,
            },
            {
                "brand_id": brand["id"],
                "date": yesterday,
                "engine": "chatgpt",
                "url": old,
                "root_domain": brand["domain"],
                "citation_count": 3,
            },
        ],
    )
    result = evaluate(audit_sensor, instance, None, resources(handle, warehouse))
    [pending] = parse_cursor(result.cursor).pending
    assert (pending.url, pending.brand_id, pending.reason) == (own, brand["id"], "newly_cited")


def test_spent_endpoint_budget_stops_submitting_until_the_window_reopens(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    handle, brands = world
    handle.configure(limits={"endpoint_limit": 1, "window_seconds": 3600})
    domain = brands[0]["domain"]
    res = resources(
        handle, warehouse, urls=[f"https://{domain}/{i}" for i in range(3)], tick_request_deadline_seconds=1.0
    )
    first = evaluate(audit_sensor, instance, None, res)
    assert len(first.run_requests) == 1  # X-Endpoint-Remaining reached 0: no second POST this tick
    second = evaluate(audit_sensor, instance, first.cursor, res)
    state = parse_cursor(second.cursor)
    assert state.endpoint_blocked_until is not None  # the 429 endpoint_rate_limited blocks later ticks
    assert len(state.pending) == 1
    posts = count(handle.stats(), POST)
    third = evaluate(audit_sensor, instance, second.cursor, res)
    assert third.run_requests == [] and count(handle.stats(), POST) == posts


def test_configured_url_on_no_brand_domain_is_reported_not_submitted(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    handle, _ = world
    result = evaluate(
        audit_sensor, instance, None, resources(handle, warehouse, urls=["https://nobody.example/x"])
    )
    assert result.run_requests == []
    assert "on no brand's domain" in result.skip_reason.skip_message
    assert count(handle.stats(), POST) == 0


def test_unanswered_submission_is_never_resent_and_a_failing_poll_waits_for_the_next_tick(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    handle, brands = world
    first_url, second_url = (f"https://{brands[0]['domain']}/{p}" for p in ("one", "two"))
    res = resources(handle, warehouse, urls=[first_url], tick_request_deadline_seconds=1.0)
    first = evaluate(audit_sensor, instance, None, res)
    audit_id = first.run_requests[0].tags[TAG_AUDIT_ID]

    handle.configure(fail_endpoints=[POST, POLL])  # the service answers 500 to both
    res = resources(handle, warehouse, urls=[first_url, second_url], tick_request_deadline_seconds=1.0)
    failing = evaluate(audit_sensor, instance, first.cursor, res)
    assert failing.run_requests == []
    state = parse_cursor(failing.cursor)
    assert [p.id for p in state.pending] == [audit_id]  # still pending, polled again next tick
    assert [(s.url, s.ambiguous) for s in state.submissions if s.audit_id is None] == [(second_url, True)]

    handle.configure(fail_endpoints=[], audit_delay_seconds=0)
    recovered = evaluate(audit_sensor, instance, failing.cursor, res)
    assert [r.run_key for r in recovered.run_requests] == [audit_id]
    assert handle.stats()[POST] == {"202": 1, "500": 1}  # the unanswered one was not sent again


def test_a_poll_that_outlasts_the_deadline_stops_the_ticks_polling_leaving_later_audits_untouched(
    world: tuple[SandboxHandle, list[dict[str, Any]]], warehouse: WarehouseResource, instance: DagsterInstance
) -> None:
    """Every further poll would wait the failing service out too: the rest wait for the next tick,
    neither polled nor charged a failed poll."""
    handle, brands = world
    urls = [f"https://{brands[0]['domain']}/{p}" for p in ("one", "two")]
    res = resources(handle, warehouse, urls=urls, tick_request_deadline_seconds=1.0)
    first = evaluate(audit_sensor, instance, None, res)
    assert len(parse_cursor(first.cursor).pending) == 2

    handle.configure(fail_endpoints=[POLL])  # the service answers 500 to every poll
    failing = evaluate(audit_sensor, instance, first.cursor, res)
    assert failing.skip_reason is not None
    assert failing.skip_reason.skip_message.count("polling stopped for this tick") == 1
    polled = sorted((p.polls, p.last_error is not None) for p in parse_cursor(failing.cursor).pending)
    assert polled == [(0, False), (0, False)]  # the failed poll is charged to none, the other not tried
