"""The spec's Authentication section: every row of its table, against the running sandbox."""

from __future__ import annotations

import httpx

from sandbox.testing import SandboxHandle
from tests.sandbox.helpers import assert_error, client, data


def test_missing_authorization_header_is_401_missing_api_key(sandbox: SandboxHandle) -> None:
    assert_error(httpx.get(f"{sandbox.url}/v1/brands"), 401, "missing_api_key")


def test_unknown_key_is_401_invalid_api_key(sandbox: SandboxHandle) -> None:
    response = httpx.get(f"{sandbox.url}/v1/brands", headers={"Authorization": "Bearer vsk_nope"})
    assert_error(response, 401, "invalid_api_key")


def test_non_bearer_scheme_is_401_invalid_api_key(sandbox: SandboxHandle) -> None:
    response = httpx.get(
        f"{sandbox.url}/v1/brands", headers={"Authorization": f"Basic {sandbox.keys['workspace']}"}
    )
    assert_error(response, 401, "invalid_api_key")


def test_revoked_key_is_401_invalid_api_key(sandbox: SandboxHandle) -> None:
    with client(sandbox, "revoked") as api:
        assert_error(api.get("/v1/brands"), 401, "invalid_api_key")


def test_past_due_subscription_is_402_subscription_required(sandbox: SandboxHandle) -> None:
    with client(sandbox, "past_due") as api:
        assert_error(api.get("/v1/brands"), 402, "subscription_required")


def test_plan_without_api_access_is_403_plan_not_eligible(sandbox: SandboxHandle) -> None:
    with client(sandbox, "no_api_plan") as api:
        assert_error(api.get("/v1/brands"), 403, "plan_not_eligible")


def test_trialing_subscription_reads_normally(sandbox: SandboxHandle) -> None:
    with client(sandbox, "trialing") as api:
        brands = data(api.get("/v1/brands"))
    assert len(brands) == 1


def test_trialing_workspace_cannot_order_audits_403_forbidden(sandbox: SandboxHandle) -> None:
    with client(sandbox, "trialing") as api:
        brand_id = data(api.get("/v1/brands"))[0]["id"]
        response = api.post("/v1/audit-reports", json={"url": "https://example.com/", "brand_id": brand_id})
    assert_error(response, 403, "forbidden")


def test_brand_scoped_key_cannot_create_brands_403(sandbox: SandboxHandle) -> None:
    with client(sandbox, "scoped") as api:
        response = api.post("/v1/brands", json={"name": "New", "domain": "new.example"})
    assert_error(response, 403, "brand_scope_forbidden")


def test_workspace_key_lists_every_brand_of_its_workspace(sandbox: SandboxHandle) -> None:
    main = sandbox.world.workspaces["main"].id
    expected = {b.id for b in sandbox.world.brands if b.workspace_id == main}
    with client(sandbox) as api:
        assert {b["id"] for b in data(api.get("/v1/brands"))} == expected


def test_scoped_key_sees_only_brands_in_its_scope(sandbox: SandboxHandle) -> None:
    key = next(k for k in sandbox.world.keys.values() if k.role == "scoped")
    assert key.brand_scope is not None
    with client(sandbox, "scoped") as api:
        assert {b["id"] for b in data(api.get("/v1/brands"))} == set(key.brand_scope)


def test_brand_outside_scope_is_404_everywhere(sandbox: SandboxHandle) -> None:
    key = next(k for k in sandbox.world.keys.values() if k.role == "scoped")
    outside = next(
        b for b in sandbox.world.brands if b.workspace_id == key.workspace_id and b.id not in key.brand_scope
    )
    prompt = outside.prompts[0]
    with client(sandbox, "scoped") as api:
        assert_error(api.get(f"/v1/brands/{outside.id}"), 404, "not_found")
        assert_error(api.get(f"/v1/brands/{outside.id}/competitors/trends"), 404, "not_found")
        assert_error(api.get(f"/v1/prompts/{prompt.id}/mentions"), 404, "not_found")
        assert_error(api.post(f"/v1/brands/{outside.id}/topics", json={"name": "x"}), 404, "not_found")


def test_records_of_another_workspace_are_404(sandbox: SandboxHandle) -> None:
    other = next(b for b in sandbox.world.brands if b.workspace_id == sandbox.world.workspaces["other"].id)
    with client(sandbox) as api:
        assert_error(api.get(f"/v1/brands/{other.id}"), 404, "not_found")
        assert_error(api.get(f"/v1/prompts/{other.prompts[0].id}/mentions"), 404, "not_found")
        assert_error(api.get(f"/v1/brands/{other.id}/generations"), 404, "not_found")
    with client(sandbox, "other_workspace") as api:
        assert [b["id"] for b in data(api.get("/v1/brands"))] == [other.id]


def test_every_response_carries_a_request_id(sandbox: SandboxHandle) -> None:
    with client(sandbox) as api:
        responses = [
            api.get("/v1/brands"),
            api.get("/v1/nowhere"),
            api.get("/not-an-api-path"),
            api.put("/v1/brands"),
            httpx.get(f"{sandbox.url}/v1/brands"),
            api.get("/_sandbox/stats"),
        ]
    ids = [r.headers.get("x-request-id") for r in responses]
    assert all(ids) and len(set(ids)) == len(ids)
