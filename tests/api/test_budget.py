"""Budget arithmetic (pure, on a fake clock) and the blocking budget on real threads."""

from __future__ import annotations

import threading

import httpx
import pytest

from resources.api.budget import AIMDLimit, BudgetExhausted, RateWindow, RequestBudget
from resources.api.headers import WindowHeaders


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_unknown_window_never_holds_requests_back() -> None:
    window = RateWindow()
    for _ in range(100):
        assert window.delay(0.0) == 0.0
        window.take()


def test_spent_window_waits_for_reset_then_one_request_probes_it() -> None:
    """Other clients of the key may have spent the new window: one request asks before the rest go."""
    window = RateWindow()
    window.observe(WindowHeaders(limit=3, remaining=2, reset_seconds=5.0), now=10.0)
    window.take()
    window.take()
    assert window.remaining == 0
    assert window.delay(11.0) == pytest.approx(4.0)
    assert window.delay(15.0) == 0.0
    window.take()
    assert window.delay(15.0) > 0
    window.observe(WindowHeaders(limit=3, remaining=2, reset_seconds=1.0), now=15.01)
    assert window.delay(15.01) == 0.0


def test_requests_the_answer_cannot_have_counted_are_taken_off_the_servers_remaining() -> None:
    window = RateWindow()
    window.observe(WindowHeaders(limit=10, remaining=4, reset_seconds=1.0), now=0.0, seq=1, unseen=3)
    assert window.remaining == 1


def test_refills_reported_by_a_newer_answer_are_believed() -> None:
    window = RateWindow()
    window.observe(WindowHeaders(limit=10, remaining=0, reset_seconds=1.0), now=0.0, seq=1)
    assert window.delay(0.5) > 0
    window.observe(WindowHeaders(limit=10, remaining=5, reset_seconds=1.0), now=0.5, seq=2)
    assert window.delay(0.5) == 0.0


def test_a_late_answer_to_an_older_request_is_ignored() -> None:
    window = RateWindow()
    window.observe(WindowHeaders(limit=10, remaining=3, reset_seconds=1.0), now=0.0, seq=5)
    window.observe(WindowHeaders(limit=10, remaining=6, reset_seconds=1.0), now=0.1, seq=4)
    assert window.remaining == 3


def test_requests_in_flight_at_the_reset_stand_for_its_probe() -> None:
    window = RateWindow()
    window.observe(WindowHeaders(limit=10, remaining=0, reset_seconds=1.0), now=0.0, seq=3)
    assert window.delay(1.0, unanswered_since_newest=0) == 0.0
    window = RateWindow()
    window.observe(WindowHeaders(limit=10, remaining=0, reset_seconds=1.0), now=0.0, seq=3)
    assert window.delay(1.0, unanswered_since_newest=2) > 0  # their answers will tell


def test_unseen_counts_later_requests_and_those_sent_just_before_of_the_same_endpoint() -> None:
    from resources.api.budget import REORDER_SECONDS, _unseen

    in_flight = {1: ("e", 100.0 - 50 * REORDER_SECONDS), 2: ("e", 100.0), 3: ("e", 100.0 + REORDER_SECONDS)}
    assert _unseen(in_flight, 2, 100.0) == 1  # the later one only
    assert _unseen(in_flight, 2, 100.0, "other endpoint") == 0


def test_budget_counts_requests_sent_just_before_an_answer_as_unseen() -> None:
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    probe = budget.acquire("GET /v1/brands")
    budget.observe(probe, httpx.Headers({"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "40"}))
    budget.release(probe)
    early = budget.acquire("GET /v1/brands")  # may reach the service after `answered`
    clock.now += 0.005
    answered = budget.acquire("GET /v1/brands")
    clock.now += 1.0
    late = budget.acquire("GET /v1/brands")  # surely after `answered`
    budget.observe(answered, httpx.Headers({"X-RateLimit-Remaining": "30"}))
    assert budget.snapshot().remaining == 30 - 2  # `early` and `late` taken off
    for permit in (early, answered, late):
        budget.release(permit)


def test_spent_window_without_reset_probes_after_a_pause() -> None:
    window = RateWindow()
    window.observe(WindowHeaders(limit=None, remaining=0, reset_seconds=None), now=0.0)
    assert 0 < window.delay(0.0) <= 1.0


def test_block_after_429_holds_requests_even_with_budget_left() -> None:
    window = RateWindow()
    window.observe(WindowHeaders(limit=10, remaining=9, reset_seconds=1.0), now=0.0)
    window.block(until=3.0)
    assert window.delay(1.0) == pytest.approx(2.0)
    assert window.delay(3.0) == 0.0


def test_aimd_halves_once_per_overload_and_grows_back_additively() -> None:
    limit = AIMDLimit(8)
    generation = limit.generation
    assert limit.on_refused(generation) is True
    assert limit.value == 4.0
    # Other requests of the same burst were sent before the decrease: they do not halve again.
    assert limit.on_refused(generation) is False
    assert limit.slots == 4
    for _ in range(4):
        limit.on_success(saturated=True)
    assert limit.slots == 4 and limit.value > 4.0
    for _ in range(40):
        limit.on_success(saturated=True)
    assert limit.value == 8.0  # never above the configured maximum


def test_aimd_does_not_grow_when_slots_are_not_in_use_and_never_drops_below_one() -> None:
    limit = AIMDLimit(2)
    limit.on_refused(limit.generation)
    limit.on_refused(limit.generation)
    limit.on_refused(limit.generation)
    assert limit.slots == 1
    limit.on_success(saturated=False)
    assert limit.value == 1.0


def test_budget_probes_with_one_request_until_the_first_answer() -> None:
    clock = FakeClock()
    budget = RequestBudget(4, clock=clock)
    first = budget.acquire("GET /v1/brands")
    with pytest.raises(BudgetExhausted):
        budget.acquire("GET /v1/brands", deadline=clock.now)
    budget.observe(first, httpx.Headers({"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "49"}))
    budget.release(first)
    permits = [budget.acquire("GET /v1/brands") for _ in range(4)]
    assert budget.snapshot().in_flight == 4
    for permit in permits:
        budget.release(permit)


def test_budget_refuses_to_wait_past_the_deadline_for_a_spent_window() -> None:
    clock = FakeClock()
    budget = RequestBudget(4, clock=clock)
    permit = budget.acquire("GET /v1/brands")
    budget.observe(
        permit,
        httpx.Headers({"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "30"}),
    )
    budget.release(permit)
    with pytest.raises(BudgetExhausted) as caught:
        budget.acquire("GET /v1/brands", deadline=clock.now + 10)
    assert caught.value.wait_seconds == pytest.approx(30.0)
    assert caught.value.scope == "global"


def test_endpoint_window_holds_only_its_own_endpoint() -> None:
    clock = FakeClock()
    budget = RequestBudget(4, clock=clock)
    permit = budget.acquire("POST /v1/audit-reports")
    budget.observe(
        permit,
        httpx.Headers(
            {
                "X-RateLimit-Remaining": "40",
                "X-Endpoint-Limit": "10",
                "X-Endpoint-Remaining": "0",
                "X-Endpoint-Reset": "60",
            }
        ),
    )
    budget.release(permit)
    with pytest.raises(BudgetExhausted) as caught:
        budget.acquire("POST /v1/audit-reports", deadline=clock.now + 1)
    assert "audit-reports" in caught.value.scope
    other = budget.acquire("GET /v1/brands", deadline=clock.now + 1)
    budget.release(other)


def test_budget_wakes_waiters_when_a_slot_frees_on_another_thread() -> None:
    budget = RequestBudget(1)
    first = budget.acquire("GET /v1/brands")
    budget.observe(first, httpx.Headers({}))
    acquired = threading.Event()

    def second() -> None:
        permit = budget.acquire("GET /v1/brands")
        acquired.set()
        budget.release(permit)

    thread = threading.Thread(target=second)
    thread.start()
    assert not acquired.wait(0.1)  # the only slot is taken
    budget.release(first)
    thread.join(5)
    assert acquired.is_set()


def test_the_request_allowance_is_the_floor_plus_a_multiple_of_the_planned_calls() -> None:
    from resources.api.errors import RequestBudgetExceeded

    budget = RequestBudget(2, request_floor=3, requests_per_call=4)
    budget.allow_planned_calls(2, "prompt_mentions")
    assert budget.request_allowance == 3 + 2 * 4
    for _ in range(11):
        budget.take_request("GET /v1/brands")
    with pytest.raises(RequestBudgetExceeded) as caught:
        budget.take_request("GET /v1/brands")
    assert budget.requests_taken == 11 and caught.value.requests == 11
    assert "allows (11: the floor plus 4 per planned call; prompt_mentions: 2 planned call(s))" in str(
        caught.value
    )


def test_a_budget_without_a_floor_counts_but_never_refuses() -> None:
    budget = RequestBudget(2)
    budget.allow_planned_calls(5, "answers")
    for _ in range(1000):
        budget.take_request("GET /v1/brands")
    assert budget.request_allowance is None and budget.requests_taken == 1000


def test_a_far_reset_is_cut_to_its_max_wait_then_one_request_probes_the_window() -> None:
    window = RateWindow(max_wait=30.0)
    window.observe(WindowHeaders(limit=50, remaining=0, reset_seconds=999_999_999.0), now=0.0, seq=1)
    assert window.delay(0.0) == pytest.approx(30.0)
    assert window.delay(30.0) == 0.0
    window.take()
    assert window.delay(30.0) > 0  # one probe, not the whole limit at once
    window.observe(WindowHeaders(limit=50, remaining=49, reset_seconds=1.0), now=30.1, seq=2)
    assert window.delay(30.1) == 0.0


def test_a_far_retry_after_or_reset_holds_the_budget_a_quarter_of_its_retry_deadline_at_most() -> None:
    """So a sync probes the window a few times before its deadline ends it: one answer of a service
    that says "wait for ever" does not stop the key."""
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock, retry_deadline_seconds=40.0)
    budget.block(999_999_999.0)
    with pytest.raises(BudgetExhausted) as raised:
        budget.acquire("GET /v1/brands", deadline=clock.now + 5.0)
    assert raised.value.wait_seconds == pytest.approx(10.0)
    clock.now += 10.0
    probe = budget.acquire("GET /v1/brands", deadline=clock.now + 5.0)
    far = {"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "999999999"}
    budget.observe(probe, httpx.Headers(far))
    budget.release(probe)
    with pytest.raises(BudgetExhausted) as raised:
        budget.acquire("GET /v1/brands", deadline=clock.now + 5.0)
    assert raised.value.wait_seconds == pytest.approx(10.0)
