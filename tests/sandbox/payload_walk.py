"""A fixed walk over every endpoint of the sandbox, reduced to one digest per request.

Used by ``test_payloads_unchanged.py`` to prove that performance work on the sandbox changes nothing
it serves: status, headers and parsed bodies of each request are digested, and the digests were
recorded with the code before the change (``payload_digests.json``). What legitimately differs
between two runs is normalized first: the random ``X-Request-Id`` (also quoted by 500 messages),
``Date``, HTTP-date ``Retry-After`` values, seconds until a window or quota ends (in tens of seconds:
they shrink while a busy machine runs the walk), the order of ``Allow`` (a set), and wall-clock
timestamps (records the walk creates, the competitor tracked when the sandbox starts).
``Content-Length`` is left out of the header digest (a body may be re-encoded with other float
spellings, e.g. ``1e-06`` vs ``1e-6``); raw bodies get digests of their own, which the test does not
compare (they also hold wall-clock timestamps) but a before/after comparison can.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from sandbox.limits import LimitsConfig
from sandbox.testing import SandboxHandle

Request = tuple[str, str, dict[str, Any], dict[str, Any] | None, str]  # method, path, params, body, role
_VOLATILE_HEADERS = frozenset({"x-request-id", "date", "server", "content-length"})
_SECONDS_LEFT = frozenset({"retry-after", "x-ratelimit-reset", "x-endpoint-reset"})
_TIME_FIELDS = frozenset({"created_at", "updated_at", "completed_at", "tracked_since"})


def _is_now(value: Any) -> bool:
    """A timestamp of the wall clock (a record the walk created, a competitor tracked at start)."""
    try:
        moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return False
    return moment.tzinfo is not None and abs(moment - dt.datetime.now(dt.UTC)) < dt.timedelta(days=1)


def _normalized(value: Any, request_id: str) -> Any:
    if isinstance(value, dict):
        return {
            k: "<now>" if k in _TIME_FIELDS and _is_now(v) else _normalized(v, request_id)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_normalized(v, request_id) for v in value]
    if isinstance(value, str) and request_id:
        return value.replace(request_id, "<request-id>")
    return value


def _header_value(name: str, value: str) -> str:
    """``value``, with what legitimately varies between runs made comparable."""
    if name == "allow":  # a set: its order varies per process
        return ", ".join(sorted(value.split(", ")))
    if name in _SECONDS_LEFT:
        if not value.lstrip("-").isdigit():
            return "<http-date>"  # a faulted Retry-After as a date: relative to the wall clock
        # seconds until a window or quota period ends shrink while a slow machine runs the walk:
        # compared in tens of seconds (a window of 60 s reads 55..64 s, about 5 s of slack)
        return str(round(int(value) / 10)) if abs(int(value)) >= 10 else value
    return value


def record(method: str, path: str, outcome: httpx.Response | Exception) -> dict[str, Any]:
    """Status, headers and parsed body of one answer, normalized; or the exception it raised."""
    if isinstance(outcome, Exception):  # a dropped or cut connection: reset or closed, as timing has it
        kind = "transport" if isinstance(outcome, httpx.TransportError) else type(outcome).__name__
        return {"request": f"{method} {path}", "exception": kind}
    request_id = outcome.headers.get("x-request-id", "")
    headers = sorted(
        (k, _header_value(k, v)) for k, v in outcome.headers.items() if k not in _VOLATILE_HEADERS
    )
    try:
        body: Any = outcome.json()
    except ValueError:
        body = outcome.text
    return {
        "request": f"{method} {path}",
        "status": outcome.status_code,
        "headers": headers,
        "has_request_id": bool(request_id),
        "body": _normalized(body, request_id),
    }


def digest(item: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(item, sort_keys=True).encode()).hexdigest()[:16]


def run(handle: SandboxHandle, requests: Iterator[Request] | list[Request]) -> tuple[list[str], list[str]]:
    """Send each request in turn; return the digest of each record and of each raw body."""
    records, raw = [], []
    clients = {
        role: httpx.Client(
            base_url=handle.url,
            headers={"Authorization": f"Bearer {handle.keys[role]}"} if role else {},
            timeout=30.0,
        )
        for role in ("", *handle.keys)
    }
    try:
        for method, path, params, body, role in requests:
            try:
                outcome: httpx.Response | Exception = clients[role].request(
                    method, path, params=params, json=body
                )
            except httpx.HTTPError as exc:
                outcome = exc
            item = record(method, f"{path}?{sorted(params.items())}", outcome)
            records.append(digest(item))
            raw.append(
                hashlib.sha256(outcome.content).hexdigest()[:16]
                if isinstance(outcome, httpx.Response)
                else "-"
            )
    finally:
        for client in clients.values():
            client.close()
    return records, raw


def _get(path: str, role: str = "workspace", **params: Any) -> Request:
    return ("GET", path, params, None, role)


def _paged(handle: SandboxHandle, path: str, pages: int, **params: Any) -> list[Request]:
    """The first ``pages`` pages of a listing, following the cursors the sandbox returns."""
    out = []
    with httpx.Client(
        base_url=handle.url, headers={"Authorization": f"Bearer {handle.keys['workspace']}"}
    ) as c:
        cursor = None
        for _ in range(pages):
            query = dict(params, cursor=cursor) if cursor else dict(params)
            out.append(_get(path, **query))
            cursor = c.get(path, params=query).json().get("next_cursor")
            if not cursor:
                break
    return out


def read_walk(handle: SandboxHandle) -> list[Request]:
    """Every read endpoint with its parameters, cursors, and the error answers of each."""
    today = dt.date(2026, 11, 1)
    ten = {"from": (today - dt.timedelta(days=10)).isoformat(), "to": today.isoformat()}
    three = {"from": (today - dt.timedelta(days=3)).isoformat(), "to": today.isoformat()}
    one = {
        "from": (today - dt.timedelta(days=2)).isoformat(),
        "to": (today - dt.timedelta(days=1)).isoformat(),
    }
    with httpx.Client(
        base_url=handle.url, headers={"Authorization": f"Bearer {handle.keys['workspace']}"}
    ) as c:
        brands = c.get("/v1/brands").json()["data"]
        prompts = {
            b["id"]: c.get(f"/v1/brands/{b['id']}/prompts", params={"limit": 999}).json()["data"]
            for b in brands
        }
        topics = {b["id"]: c.get(f"/v1/brands/{b['id']}/topics").json()["data"] for b in brands}
        gens = {b["id"]: c.get(f"/v1/brands/{b['id']}/generations").json()["data"] for b in brands}
        urls = {
            b["id"]: c.get(f"/v1/brands/{b['id']}/citations/urls", params=ten).json()["data"] for b in brands
        }
    walk: list[Request] = [_get("/v1/brands", role) for role in ("", *handle.keys)]
    for b in brands:
        bid = b["id"]
        engine = b["engines"][-1]
        walk += [
            _get(f"/v1/brands/{bid}"),
            _get(f"/v1/brands/{bid}", "scoped"),
            _get(f"/v1/brands/{bid}", "other_workspace"),
        ]
        walk += [_get(f"/v1/brands/{bid}/topics")]
        walk += _paged(handle, f"/v1/brands/{bid}/prompts", 3, limit=10)
        walk += _paged(handle, f"/v1/brands/{bid}/answers", 4, limit=100, **three)
        walk += _paged(handle, f"/v1/brands/{bid}/answers", 2, limit=37, engine=engine, **ten)
        walk += [
            _get(f"/v1/brands/{bid}/answers"),
            _get(f"/v1/brands/{bid}/answers", engine="copilot", **one),
        ]
        for p in prompts[bid][:3] + prompts[bid][-1:]:
            walk += [_get(f"/v1/prompts/{p['id']}/mentions", limit=999, **ten)]
            walk += _paged(handle, f"/v1/prompts/{p['id']}/mentions", 3, limit=50, **ten)
            walk += [
                _get(f"/v1/prompts/{p['id']}/mentions", engine=engine, **three),
                _get(f"/v1/prompts/{p['id']}/mentions"),
            ]
        walk += _paged(handle, f"/v1/brands/{bid}/generations", 3, limit=60)
        walk += [_get(f"/v1/brands/{bid}/generations/{gens[bid][0]['id']}")]
        topic = next((t["id"] for t in topics[bid]), None)
        walk += [
            _get(f"/v1/brands/{bid}/citations/trends"),
            _get(f"/v1/brands/{bid}/citations/trends", engine=engine, **ten),
            _get(f"/v1/brands/{bid}/citations/trends", domain="en.wikipedia.org", **ten),
            _get(f"/v1/brands/{bid}/citations/trends", url=urls[bid][0]["url"], **ten),
            _get(f"/v1/brands/{bid}/citations/trends", topic_id=topic, **ten),
            _get(f"/v1/brands/{bid}/citations/urls"),
            _get(f"/v1/brands/{bid}/citations/urls", limit=2000, **ten),
            _get(f"/v1/brands/{bid}/citations/urls", limit=5, engine=engine, **one),
            _get(f"/v1/brands/{bid}/citations/urls", limit=2000, topic_id=topic, **three),
            _get(f"/v1/brands/{bid}/tracked-competitors"),
            _get(f"/v1/brands/{bid}/competitors/trends"),
            _get(f"/v1/brands/{bid}/competitors/trends", granularity="week"),
            _get(f"/v1/brands/{bid}/competitors/trends", engine=engine, **ten),
        ]
    bid, pid = brands[0]["id"], prompts[brands[0]["id"]][0]["id"]
    walk += [
        _get(f"/v1/brands/{bid}/answers", limit=0),
        _get(f"/v1/brands/{bid}/answers", limit=101),
        _get(f"/v1/brands/{bid}/answers", limit="x"),
        _get(f"/v1/brands/{bid}/answers", cursor="bogus"),
        _get(f"/v1/brands/{bid}/answers", **{"from": "2026-02-30"}),
        _get(f"/v1/brands/{bid}/answers", **{"from": "2026-10-10", "to": "2026-10-01"}),
        _get(f"/v1/brands/{bid}/answers", engine="altavista"),
        _get(f"/v1/prompts/{pid}/mentions", limit=1000),
        _get("/v1/prompts/00000000-0000-0000-0000-000000000000/mentions"),
        _get("/v1/brands/not-a-uuid"),
        _get(f"/v1/brands/{bid}/citations/trends", topic_id="nope"),
        _get(f"/v1/brands/{bid}/citations/trends", domain="x.com", url="https://x.com/a"),
        _get(f"/v1/brands/{bid}/competitors/trends", granularity="month"),
        _get("/v1/nowhere"),
        _get("/v1/brands", "revoked"),
        ("PUT", f"/v1/brands/{bid}", {}, None, "workspace"),
    ]
    return walk


def write_walk(handle: SandboxHandle) -> list[Request]:
    """Creations, renames, audits, untracking and a restatement, each followed by reads it affects."""
    walk = read_walk(handle)[:1]
    with httpx.Client(
        base_url=handle.url, headers={"Authorization": f"Bearer {handle.keys['workspace']}"}
    ) as c:
        brand = c.get("/v1/brands").json()["data"][0]
        tracked = c.get(f"/v1/brands/{brand['id']}/tracked-competitors").json()["data"]
        prompt = c.get(f"/v1/brands/{brand['id']}/prompts").json()["data"][0]
    bid = brand["id"]
    recent = {"from": "2026-10-27", "to": "2026-11-01"}
    walk += [
        (
            "POST",
            "/v1/brands",
            {},
            {"name": "Zed Co", "domain": "zed.example", "engines": ["claude", "chatgpt"]},
            "workspace",
        ),
        ("POST", "/v1/brands", {}, {"name": "Zed Co"}, "workspace"),
        ("POST", "/v1/brands", {}, {"name": "Zed", "domain": "z.example"}, "scoped"),
        ("POST", f"/v1/brands/{bid}/topics", {}, {"name": "Fresh"}, "workspace"),
        ("POST", f"/v1/brands/{bid}/topics", {}, {"name": ""}, "workspace"),
        _get(f"/v1/brands/{bid}/topics"),
        ("POST", "/v1/audit-reports", {}, {"url": "https://example.com/a", "brand_id": bid}, "workspace"),
        ("POST", "/v1/audit-reports", {}, {"url": "ftp://example.com/a", "brand_id": bid}, "workspace"),
        ("POST", "/v1/audit-reports", {}, {"url": "https://example.com/a", "brand_id": bid}, "trialing"),
        ("DELETE", f"/v1/brands/{bid}/tracked-competitors/{tracked[0]['id']}", {}, None, "workspace"),
        ("DELETE", f"/v1/brands/{bid}/tracked-competitors/{tracked[0]['id']}", {}, None, "workspace"),
        _get(f"/v1/brands/{bid}/competitors/trends", **recent),
        _get(f"/v1/prompts/{prompt['id']}/mentions", **recent),
        _get(f"/v1/brands/{bid}/answers", **recent),
        ("POST", "/_sandbox/restate", {}, None, ""),
        _get(f"/v1/prompts/{prompt['id']}/mentions", **recent),
        _get(f"/v1/brands/{bid}/answers", **recent),
        _get(f"/v1/brands/{bid}/citations/urls", **recent),
        _get(f"/v1/brands/{bid}/competitors/trends", **recent),
        _get(f"/v1/brands/{bid}", "workspace"),
        ("GET", "/_sandbox/stats", {}, None, ""),
        ("GET", "/_sandbox/keys", {}, None, ""),
        ("GET", "/_sandbox/config", {}, None, ""),
        ("GET", "/openapi.json", {}, None, ""),
    ]
    return walk


def audit_walk(handle: SandboxHandle) -> Iterator[Request]:
    """An audit created, then read back once complete (created_at and completed_at are normalized)."""
    with httpx.Client(
        base_url=handle.url, headers={"Authorization": f"Bearer {handle.keys['workspace']}"}
    ) as c:
        bid = c.get("/v1/brands").json()["data"][0]["id"]
        audit = c.post("/v1/audit-reports", json={"url": "https://example.com/b", "brand_id": bid}).json()[
            "data"
        ]
    yield ("GET", f"/v1/audit-reports/{audit['id']}", {}, None, "workspace")
    yield ("GET", f"/v1/audit-reports/{audit['id']}", {}, None, "other_workspace")


def limited_walk(handle: SandboxHandle) -> list[Request]:
    """Budget headers, the endpoint window of audits, then the quota running out."""
    walk = [_get("/v1/brands") for _ in range(3)]
    with httpx.Client(
        base_url=handle.url, headers={"Authorization": f"Bearer {handle.keys['workspace']}"}
    ) as c:
        bid = c.get("/v1/brands").json()["data"][0]["id"]
    body = {"url": "https://example.com/c", "brand_id": bid}
    walk += [("POST", "/v1/audit-reports", {}, body, "workspace") for _ in range(3)]
    walk += [_get("/v1/brands") for _ in range(4)]
    return walk


def faults_walk(handle: SandboxHandle) -> list[Request]:
    """The reads again under the hostile profile (no waits): injected errors, extra fields, restates."""
    walk = read_walk(handle)
    handle.configure(
        faults={
            "profile": "hostile",
            "seed": 5,
            "overrides": {"latency": 0.0, "slow_body_pause_ms": 1.0, "retry_after_max_s": 1},
        }
    )
    return walk


def _quota_limits() -> dict[str, Any]:
    return {"limits": LimitsConfig(rate_per_second=100_000.0, burst=100_000, endpoint_limit=2, quota=9)}


#: name, the config fields of its sandbox, the walk (built against that sandbox before it is run)
SCENARIOS: tuple[tuple[str, Callable[[], dict[str, Any]], Callable[[SandboxHandle], Any]], ...] = (
    ("reads", dict, read_walk),
    ("writes", dict, write_walk),
    ("audits", lambda: {"audit_delay_seconds": 0.0}, audit_walk),
    ("faults", dict, faults_walk),
    ("limits", _quota_limits, limited_walk),
)


def collect(start: Callable[..., SandboxHandle]) -> dict[str, dict[str, list[str]]]:
    """Digests of every scenario (``records``; ``bodies``: of the raw bytes, to tell byte-identical
    answers apart); ``start(**fields)`` starts a fresh sandbox with those config fields."""
    out = {}
    for name, fields, walk in SCENARIOS:
        handle = start(**fields())
        records, raw = run(handle, list(walk(handle)))
        out[name] = {"records": records, "bodies": raw}
    return out
