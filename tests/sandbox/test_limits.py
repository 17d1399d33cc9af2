"""The sandbox's four limits: each binds, answers 429 with its own code and a Retry-After, and every
``/v1`` response tells the caller its budget.

The rules are proven over real HTTP against a running sandbox; the arithmetic of the token bucket
and the windows (refill, reset, Retry-After values) is proven on the ``Limiter`` with an injected
clock, because waiting for real seconds would make the suite slow and timing-dependent.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from sandbox.limits import Limiter, LimitsConfig
from sandbox.testing import SandboxHandle, run_sandbox
from tests.fixtures_sandbox import loose_limits, test_sandbox_config
from tests.sandbox.helpers import assert_error, client, data

# -- the limiter's arithmetic, on a clock the test moves ------------------------------------------


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _headers(decision: Any) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in decision.headers}


def test_bucket_admits_burst_then_rate_limits_with_seconds_until_one_token() -> None:
    clock = ManualClock()
    limiter = Limiter(LimitsConfig(rate_per_second=0.5, burst=3), clock)
    remaining = []
    for _ in range(3):
        decision = limiter.admit("k", "GET", "/v1/brands")
        limiter.release("k")
        remaining.append(_headers(decision)["x-ratelimit-remaining"])
    refused = limiter.admit("k", "GET", "/v1/brands")
    assert remaining == ["2", "1", "0"]
    assert refused.error_code == "rate_limited"
    assert refused.retry_after == 2  # one token at 0.5/s
    assert _headers(refused)["x-ratelimit-reset"] == "6"  # three tokens to refill


def test_bucket_refills_at_the_configured_rate() -> None:
    clock = ManualClock()
    limiter = Limiter(LimitsConfig(rate_per_second=2.0, burst=2), clock)
    for _ in range(2):
        limiter.admit("k", "GET", "/v1/brands")
        limiter.release("k")
    assert limiter.admit("k", "GET", "/v1/brands").error_code == "rate_limited"
    clock.now += 0.5  # one token back
    assert limiter.admit("k", "GET", "/v1/brands").admitted
    limiter.release("k")
    assert limiter.admit("k", "GET", "/v1/brands").error_code == "rate_limited"


def test_rejected_requests_consume_nothing() -> None:
    clock = ManualClock()
    limiter = Limiter(LimitsConfig(rate_per_second=1.0, burst=1, quota=5), clock)
    limiter.admit("k", "GET", "/v1/brands")
    limiter.release("k")
    for _ in range(10):
        assert limiter.admit("k", "GET", "/v1/brands").error_code == "rate_limited"
    clock.now += 1.0
    assert limiter.admit("k", "GET", "/v1/brands").admitted  # quota counted 2, not 12


def test_endpoint_window_reopens_after_window_seconds() -> None:
    clock = ManualClock()
    limiter = Limiter(LimitsConfig(endpoint_limit=2, window_seconds=60), clock)
    for _ in range(2):
        assert limiter.admit("k", "POST", "/v1/audit-reports").admitted
        limiter.release("k")
    clock.now += 15
    refused = limiter.admit("k", "POST", "/v1/audit-reports")
    assert refused.error_code == "endpoint_rate_limited"
    assert refused.retry_after == 45
    assert _headers(refused)["x-endpoint-reset"] == "45"
    clock.now += 45
    assert limiter.admit("k", "POST", "/v1/audit-reports").admitted


def test_quota_period_restarts_and_retry_after_names_its_end() -> None:
    clock = ManualClock()
    limiter = Limiter(LimitsConfig(quota=2, quota_period_seconds=3600), clock)
    for _ in range(2):
        limiter.admit("k", "GET", "/v1/brands")
        limiter.release("k")
    clock.now += 600
    refused = limiter.admit("k", "GET", "/v1/brands")
    assert (refused.error_code, refused.retry_after) == ("quota_exceeded", 3000)
    clock.now += 3000
    assert limiter.admit("k", "GET", "/v1/brands").admitted


def test_concurrency_counts_requests_until_released() -> None:
    limiter = Limiter(LimitsConfig(max_concurrent=2), ManualClock())
    assert limiter.admit("k", "GET", "/v1/brands").admitted
    assert limiter.admit("k", "GET", "/v1/brands").admitted
    refused = limiter.admit("k", "GET", "/v1/brands")
    assert (refused.error_code, refused.retry_after) == ("concurrency_limited", 1)
    limiter.release("k")
    assert limiter.admit("k", "GET", "/v1/brands").admitted


def test_spending_templates_match_concrete_paths_only_for_their_method() -> None:
    limiter = Limiter(LimitsConfig(spending_endpoints=("POST /v1/brands/{id}/topics",)), ManualClock())
    assert limiter.admit("k", "POST", "/v1/brands/abc/topics/").headers[-1][0] == b"x-endpoint-reset"
    assert b"x-endpoint-limit" not in dict(limiter.admit("k", "GET", "/v1/brands/abc/topics").headers)
    assert b"x-endpoint-limit" not in dict(limiter.admit("k", "POST", "/v1/brands/abc/topics/x").headers)


def test_config_update_is_all_or_nothing_and_restarts_counters() -> None:
    config = LimitsConfig(rate_per_second=1.0, burst=1)
    limiter = Limiter(config, ManualClock())
    limiter.admit("k", "GET", "/v1/brands")
    limiter.release("k")
    with pytest.raises(ValueError, match="burst"):
        config.update(rate_per_second=5.0, burst=0)
    assert (config.rate_per_second, config.burst) == (1.0, 1)
    with pytest.raises(ValueError, match="unknown"):
        config.update(bursts=3)
    assert limiter.admit("k", "GET", "/v1/brands").error_code == "rate_limited"
    config.update(burst=1)  # even an equal value restarts counters: tests rely on a clean slate
    assert limiter.admit("k", "GET", "/v1/brands").admitted


# -- the limits over HTTP, against a running sandbox --------------------------------------------------

RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")
ENDPOINT_HEADERS = ("x-endpoint-limit", "x-endpoint-remaining", "x-endpoint-reset")


@pytest.fixture(scope="module")
def limited() -> Iterator[SandboxHandle]:
    """One sandbox for this module; each test sets its limits at runtime (which restarts counters)."""
    with run_sandbox(test_sandbox_config()) as handle:
        yield handle


@pytest.fixture(scope="module")
def brand_id(limited: SandboxHandle) -> str:
    """Made by the first test on this worker that asks for it, whatever limits the tests before it
    left (a spent burst of one request at 0.01/s answered this listing 429): loose limits first."""
    set_limits(limited)
    with client(limited) as http:
        return data(http.get("/v1/brands"))[0]["id"]


def set_limits(handle: SandboxHandle, **changes: Any) -> None:
    """Loose limits except ``changes``, applied through ``POST /_sandbox/config``."""
    handle.configure(limits={**loose_limits().to_dict(), **changes})


def audit(http: httpx.Client, brand_id: str) -> httpx.Response:
    return http.post("/v1/audit-reports", json={"url": "https://example.com/page", "brand_id": brand_id})


def assert_429(response: httpx.Response, code: str) -> int:
    """The limit's own code in the error envelope, with a Retry-After in whole seconds; returns it."""
    assert_error(response, 429, code)
    retry_after = response.headers.get("retry-after", "")
    assert retry_after.isdigit() and int(retry_after) >= 1, retry_after
    return int(retry_after)


def test_every_v1_response_carries_rate_limit_headers(limited: SandboxHandle, brand_id: str) -> None:
    set_limits(limited)
    with client(limited) as http, client(limited, role="") as anonymous:
        responses = {
            200: http.get("/v1/brands"),
            202: audit(http, brand_id),
            400: http.get("/v1/brands", params={"limit": "0"}),
            401: anonymous.get("/v1/brands"),
            404: http.get(f"/v1/brands/{uuid.uuid4()}"),
            405: http.put("/v1/brands"),
        }
    for status, response in responses.items():
        assert response.status_code == status, response.text
        for name in RATE_HEADERS:
            assert response.headers[name].isdigit(), (status, name)
        assert int(response.headers["x-ratelimit-remaining"]) <= int(response.headers["x-ratelimit-limit"])


def test_only_spending_endpoints_carry_endpoint_headers(limited: SandboxHandle, brand_id: str) -> None:
    set_limits(limited, endpoint_limit=5, window_seconds=600)
    with client(limited) as http:
        spent = audit(http, brand_id)
        reads = [
            http.get("/v1/brands"),
            http.get(f"/v1/brands/{brand_id}/generations"),
            http.get(f"/v1/brands/{brand_id}/citations/urls"),
        ]
    assert [spent.headers[name] for name in ENDPOINT_HEADERS] == ["5", "4", "600"]
    for response in reads:
        assert response.status_code == 200
        assert not any(name in response.headers for name in ENDPOINT_HEADERS)


def test_token_bucket_answers_rate_limited_once_the_burst_is_spent(limited: SandboxHandle) -> None:
    set_limits(limited, burst=3, rate_per_second=0.01)
    with client(limited) as http:
        responses = [http.get("/v1/brands") for _ in range(4)]
    assert [r.status_code for r in responses[:3]] == [200, 200, 200]
    assert [r.headers["x-ratelimit-remaining"] for r in responses] == ["2", "1", "0", "0"]
    assert assert_429(responses[3], "rate_limited") == 100  # one token at 0.01/s


def test_rate_limit_binds_per_key(limited: SandboxHandle) -> None:
    set_limits(limited, burst=1, rate_per_second=0.01)
    with client(limited) as http, client(limited, "scoped") as other:
        assert http.get("/v1/brands").status_code == 200
        assert_429(http.get("/v1/brands"), "rate_limited")
        assert other.get("/v1/brands").status_code == 200


def test_spending_endpoint_limit_answers_endpoint_rate_limited(limited: SandboxHandle, brand_id: str) -> None:
    set_limits(limited, endpoint_limit=2, window_seconds=600)
    with client(limited) as http:
        responses = [audit(http, brand_id) for _ in range(3)]
        read = http.get("/v1/brands")
    assert [r.status_code for r in responses[:2]] == [202, 202]
    assert [r.headers["x-endpoint-remaining"] for r in responses] == ["1", "0", "0"]
    assert 1 <= assert_429(responses[2], "endpoint_rate_limited") <= 600
    assert read.status_code == 200  # the other endpoints keep working


def test_concurrency_limit_answers_concurrency_limited(limited: SandboxHandle, brand_id: str) -> None:
    """Two requests are held in flight by bodies that do not finish; a third one is refused."""
    set_limits(limited, max_concurrent=2)
    release = threading.Event()
    sent = threading.Semaphore(0)

    def held_body() -> Iterator[bytes]:
        yield b'{"name": '
        sent.release()
        release.wait(timeout=30)
        yield b'"held open"}'

    def create_topic() -> httpx.Response:
        with client(limited) as http:
            return http.post(
                f"/v1/brands/{brand_id}/topics",
                content=held_body(),
                headers={"Content-Type": "application/json"},
            )

    with ThreadPoolExecutor(max_workers=2) as pool, client(limited) as http:
        held = [pool.submit(create_topic) for _ in range(2)]
        try:
            for _ in range(2):
                assert sent.acquire(timeout=10)
            # The server admits the held requests as soon as it reads their headers; poll until then.
            refused = None
            for _ in range(500):
                response = http.get("/v1/brands")
                if response.status_code == 429:
                    refused = response
                    break
                threading.Event().wait(0.01)
        finally:
            release.set()
        assert refused is not None, "the third request in flight was never refused"
        assert assert_429(refused, "concurrency_limited") == 1
        assert [future.result().status_code for future in held] == [201, 201]
        assert http.get("/v1/brands").status_code == 200  # slots are given back


def test_quota_answers_quota_exceeded_with_a_long_retry_after(limited: SandboxHandle) -> None:
    set_limits(limited, quota=3, quota_period_seconds=86_400)
    with client(limited) as http:
        statuses = [http.get("/v1/brands").status_code for _ in range(3)]
        refused = http.get("/v1/brands")
        also_refused = http.get("/v1/prompts/" + str(uuid.uuid4()) + "/mentions")
    assert statuses == [200, 200, 200]
    assert assert_429(refused, "quota_exceeded") > 86_000
    assert_429(also_refused, "quota_exceeded")  # the quota covers every endpoint


def test_limits_never_apply_outside_v1(limited: SandboxHandle) -> None:
    set_limits(limited, burst=1, rate_per_second=0.01, quota=1)
    with httpx.Client(base_url=limited.url) as http:
        responses = [http.get(path) for path in ("/_sandbox/stats", "/openapi.json") * 3]
    assert [r.status_code for r in responses] == [200] * 6
    assert not any(name in r.headers for r in responses for name in RATE_HEADERS)


def test_runtime_config_rejects_invalid_limits_and_keeps_the_old_ones(limited: SandboxHandle) -> None:
    set_limits(limited, burst=7)
    response = httpx.post(limited.url + "/_sandbox/config", json={"limits": {"burst": 0, "quota": 5}})
    assert_error(response, 400, "invalid_request")
    current = httpx.get(limited.url + "/_sandbox/config").json()["limits"]
    assert (current["burst"], current["quota"]) == (7, None)
    with client(limited) as http:
        assert http.get("/v1/brands").headers["x-ratelimit-limit"] == "7"
