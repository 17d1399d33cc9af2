"""The shared budget against the sandbox's real limits: quota, rate, per-endpoint and concurrency.

One sandbox serves the module; each test sets the limits it needs through ``configure`` (which also
restarts the sandbox's counters) and resets the stats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from resources.api.errors import QuotaExceededError
from sandbox.testing import SandboxHandle, run_sandbox
from tests.api.conftest import make_client, sandbox_total
from tests.fixtures_sandbox import loose_limits, test_sandbox_config


@pytest.fixture(scope="module")
def limited() -> Iterator[SandboxHandle]:
    with run_sandbox(test_sandbox_config()) as handle:
        yield handle


@pytest.fixture
def limits(limited: SandboxHandle) -> Iterator[Callable[..., SandboxHandle]]:
    """Set limits (over loose defaults) and faults for one test; restore both afterwards."""

    def apply(faults: dict[str, Any] | None = None, **changes: Any) -> SandboxHandle:
        limited.configure(limits={**loose_limits().to_dict(), **changes}, faults=faults or {})
        limited.reset_stats()
        return limited

    yield apply
    limited.configure(limits={**loose_limits().to_dict(), "quota": None}, faults={"latency_ms": 0.0})


def test_quota_exceeded_stops_at_once_after_exactly_one_request(
    limits: Callable[..., SandboxHandle], assert_no_key: Callable[..., None]
) -> None:
    handle = limits(quota=0)
    with make_client(handle) as api:
        with pytest.raises(QuotaExceededError) as caught:
            list(api.list_brands())
        with pytest.raises(QuotaExceededError, match="not sent"):  # later calls do not even try
            api.get_brand(handle.world.brands[0].id)
        assert api.stats.total_requests == 1 and api.stats.retries_by_cause == {}
    assert handle.stats() == {"GET /v1/brands": {"429": 1}}
    error = caught.value
    assert error.code == "quota_exceeded" and error.request_id and error.request_id in str(error)
    assert "quota" in str(error) and "without retrying" in str(error)
    assert_no_key(handle.keys, str(error))


def test_quota_exceeded_midway_through_concurrent_calls_stops_them_all(
    limits: Callable[..., SandboxHandle],
) -> None:
    handle = limits(quota=5)
    prompt_ids = [p.id for p in handle.world.brands[0].prompts]
    with make_client(handle, max_concurrency=4) as api, pytest.raises(QuotaExceededError):
        list(api.map_concurrent(lambda pid: list(api.list_prompt_mentions(pid, limit=5)), prompt_ids))
    served, stats = handle.stats(), api.stats
    # Five admitted; then each call already in flight meets the quota once, none is retried, and
    # the calls not yet started never send anything.
    assert sandbox_total(served, "200") == 5
    assert sandbox_total(served) == stats.total_requests <= 5 + 2 * 4
    assert stats.errors_by_code == {"quota_exceeded": sandbox_total(served, "429")}
    assert stats.retries_by_cause == {}


def test_proactive_pacing_spends_the_window_without_a_single_429(
    limits: Callable[..., SandboxHandle],
) -> None:
    handle = limits(rate_per_second=4.0, burst=3)
    brand_id = handle.world.brands[0].id
    with make_client(handle) as api:
        names = [api.get_brand(brand_id)["name"] for _ in range(7)]
        stats = api.stats
    assert len(set(names)) == 1
    assert handle.stats() == {"GET /v1/brands/{id}": {"200": 7}}
    assert stats.wait_seconds_by_cause["pacing"] > 0  # it held back instead of being refused


def test_rate_limited_is_waited_out_as_retry_after_says_and_shared_by_the_key(
    limits: Callable[..., SandboxHandle],
) -> None:
    handle = limits(rate_per_second=1.0, burst=2)
    brand_id = handle.world.brands[0].id
    with make_client(handle) as first:  # spends the bucket
        first.get_brand(brand_id)
        first.get_brand(brand_id)
    with make_client(handle) as second:  # a fresh budget that has not seen the headers yet
        assert second.get_brand(brand_id)["id"] == brand_id
        stats = second.stats
    assert stats.errors_by_code["rate_limited"] >= 1
    assert stats.retries_by_cause["rate_limited"] == stats.errors_by_code["rate_limited"]
    # The sandbox's Retry-After is a whole second at least; the client waited it out before retrying.
    assert stats.wait_seconds_by_cause["pacing"] >= 1.0 * stats.errors_by_code["rate_limited"] - 0.05
    assert handle.stats()["GET /v1/brands/{id}"] == {"200": 3, "429": stats.errors_by_code["rate_limited"]}


def test_endpoint_budget_paces_spending_calls_and_waits_out_endpoint_rate_limited(
    limits: Callable[..., SandboxHandle],
) -> None:
    handle = limits(endpoint_limit=2, window_seconds=2.0)
    brand_id = handle.world.brands[0].id
    with make_client(handle) as first, make_client(handle) as second:
        first.create_audit("https://example.com/1", brand_id)
        first.create_audit("https://example.com/2", brand_id)  # the endpoint window is now spent
        # A second client (its own budget, the same key) has not seen the window: it is refused,
        # waits out Retry-After and gets through when the window reopens.
        second.create_audit("https://example.com/3", brand_id)
        # The first client knows the window from the headers and waits instead of being refused.
        first.create_audit("https://example.com/4", brand_id)
        first_stats, second_stats = first.stats, second.stats
    assert second_stats.errors_by_code == {"endpoint_rate_limited": 1}
    assert second_stats.retries_by_cause == {"endpoint_rate_limited": 1}
    assert second_stats.wait_seconds_by_cause["pacing"] >= 1.0
    assert first_stats.errors_by_code == {}
    assert handle.stats()["POST /v1/audit-reports"] == {"202": 4, "429": 1}
    # Reads are not spending endpoints: the spent audit window never held them back.
    assert "GET /v1/brands/{id}" not in first.budget.snapshot().endpoint_remaining


def test_concurrency_limited_lowers_the_requests_in_flight_and_every_call_succeeds(
    limits: Callable[..., SandboxHandle],
) -> None:
    handle = limits(faults={"latency_ms": 60.0}, max_concurrent=2)
    prompt_ids = [p.id for p in handle.world.brands[0].prompts][:24]
    with make_client(handle, max_concurrency=8) as api:
        counts = list(
            api.map_concurrent(lambda pid: len(list(api.list_prompt_mentions(pid, limit=999))), prompt_ids)
        )
        stats = api.stats
        limit_after = api.budget.snapshot().concurrency_limit
    assert len(counts) == 24 and all(n > 0 for n in counts)
    served = handle.stats()["GET /v1/prompts/{id}/mentions"]
    assert served["200"] == 24
    assert served.get("429", 0) == stats.errors_by_code.get("concurrency_limited", 0) > 0
    assert stats.retries_by_cause["concurrency_limited"] == served["429"]
    assert limit_after < 8  # multiplicative decrease happened and stuck near the real limit
    # Far fewer refusals than requests: the limit came down instead of hammering.
    assert served["429"] < served["200"]


def test_one_answer_that_says_wait_for_ever_holds_the_key_back_only_until_a_probe(
    limits: Callable[..., SandboxHandle],
) -> None:
    """``X-RateLimit-Remaining: 0`` with ``Reset: 999999999`` on one answer, through a rewriting proxy:
    the next call waits a quarter of the sync's retry deadline (1 s of 4 s), one request probes the
    window, and the sync goes on."""
    import httpx

    from resources.api.budget import RequestBudget
    from tests.api.proxies import RewritingProxy, answer

    sandbox = limits()
    rewritten: list[str] = []

    def far_reset(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if rewritten:
            return response
        rewritten.append(str(request.url))
        return answer(response, headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "999999999"})

    budget = RequestBudget(8, retry_deadline_seconds=4.0)
    with make_client(sandbox, budget=budget, transport=RewritingProxy(far_reset)) as api:
        first = list(api.list_brands(limit=100))
        again = list(api.list_brands(limit=100))
    assert rewritten and first and again == first
    assert sandbox_total(sandbox.stats()) == 2
