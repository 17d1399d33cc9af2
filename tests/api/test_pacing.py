"""Pacing from the key's headers alone, on a fake clock (no I/O, no sleeping).

A ``RequestBudget`` on a fake clock is driven against two limiters: the sandbox's token bucket
(``sandbox.limits.Limiter``, the real one) and a fixed window (below), each answering every request
after a round trip. What the budget does is read from what the limiter saw: requests admitted, 429s,
and the time the requests took against the limiter's rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from resources.api.budget import BudgetExhausted, Permit, RequestBudget
from sandbox.limits import Limiter, LimitsConfig

ENDPOINT = "GET /v1/brands"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FixedWindow:
    """``limit`` requests per ``period`` seconds, windows aligned on multiples of ``period``; Reset
    is the seconds left in the window, rounded up, as a fixed-window service would say."""

    def __init__(self, limit: int, period: float, clock: Callable[[], float]) -> None:
        self.limit, self.period, self.clock = limit, period, clock
        self.window, self.count = -1, 0

    def admit(self) -> tuple[bool, dict[str, str]]:
        now = self.clock()
        window = math.floor(now / self.period)
        if window != self.window:
            self.window, self.count = window, 0
        admitted = self.count < self.limit
        self.count += admitted
        headers = {
            "x-ratelimit-limit": str(self.limit),
            "x-ratelimit-remaining": str(self.limit - self.count),
            "x-ratelimit-reset": str(math.ceil((window + 1) * self.period - now - 1e-9)),
        }
        return admitted, headers


class Bucket:
    """The sandbox's limiter: a token bucket of ``burst`` tokens refilled at ``rate`` a second."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.limiter = Limiter(
            LimitsConfig(rate_per_second=rate, burst=burst, max_concurrent=1000), clock=clock
        )

    def admit(self) -> tuple[bool, dict[str, str]]:
        decision = self.limiter.admit("key", "GET", "/v1/brands")
        if decision.admitted:
            self.limiter.release("key")  # in flight is the driver's business here
        return decision.admitted, {name.decode(): value.decode() for name, value in decision.headers}


@dataclass
class Outcome:
    admitted: int = 0
    refused: int = 0
    first_sent: float = math.inf
    last_sent: float = 0.0


def drive(
    budget: RequestBudget, clock: FakeClock, service: Bucket | FixedWindow, requests: int, round_trip: float
) -> Outcome:
    """Send until ``requests`` are admitted, as many in flight as the budget's slots allow, each
    answered ``round_trip`` seconds after it is sent; a 429 blocks everyone for a second (the
    sandbox's Retry-After) and the request is sent again."""
    outcome = Outcome()
    in_flight: list[tuple[float, Permit, bool, dict[str, str]]] = []
    while outcome.admitted < requests:
        wait = math.inf
        if outcome.admitted + len(in_flight) < requests:
            try:
                permit = budget.acquire(ENDPOINT, deadline=clock.now)
            except BudgetExhausted as exhausted:
                if exhausted.scope != "concurrency":
                    wait = exhausted.wait_seconds
            else:
                admitted, headers = service.admit()
                in_flight.append((clock.now + round_trip, permit, admitted, headers))
                outcome.first_sent = min(outcome.first_sent, clock.now)
                outcome.last_sent = clock.now
                continue
        if not in_flight or min(entry[0] for entry in in_flight) > clock.now + wait:
            clock.now += wait
            continue
        answer = min(in_flight, key=lambda entry: entry[0])
        in_flight.remove(answer)
        clock.now = max(clock.now, answer[0])
        _, permit, admitted, headers = answer
        budget.observe(permit, headers)
        if admitted:
            outcome.admitted += 1
        else:
            outcome.refused += 1
            budget.block(1.0)
        budget.release(permit, success=admitted)
    return outcome


@pytest.mark.parametrize(
    ("rate", "round_trip"), [(20.0, 0.005), (20.0, 0.03), (20.0, 0.2), (200.0, 0.005), (200.0, 0.03)]
)
def test_one_client_spends_a_token_bucket_at_its_rate_without_a_429(rate: float, round_trip: float) -> None:
    """Spreading the last half of the window until its Reset holds the bucket near half full while
    the client sends at its refill rate."""
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    requests = int(rate * 30)
    outcome = drive(budget, clock, Bucket(rate, int(rate), clock), requests, round_trip)
    assert budget.snapshot().remaining is not None
    assert outcome.refused == 0
    # the first burst is free, the rest comes at the bucket's rate
    assert outcome.last_sent - outcome.first_sent <= (requests - rate) / rate * 1.03


def test_waiting_for_a_full_bucket_alone_is_slower() -> None:
    """What spreading saves: the same sync with a window that does not spread its last requests
    waits for the full bucket and sends a burst."""
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    budget._global.spreads = False
    outcome = drive(budget, clock, Bucket(20.0, 20, clock), 600, 0.03)
    assert outcome.refused == 0
    assert outcome.last_sent - outcome.first_sent > (600 - 20) / 20.0 * 1.03


def drive_together(
    budgets: list[RequestBudget], clock: FakeClock, service: Bucket, requests: int, round_trip: float
) -> Outcome:
    """``drive`` for several clients of one key that do not see each other (pods, processes with no
    shared disk): each sends until ``requests`` of its own are admitted; the events of all of them
    in the order of the fake clock."""
    outcome = Outcome()
    admitted = [0] * len(budgets)
    in_flight: list[list[tuple[float, Permit, bool, dict[str, str]]]] = [[] for _ in budgets]
    while min(admitted) < requests:
        sent, next_time, who = False, math.inf, -1
        for i, budget in enumerate(budgets):
            if admitted[i] + len(in_flight[i]) < requests:
                try:
                    permit = budget.acquire(ENDPOINT, deadline=clock.now)
                except BudgetExhausted as exhausted:
                    if exhausted.scope != "concurrency" and clock.now + exhausted.wait_seconds < next_time:
                        next_time, who = clock.now + exhausted.wait_seconds, -1
                else:
                    ok, headers = service.admit()
                    in_flight[i].append((clock.now + round_trip, permit, ok, headers))
                    outcome.first_sent = min(outcome.first_sent, clock.now)
                    outcome.last_sent = clock.now
                    sent = True
                    break
            for entry in in_flight[i]:
                if entry[0] < next_time:
                    next_time, who = entry[0], i
        if sent:
            continue
        clock.now = max(clock.now, next_time)
        if who < 0:
            continue
        answer = min(in_flight[who], key=lambda entry: entry[0])
        in_flight[who].remove(answer)
        _, permit, ok, headers = answer
        budgets[who].observe(permit, headers)
        if ok:
            admitted[who] += 1
            outcome.admitted += 1
        else:
            outcome.refused += 1
            budgets[who].block(1.0)
        budgets[who].release(permit, success=ok)
    return outcome


@pytest.mark.parametrize(
    ("clients", "rate", "round_trip"),
    [(4, 20.0, 0.005), (4, 20.0, 0.03), (4, 20.0, 0.2), (2, 50.0, 0.03), (2, 50.0, 0.2), (8, 50.0, 0.03)],
)
def test_clients_of_one_key_that_share_nothing_but_its_headers_see_few_429s_at_its_rate(
    clients: int, rate: float, round_trip: float
) -> None:
    """No ledger, no shared disk: every client reads the same Remaining and Reset, spreads the
    window's last requests (``SPREAD_BELOW``) and probes a reopened one, so together they keep the
    bucket from empty and still spend its refills. The 429s are those of the first burst, before
    any client has seen an answer. (The bucket's reserve, about limit / (clients + 1), must exceed
    what the others send in one round trip: 8 clients of 50 a second at 0.2 s do not fit.)"""
    clock = FakeClock()
    budgets = [RequestBudget(8, clock=clock) for _ in range(clients)]
    requests = int(rate * 80 / clients)
    outcome = drive_together(budgets, clock, Bucket(rate, int(rate), clock), requests, round_trip)
    assert outcome.refused <= 0.03 * (outcome.admitted + outcome.refused)
    assert outcome.last_sent - outcome.first_sent <= (clients * requests - rate) / rate * 1.05


@pytest.mark.parametrize(("limit", "period"), [(20, 1.0), (50, 1.0), (200, 10.0), (1000, 60.0)])
@pytest.mark.parametrize("round_trip", [0.005, 0.03, 0.2])
def test_a_fixed_window_is_never_refused(limit: int, period: float, round_trip: float) -> None:
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    window = FixedWindow(limit, period, clock)
    outcome = drive(budget, clock, window, limit * 4, round_trip)
    assert outcome.refused == 0


def test_a_long_fixed_window_is_spent_at_once_when_it_turns() -> None:
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    window = FixedWindow(1000, 60.0, clock)
    clock.now = 1020.0  # 40 s left in the first window
    outcome = drive(budget, clock, window, 1500, 0.03)
    assert outcome.refused == 0
    # 1,000 in the first window; the other 500 once it turns at 1080, as fast as 8 requests in
    # flight go (about 2 s): half the window is spent before spreading starts
    assert outcome.last_sent < 1080.0 + 2.0 + 3.0
