"""Fault profiles: every fault kind happens over real HTTP, and the same seed replays the same faults.

The seeding rule (``decide``) is a pure function and is proven directly; everything a client sees
(statuses, codes, Retry-After forms, HTML bodies, dropped and truncated connections, extra fields,
restated days) is proven against a running sandbox on loopback.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest

from sandbox.faults import (
    PROFILE_RATES,
    RETRY_AFTER_FORMS,
    FaultPlan,
    FaultRates,
    FaultsConfig,
    add_extra_fields,
    decide,
    retry_after_value,
)
from sandbox.testing import SandboxHandle, run_sandbox
from tests.fixtures_sandbox import test_sandbox_config
from tests.sandbox.helpers import assert_error, client, data

# -- the seeding rule ------------------------------------------------------------------------------


def _plans(profile: str, seed: int, n: int = 400) -> list[FaultPlan]:
    rates = PROFILE_RATES[profile]
    return [decide(rates, seed, "GET", f"/v1/brands?limit={i % 7}", i // 7) for i in range(n)]


def test_same_seed_and_request_give_the_same_plan() -> None:
    assert _plans("hostile", 11) == _plans("hostile", 11)


def test_different_seeds_give_different_plans() -> None:
    assert _plans("hostile", 11) != _plans("hostile", 12)


def test_profile_none_never_faults() -> None:
    assert all(plan == FaultPlan(salt=plan.salt) for plan in _plans("none", 3))


def test_hostile_faults_more_often_than_flaky() -> None:
    def failing(profile: str) -> int:
        return sum(plan.kind is not None for plan in _plans(profile, 5, 3000))

    flaky, hostile = failing("flaky"), failing("hostile")
    assert 0 < flaky < hostile
    # the expected shares are 7% and 22.5%; the draws are fixed by the seed, so this cannot flake
    assert 0.04 < flaky / 3000 < 0.10 and 0.20 < hostile / 3000 < 0.30


def test_a_retry_of_the_same_request_draws_afresh() -> None:
    rates = FaultRates(throttle=0.5)
    fates = {decide(rates, 1, "GET", "/v1/brands", n).kind for n in range(40)}
    assert fates == {"throttle", None}


def test_flaky_only_throttles_with_retryable_codes() -> None:
    codes = Counter(plan.code for plan in _plans("flaky", 2, 5000) if plan.status == 429)
    assert set(codes) == {"rate_limited", "endpoint_rate_limited", "concurrency_limited"}


def test_retry_after_forms_render_as_headers() -> None:
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    values = {
        form: retry_after_value(FaultPlan(kind="throttle", retry_after_form=form, retry_after_s=2), now)
        for form in RETRY_AFTER_FORMS
    }
    assert values["absent"] is None
    assert (values["seconds"], values["zero"], values["negative"]) == (b"2", b"0", b"-1")
    assert values["http_date"] is not None
    assert parsedate_to_datetime(values["http_date"].decode()) == now + dt.timedelta(seconds=2)


def test_extra_fields_keep_every_original_field() -> None:
    body = json.dumps({"data": [{"id": "a", "n": 1}, {"id": "b", "n": 2}], "has_more": False}).encode()
    rewritten = add_extra_fields(body, salt=7)
    assert rewritten is not None
    payload = json.loads(rewritten)
    assert [(r["id"], r["n"]) for r in payload["data"]] == [("a", 1), ("b", 2)]
    assert all(set(r) > {"id", "n"} for r in payload["data"])
    assert payload["has_more"] is False and set(payload) > {"data", "has_more"}
    assert add_extra_fields(b"<html>", salt=7) is None


def test_faults_config_rejects_unknown_profiles_and_impossible_rates() -> None:
    with pytest.raises(ValueError, match="profile"):
        FaultsConfig(profile="chaotic")
    with pytest.raises(ValueError, match="unknown fault rate"):
        FaultsConfig(overrides={"meteor": 1.0})
    with pytest.raises(ValueError, match="<= 1"):
        FaultsConfig(overrides={"throttle": 0.7, "server_error": 0.7})
    config = FaultsConfig(profile="flaky", seed=3)
    with pytest.raises(ValueError):
        config.update(seed=4, latency_ms=-1)
    assert (config.seed, config.latency_ms) == (3, 0.0)


# -- every fault over HTTP, against a running sandbox --------------------------------------------------

#: Keeps the slow faults short so a whole hostile sequence takes a second or two.
FAST = {"latency_max_ms": 20, "slow_body_pause_ms": 5}


@pytest.fixture(scope="module")
def faulty() -> Iterator[SandboxHandle]:
    """One sandbox for this module; each test sets its faults at runtime (which restarts counters)."""
    with run_sandbox(test_sandbox_config()) as handle:
        yield handle


@pytest.fixture(scope="module")
def paths(faulty: SandboxHandle) -> list[str]:
    """A mix of endpoints a sync calls."""
    faulty.configure(faults={"profile": "none", "overrides": {}})
    with client(faulty) as http:
        brand = data(http.get("/v1/brands"))[0]["id"]
        prompt = data(http.get(f"/v1/brands/{brand}/prompts", params={"limit": 1}))[0]["id"]
    return [
        "/v1/brands",
        f"/v1/brands/{brand}",
        f"/v1/brands/{brand}/generations?limit=5",
        f"/v1/brands/{brand}/tracked-competitors",
        f"/v1/prompts/{prompt}/mentions?from=2026-10-20&to=2026-10-27",
        f"/v1/brands/{brand}/citations/urls?limit=10&from=2026-10-20&to=2026-10-27",
    ]


def set_faults(handle: SandboxHandle, profile: str = "none", seed: int = 0, **changes: Any) -> None:
    handle.configure(faults={"profile": profile, "seed": seed, "latency_ms": 0, "overrides": {}, **changes})


def outcome(http: httpx.Client, path: str) -> tuple[Any, ...]:
    """What a client sees, reduced to what the seed decides (not the data, which restates change)."""
    try:
        response = http.get(path)
    except httpx.RemoteProtocolError as exc:
        return ("dropped",) if "without sending a response" in str(exc) else ("truncated",)
    content_type = response.headers.get("content-type", "").split(";")[0]
    try:
        body = response.json()
    except ValueError:
        return (response.status_code, content_type, "not json", response.headers.get("retry-after"))
    code = body.get("error", {}).get("code") if response.status_code >= 400 else None
    retry_after = response.headers.get("retry-after")
    if retry_after and not retry_after.lstrip("-").isdigit():
        retry_after = "http-date"
    return (response.status_code, content_type, code, retry_after, "request_cost" in body)


def run_sequence(handle: SandboxHandle, paths: list[str], rounds: int = 8) -> list[tuple[Any, ...]]:
    with client(handle) as http:
        return [outcome(http, path) for _ in range(rounds) for path in paths]


def test_same_seed_replays_the_same_faults_over_http(faulty: SandboxHandle, paths: list[str]) -> None:
    set_faults(faulty, "hostile", seed=21, overrides=FAST)
    first = run_sequence(faulty, paths)
    set_faults(faulty, "hostile", seed=21, overrides=FAST)
    again = run_sequence(faulty, paths)
    assert first == again
    assert len({o[0] for o in first}) >= 3  # the sequence holds faults, not only successes


def test_different_seeds_give_different_faults_over_http(faulty: SandboxHandle, paths: list[str]) -> None:
    set_faults(faulty, "hostile", seed=21, overrides=FAST)
    first = run_sequence(faulty, paths)
    set_faults(faulty, "hostile", seed=22, overrides=FAST)
    assert run_sequence(faulty, paths) != first


def test_concurrent_requests_get_the_same_faults_as_sequential_ones(
    faulty: SandboxHandle, paths: list[str]
) -> None:
    """The seeding rule keys on each request, not on arrival order, so concurrency cannot reshuffle faults."""
    # Distinct targets (an ignored query parameter tells them apart): each is the first of its kind.
    targets = [f"{path}{'&' if '?' in path else '?'}_probe={i}" for i in range(5) for path in paths]
    set_faults(faulty, "flaky", seed=5, overrides={**FAST, "throttle": 0.2, "server_error": 0.2})
    with client(faulty) as http:
        sequential = {t: outcome(http, t) for t in targets}
    set_faults(faulty, "flaky", seed=5, overrides={**FAST, "throttle": 0.2, "server_error": 0.2})

    with client(faulty) as http, ThreadPoolExecutor(max_workers=8) as pool:  # httpx.Client is thread-safe
        concurrent = dict(pool.map(lambda target: (target, outcome(http, target)), reversed(targets)))
    assert concurrent == sequential


def test_throttle_uses_every_retryable_code_and_every_retry_after_form(faulty: SandboxHandle) -> None:
    set_faults(faulty, seed=1, overrides={"throttle": 1.0})
    codes, forms = set(), set()
    with client(faulty) as http:
        for _ in range(60):
            response = http.get("/v1/brands")
            assert_error(response, 429, response.json()["error"]["code"])
            assert response.headers["x-ratelimit-remaining"].isdigit()  # the budget headers still apply
            codes.add(response.json()["error"]["code"])
            value = response.headers.get("retry-after")
            if value is None:
                forms.add("absent")
            elif value in ("0", "-1"):
                forms.add(value)
            elif value.isdigit():
                forms.add("seconds")
            else:
                parsedate_to_datetime(value)  # an HTTP date, or this raises
                forms.add("http-date")
    assert codes == {"rate_limited", "endpoint_rate_limited", "concurrency_limited"}
    assert forms == {"absent", "seconds", "0", "-1", "http-date"}


def test_quota_fault_answers_quota_exceeded(faulty: SandboxHandle) -> None:
    set_faults(faulty, seed=1, overrides={"quota": 1.0})
    with client(faulty) as http:
        response = http.get("/v1/brands")
    assert_error(response, 429, "quota_exceeded")
    assert int(response.headers["retry-after"]) >= 3600


def test_server_errors_include_html_and_other_non_json_bodies(faulty: SandboxHandle) -> None:
    set_faults(faulty, seed=2, overrides={"server_error": 1.0})
    seen: Counter[tuple[int, str]] = Counter()
    with client(faulty) as http:
        for _ in range(40):
            response = http.get("/v1/brands")
            kind = response.headers["content-type"].split(";")[0]
            if kind == "application/json":
                assert_error(response, 500, "internal_error")
            else:
                with pytest.raises(ValueError):
                    response.json()
            seen[(response.status_code, kind)] += 1
    assert {status for status, _ in seen} == {500, 502, 503}
    assert {kind for _, kind in seen} == {"application/json", "text/html", "text/plain"}


def test_drop_closes_the_connection_without_a_response(faulty: SandboxHandle) -> None:
    set_faults(faulty, seed=3, overrides={"drop": 1.0})
    with client(faulty) as http, pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        http.get("/v1/brands")


def test_truncate_cuts_the_body_short_of_its_content_length(faulty: SandboxHandle) -> None:
    set_faults(faulty, seed=3, overrides={"truncate": 1.0})
    with client(faulty) as http, pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
        http.get("/v1/brands")


def test_slow_bodies_deliver_the_same_bytes(faulty: SandboxHandle, paths: list[str]) -> None:
    set_faults(faulty)
    with client(faulty) as http:
        expected = {path: http.get(path).content for path in paths}
    set_faults(faulty, seed=4, overrides={"slow_body": 1.0, "slow_body_pause_ms": 5})
    framing = set()
    with client(faulty) as http:
        for _ in range(3):
            for path in paths:
                response = http.get(path)
                assert response.content == expected[path]
                framing.add("content-length" in response.headers)
    assert framing == {True, False}  # both fixed-length and chunked slow bodies occur


def test_extra_fields_are_added_to_every_row_and_keep_the_known_ones(faulty: SandboxHandle) -> None:
    set_faults(faulty)
    with client(faulty) as http:
        plain = http.get("/v1/brands").json()
    set_faults(faulty, seed=5, overrides={"extra_fields": 1.0})
    with client(faulty) as http:
        extended = http.get("/v1/brands").json()
    assert len(extended["data"]) == len(plain["data"])
    for old, new in zip(plain["data"], extended["data"], strict=True):
        assert {k: new[k] for k in old} == old
        assert set(new) - set(old)
    assert set(extended) - set(plain)


def test_restate_fault_restates_recent_days_between_calls(faulty: SandboxHandle, paths: list[str]) -> None:
    before = faulty.configure()["revision"]
    set_faults(faulty, seed=6, overrides={"restate": 1.0})
    with client(faulty) as http:
        for _ in range(3):
            assert http.get(paths[4]).status_code == 200
    assert faulty.configure()["revision"] == before + 3


def test_latency_ms_delays_every_v1_request(faulty: SandboxHandle) -> None:
    set_faults(faulty, latency_ms=150)
    with client(faulty) as http:
        response = http.get("/v1/brands")
    assert response.status_code == 200
    # A lower bound only: the server sleeps before answering, so this cannot flake.
    assert response.elapsed.total_seconds() >= 0.15


def test_admin_endpoints_and_the_document_are_never_faulted(faulty: SandboxHandle) -> None:
    set_faults(faulty, seed=7, overrides={"throttle": 1.0})
    with httpx.Client(base_url=faulty.url) as http:
        for path in ("/_sandbox/stats", "/_sandbox/config", "/openapi.json") * 3:
            assert http.get(path).status_code == 200
