"""The OpenAPI document: it names every endpoint the sandbox serves, and the running sandbox conforms
to it, proven by property-based testing (schemathesis generates requests from the served document
and checks statuses, content types, headers and bodies of every answer)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sandbox.openapi import ERROR_CODES, openapi_document
from sandbox.routes import SPENDING_ENDPOINTS, V1_ENDPOINTS
from sandbox.testing import SandboxHandle, run_sandbox
from tests.fixtures_sandbox import test_sandbox_config
from tests.sandbox.helpers import client, data

DOCUMENT = openapi_document()
OPERATIONS = sorted((method.upper(), path) for path, item in DOCUMENT["paths"].items() for method in item)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def test_document_is_valid_openapi_with_valid_json_schemas() -> None:
    schemathesis.openapi.from_dict(DOCUMENT).validate()  # against the OpenAPI 3.1 meta-schema
    inline = [
        media["schema"]
        for item in DOCUMENT["paths"].values()
        for operation in item.values()
        for response in operation["responses"].values()
        for media in response.get("content", {}).values()
    ]
    for schema in [*DOCUMENT["components"]["schemas"].values(), *inline]:
        jsonschema_rs.meta.validate({"$schema": "https://json-schema.org/draft/2020-12/schema", **schema})


def test_document_declares_exactly_the_endpoints_the_sandbox_serves() -> None:
    assert sorted(V1_ENDPOINTS) == OPERATIONS


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` of the document."""
    while "$ref" in node:
        target: Any = DOCUMENT
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def test_document_declares_the_spec_error_codes_and_bearer_auth() -> None:
    assert DOCUMENT["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert DOCUMENT["security"] == [{"bearerAuth": []}]
    trends = DOCUMENT["paths"]["/v1/brands/{id}/competitors/trends"]["get"]["responses"]
    assert set(trends) == {"200", "400", "401", "402", "403", "404", "429", "500"}
    for status in ERROR_CODES.keys() & {int(s) for s in trends}:
        schema = resolve(resolve(trends[str(status)])["content"]["application/json"]["schema"])
        code = schema["allOf"][1]["properties"]["error"]["properties"]["code"]
        assert code["enum"] == list(ERROR_CODES[status])


def test_only_spending_operations_declare_endpoint_headers() -> None:
    for method, path in OPERATIONS:
        responses = DOCUMENT["paths"][path][method.lower()]["responses"]
        spending = f"{method} {path}" in SPENDING_ENDPOINTS
        for status, response in responses.items():
            headers = resolve(response)["headers"]
            assert ("X-Endpoint-Limit" in headers) == spending, (method, path, status)
            assert resolve(headers["X-RateLimit-Remaining"])["required"] is True
            assert ("Retry-After" in headers) == (status == "429")


@dataclass
class Conformance:
    handle: SandboxHandle
    schema: Any
    headers: dict[str, str]
    ids: dict[str, list[str]]  # path parameter name -> ids that exist


@pytest.fixture(scope="module")
def conformance() -> Iterator[Conformance]:
    """A sandbox of its own (generated requests create topics and untrack competitors), its served
    document, and ids that exist, so generated requests reach records and not only 404s."""
    with run_sandbox(test_sandbox_config()) as handle:
        served = httpx.get(handle.url + "/openapi.json").json()
        assert served == DOCUMENT
        with client(handle) as http:
            brand = data(http.get("/v1/brands"))[0]["id"]
            prompt = data(http.get(f"/v1/brands/{brand}/prompts", params={"limit": 3}))[0]["id"]
            topic = data(http.get(f"/v1/brands/{brand}/topics"))[0]["id"]
            generation = data(http.get(f"/v1/brands/{brand}/generations", params={"limit": 1}))[0]["id"]
            competitors = [c["id"] for c in data(http.get(f"/v1/brands/{brand}/tracked-competitors"))]
            audit = data(
                http.post("/v1/audit-reports", json={"url": "https://example.com/", "brand_id": brand}), 202
            )["id"]
        schema = schemathesis.openapi.from_url(handle.url + "/openapi.json")
        yield Conformance(
            handle,
            schema,
            {"Authorization": f"Bearer {handle.keys['workspace']}"},
            {
                "brand": [brand],
                "prompt": [prompt],
                "topicId": [topic],
                "generationId": [generation],
                "competitorId": competitors,
                "audit": [audit],
            },
        )


def _existing_ids(path: str, ids: dict[str, list[str]], pick: int) -> dict[str, str]:
    """Path parameters that name records which exist (``{id}`` is a brand, prompt or audit id)."""
    id_kind = "prompt" if path.startswith("/v1/prompts/") else "audit" if "audit-reports" in path else "brand"
    chosen = {"id": ids[id_kind][0]}
    for name in ("topicId", "generationId", "competitorId"):
        if "{" + name + "}" in path:
            chosen[name] = ids[name][pick % len(ids[name])]
    return chosen


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_sandbox_conforms_to_its_document(conformance: Conformance, method: str, path: str) -> None:
    operation = conformance.schema[path][method]

    # Three examples in four name existing records, so the property covers more than 404s.
    @given(case=operation.as_strategy(), existing=st.integers(0, 3).map(bool), pick=st.integers(0, 7))
    @settings(
        max_examples=10,
        deadline=None,
        derandomize=True,  # the same examples on every run: CI cannot flake on a lucky draw
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def check(case: Any, existing: bool, pick: int) -> None:
        if existing:
            case.path_parameters = {**case.path_parameters, **_existing_ids(path, conformance.ids, pick)}
            if isinstance(case.body, dict) and "brand_id" in case.body:
                case.body = {**case.body, "brand_id": conformance.ids["brand"][0]}
        response = case.call_and_validate(
            base_url=conformance.handle.url, headers=conformance.headers, checks=CHECKS
        )
        assert response.status_code != 405

    check()


#: A minimal valid body per operation that takes one.
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/brands"): {"name": "Conformance Co", "domain": "conformance.example"},
    ("POST", "/v1/brands/{id}/topics"): {"name": "Conformance"},
    ("PATCH", "/v1/brands/{id}/topics/{topicId}"): {"name": "Renamed"},
    ("POST", "/v1/audit-reports"): {"url": "https://example.com/a"},
}


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_operation_answers_its_documented_success(
    conformance: Conformance, method: str, path: str
) -> None:
    """The generated examples may all be errors; this one request per operation is a success."""
    operation = conformance.schema[path][method]
    kwargs: dict[str, Any] = {"path_parameters": _existing_ids(path, conformance.ids, pick=0)}
    if method == "DELETE":
        # Generated requests may have untracked every competitor: track a never-tracked one to delete.
        brand = conformance.handle.world.brand_by_id[conformance.ids["brand"][0]]
        name = next(m.name for m in brand.cast if m.tracking == "none")
        kwargs["path_parameters"]["competitorId"] = conformance.handle.track(brand.id, name)["id"]
    if (method, path) in BODIES:
        body = dict(BODIES[(method, path)])
        if path == "/v1/audit-reports":
            body["brand_id"] = conformance.ids["brand"][0]
        kwargs["body"] = body
        kwargs["media_type"] = "application/json"
    case = operation.Case(**kwargs)
    response = case.call_and_validate(
        base_url=conformance.handle.url, headers=conformance.headers, checks=CHECKS
    )
    documented = next(code for code in DOCUMENT["paths"][path][method.lower()]["responses"] if code < "300")
    assert response.status_code == int(documented), response.text


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_sandbox_rejects_requests_that_break_the_document(
    conformance: Conformance, method: str, path: str
) -> None:
    """Invalid parameters and bodies (wrong types, unknown enums, bad dates) never crash the sandbox,
    and every answer to them is a documented one.

    ``negative_data_rejection`` is not used: schemathesis counts unknown query parameters as
    invalid, while the sandbox ignores them (the spec does not say to reject them)."""
    operation = conformance.schema[path][method]

    @given(case=operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
    @settings(
        max_examples=5,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def check(case: Any) -> None:
        case.call_and_validate(
            base_url=conformance.handle.url,
            headers=conformance.headers,
            checks=CHECKS,
        )

    check()


def test_errors_conform_for_every_auth_failure(conformance: Conformance) -> None:
    """401, 402 and 403 answers are documented too (generated requests always carry a good key)."""
    operation = conformance.schema["/v1/brands"]["GET"]
    for role in ("", "revoked", "past_due", "no_api_plan"):
        headers = {"Authorization": f"Bearer {conformance.handle.keys[role]}"} if role else {}
        case = operation.Case(query={"limit": 5})
        response = case.call(base_url=conformance.handle.url, headers=headers)
        assert response.status_code in (401, 402, 403)
        case.validate_response(response, checks=CHECKS)
    unknown = operation.Case(query={"limit": 5}).call(
        base_url=conformance.handle.url, headers={"Authorization": f"Bearer {uuid.uuid4()}"}
    )
    assert unknown.status_code == 401
