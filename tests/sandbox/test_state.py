"""State transitions: untrack, tracking and backfill, audits, topics, restatement, runtime config."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from sandbox.testing import SandboxHandle
from tests.sandbox.helpers import assert_error, client, data

WINDOW = {"from": "2026-10-01", "to": "2026-11-01"}


def wait_for(fetch: Callable[[], Any], done: Callable[[Any], bool], timeout: float = 20.0) -> Any:
    """Poll until ``done``; the timeout only stops a broken sandbox from hanging the suite."""
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_untrack_keeps_mentions_and_leaves_the_share_of_voice_set(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory(backfill_delay_seconds=0)
    brand = sb.world.brands[0]
    with client(sb) as api:
        tracked = data(api.get(f"/v1/brands/{brand.id}/tracked-competitors"))
        victim = tracked[0]
        mentions_before = data(
            api.get(f"/v1/prompts/{brand.prompts[0].id}/mentions", params={**WINDOW, "limit": 999})
        )
        result = data(api.delete(f"/v1/brands/{brand.id}/tracked-competitors/{victim['id']}"))
        assert result == {"id": victim["id"], "brand_name": victim["brand_name"], "untracked": True}

        after = data(api.get(f"/v1/brands/{brand.id}/tracked-competitors"))
        assert victim["id"] not in {t["id"] for t in after} and len(after) == len(tracked) - 1
        trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=WINDOW))
        assert victim["brand_name"] not in {c["brand_name"] for c in trend["competitors"]}
        listed = [trend["brand"], *trend["competitors"]]
        assert sum(e["totals"]["share_of_voice"] for e in listed) == pytest.approx(100.0, abs=0.01)

        mentions_after = data(
            api.get(f"/v1/prompts/{brand.prompts[0].id}/mentions", params={**WINDOW, "limit": 999})
        )
        assert mentions_after == mentions_before
        assert victim["brand_name"] in {m["brand_name"] for m in mentions_after}
        assert_error(
            api.delete(f"/v1/brands/{brand.id}/tracked-competitors/{victim['id']}"), 404, "not_found"
        )


def test_share_of_voice_of_the_brand_grows_when_a_competitor_is_untracked(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory(backfill_delay_seconds=0)
    brand = sb.world.brands[0]
    with client(sb) as api:
        path = f"/v1/brands/{brand.id}/competitors/trends"
        before = data(api.get(path, params=WINDOW))["brand"]["totals"]
        victim = data(api.get(f"/v1/brands/{brand.id}/tracked-competitors"))[0]
        api.delete(f"/v1/brands/{brand.id}/tracked-competitors/{victim['id']}")
        after = data(api.get(path, params=WINDOW))["brand"]["totals"]
    assert after["share_of_voice"] > before["share_of_voice"]
    assert after["mention_count"] == before["mention_count"]


def test_history_from_is_null_until_the_backfill_after_tracking_completes(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory(backfill_delay_seconds=600)
    brand = sb.world.brands[0]
    starting = next(m for m in brand.cast if m.tracking == "at_start")
    with client(sb) as api:
        path = f"/v1/brands/{brand.id}/tracked-competitors"
        row = next(t for t in data(api.get(path)) if t["brand_name"] == starting.name)
        assert row["history_from"] is None
        trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=WINDOW))
        pending = next(c for c in trend["competitors"] if c["brand_name"] == starting.name)
        assert pending["history_from"] is None and pending["totals"]["mention_count"] == 0

        sb.configure(backfill_delay_seconds=0)  # the backfill "finishes"
        rows = wait_for(lambda: data(api.get(path)), lambda rs: all(r["history_from"] for r in rs))
        done = next(t for t in rows if t["brand_name"] == starting.name)
        assert done["history_from"] == sb.world.history_start.isoformat()
        trend = data(api.get(f"/v1/brands/{brand.id}/competitors/trends", params=WINDOW))
        backfilled = next(c for c in trend["competitors"] if c["brand_name"] == starting.name)
        assert backfilled["totals"]["mention_count"] > 0


def test_tracking_a_discovered_competitor_again_restarts_its_backfill(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory(backfill_delay_seconds=600)
    brand = sb.world.brands[0]
    discovered = next(m for m in brand.cast if m.tracking == "none")
    tracked = sb.track(brand.id, discovered.name)
    assert tracked["brand_name"] == discovered.name and tracked["history_from"] is None
    with client(sb) as api:
        path = f"/v1/brands/{brand.id}/tracked-competitors"
        assert discovered.name in {t["brand_name"] for t in data(api.get(path))}
        sb.configure(backfill_delay_seconds=0)
        rows = wait_for(lambda: data(api.get(path)), lambda rs: all(r["history_from"] for r in rs))
        assert all(r["history_from"] for r in rows)
        untracked = data(api.delete(f"{path}/{tracked['id']}"))
        assert untracked["untracked"] is True
    sb.configure(backfill_delay_seconds=600)
    again = sb.track(brand.id, discovered.name)
    assert again["id"] == tracked["id"] and again["history_from"] is None


def test_audit_is_pending_then_complete_with_a_report(sandbox_factory: Callable[..., SandboxHandle]) -> None:
    sb = sandbox_factory(audit_delay_seconds=600)
    brand = sb.world.brands[0]
    with client(sb) as api:
        created = data(
            api.post("/v1/audit-reports", json={"url": "https://acme.example/p", "brand_id": brand.id}), 202
        )
        first = data(api.get(created["poll"]))
        assert first["status"] == "pending" and first["score"] is None
        sb.configure(audit_delay_seconds=0.2)  # processing completes
        final = wait_for(lambda: data(api.get(created["poll"])), lambda a: a["status"] == "complete")
    assert final["status"] == "complete" and final["id"] == created["id"]
    assert 0 <= final["score"] <= 100 and final["findings"] and final["completed_at"]
    assert {k: final[k] for k in ("url", "brand_id", "poll")} == {
        k: created[k] for k in ("url", "brand_id", "poll")
    }


def test_topics_are_created_with_201_and_renamed_without_touching_prompts(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory()
    brand = sb.world.brands[0]
    with client(sb) as api:
        created = data(api.post(f"/v1/brands/{brand.id}/topics", json={"name": "Launch"}), 201)
        assert created["name"] == "Launch" and created["prompt_count"] == 0
        assert created["id"] in {t["id"] for t in data(api.get(f"/v1/brands/{brand.id}/topics"))}

        existing = data(api.get(f"/v1/brands/{brand.id}/topics"))[0]
        prompts_before = data(api.get(f"/v1/brands/{brand.id}/prompts", params={"limit": 999}))
        renamed = data(api.patch(f"/v1/brands/{brand.id}/topics/{existing['id']}", json={"name": "Renamed"}))
        assert renamed["id"] == existing["id"] and renamed["name"] == "Renamed"
        assert renamed["prompt_count"] == existing["prompt_count"]
        assert renamed["updated_at"] >= existing["updated_at"]
        assert data(api.get(f"/v1/brands/{brand.id}/prompts", params={"limit": 999})) == prompts_before

        unknown = "00000000-0000-4000-8000-000000000000"
        assert_error(
            api.patch(f"/v1/brands/{brand.id}/topics/{unknown}", json={"name": "x"}), 404, "not_found"
        )
        assert_error(
            api.patch(f"/v1/brands/{brand.id}/topics/{existing['id']}", json={}), 400, "missing_parameter"
        )


def test_workspace_key_creates_a_brand_with_201(sandbox_factory: Callable[..., SandboxHandle]) -> None:
    sb = sandbox_factory()
    with client(sb) as api:
        created = data(
            api.post("/v1/brands", json={"name": "Fresh", "domain": "fresh.example", "engines": ["claude"]}),
            201,
        )
        assert created["name"] == "Fresh" and created["engines"] == ["claude"]
        assert created["id"] in {b["id"] for b in data(api.get("/v1/brands"))}
        assert data(api.get(f"/v1/brands/{created['id']}/competitors/trends"))["brand"]["series"] == []
        bad = api.post("/v1/brands", json={"name": "X", "domain": "x.example", "engines": ["bard"]})
        assert_error(bad, 400, "invalid_engine")


def test_restate_changes_only_the_last_restate_days(sandbox_factory: Callable[..., SandboxHandle]) -> None:
    sb = sandbox_factory(restate_days=3, backfill_delay_seconds=0)
    brand = sb.world.brands[0]
    with client(sb) as api:
        path = f"/v1/brands/{brand.id}/competitors/trends"
        before = data(api.get(path, params=WINDOW))["brand"]["series"]
        assert sb.restate() == 1
        after = data(api.get(path, params=WINDOW))["brand"]["series"]
    cutoff = (sb.world.today - dt.timedelta(days=3)).isoformat()
    old_before = [p for p in before if p["date"] < cutoff]
    assert old_before == [p for p in after if p["date"] < cutoff]
    recent = [(b, a) for b, a in zip(before, after, strict=True) if b["date"] >= cutoff]
    assert recent and any(b != a for b, a in recent)
    assert all(b["responses_answered"] == a["responses_answered"] for b, a in recent)


def test_stats_count_v1_requests_by_template_and_status(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory()
    brand = sb.world.brands[0]
    with client(sb) as api:
        api.get(f"/v1/prompts/{brand.prompts[0].id}/mentions")
        api.get(f"/v1/prompts/{brand.prompts[1].id}/mentions")
        api.get("/v1/brands/not-a-uuid")
        httpx.get(f"{sb.url}/v1/brands")
        api.get("/_sandbox/keys")
    assert sb.stats() == {
        "GET /v1/prompts/{id}/mentions": {"200": 2},
        "GET /v1/brands/{id}": {"404": 1},
        "GET /v1/brands": {"401": 1},
    }
    sb.reset_stats()
    assert sb.stats() == {}


def test_runtime_config_changes_delays_limits_and_failures(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory()
    view = sb.configure(
        audit_delay_seconds=0, limits={"quota": 2}, fail_endpoints=["GET /v1/brands/{id}/tracked-competitors"]
    )
    assert view["audit_delay_seconds"] == 0 and view["limits"]["quota"] == 2
    brand = sb.world.brands[0]
    with client(sb) as api:
        assert_error(api.get(f"/v1/brands/{brand.id}/tracked-competitors"), 500, "internal_error")
        assert api.get("/v1/brands").status_code == 200
        assert_error(api.get("/v1/brands"), 429, "quota_exceeded")
    assert httpx.get(f"{sb.url}/_sandbox/stats").status_code == 200  # admin is never limited
    response = httpx.post(f"{sb.url}/_sandbox/config", json={"seed": 3})
    assert_error(response, 400, "invalid_request")


def test_keys_endpoint_lists_every_role(sandbox: SandboxHandle) -> None:
    keys = httpx.get(f"{sandbox.url}/_sandbox/keys").json()["keys"]
    assert set(keys) == {
        "workspace",
        "scoped",
        "revoked",
        "past_due",
        "trialing",
        "no_api_plan",
        "other_workspace",
    }
    assert keys == sandbox.keys


def test_openapi_document_is_served(sandbox: SandboxHandle) -> None:
    document = httpx.get(f"{sandbox.url}/openapi.json").json()
    assert document["openapi"].startswith("3.") and "/v1/brands" in document["paths"]


def test_faults_configured_at_runtime_hit_v1_only_and_are_counted(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory()
    sb.configure(faults={"overrides": {"server_error": 1.0}})
    with client(sb) as api:
        faulted = api.get("/v1/brands")
        assert faulted.status_code in (500, 502, 503)
        assert faulted.headers.get("x-request-id")
        assert httpx.get(f"{sb.url}/_sandbox/keys").status_code == 200
        sb.configure(faults={"overrides": {}})
        assert api.get("/v1/brands").status_code == 200
    assert sb.stats()["GET /v1/brands"] == {str(faulted.status_code): 1, "200": 1}


def test_the_restate_fault_bumps_the_revision_through_the_scope_hook(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    sb = sandbox_factory()
    assert httpx.get(f"{sb.url}/_sandbox/config").json()["revision"] == 0
    sb.configure(faults={"overrides": {"restate": 1.0}})
    with client(sb) as api:
        assert api.get("/v1/brands").status_code == 200
    assert httpx.get(f"{sb.url}/_sandbox/config").json()["revision"] >= 1
