"""Pacing by the key's refill rate, learnt from the headers, on a fake clock (no I/O, no sleeping).

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

from resources.api.budget import PACING_REFUSALS, BudgetExhausted, Permit, RateWindow, RequestBudget
from resources.api.headers import WindowHeaders
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
def test_a_token_bucket_is_learnt_and_paced_at_its_rate_without_a_429(rate: float, round_trip: float) -> None:
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    requests = int(rate * 30)
    outcome = drive(budget, clock, Bucket(rate, int(rate), clock), requests, round_trip)
    assert budget.snapshot().remaining is not None and budget._global.paced
    assert outcome.refused == 0
    # the first burst is free, the rest comes at the bucket's rate
    assert outcome.last_sent - outcome.first_sent <= (requests - rate) / rate * 1.03


def test_waiting_for_a_full_bucket_alone_is_slower() -> None:
    """What pacing and spreading save: the same sync with a window that neither learns (every
    answer tells only its own request, as a fixed window would) nor spreads its last requests waits
    for the full bucket and sends a burst."""
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    budget._global.learns = budget._global.spreads = False
    outcome = drive(budget, clock, Bucket(20.0, 20, clock), 600, 0.03)
    assert not budget._global.paced and outcome.refused == 0
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
def test_a_fixed_window_is_never_taken_for_a_bucket_nor_refused(
    limit: int, period: float, round_trip: float
) -> None:
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    window = FixedWindow(limit, period, clock)
    outcome = drive(budget, clock, window, limit * 4, round_trip)
    assert not budget._global.paced
    assert outcome.refused == 0


def answer(window: RateWindow, now: float, remaining: int, reset: float, *, limit: int = 20) -> None:
    window.observe(WindowHeaders(limit=limit, remaining=remaining, reset_seconds=reset), now)


def test_the_trial_spreads_the_remaining_evenly_and_never_more_before_the_reset() -> None:
    window = RateWindow(learns=True)
    window.spreads = False  # the trial's arithmetic alone
    answer(window, 0.0, remaining=0, reset=1.0)
    assert window.delay(0.0) == pytest.approx(1.0)  # spent, on a busy sync: the next window is a trial
    answer(window, 1.0, remaining=10, reset=2.0)
    sends = []
    now = 1.0
    while now < 3.0:
        wait = window.delay(now)
        if wait <= 0:
            window.take()
            sends.append(now)
        now += max(wait, 0.001)
    assert sends[:10] == pytest.approx([1.0 + 0.2 * k for k in range(10)], abs=0.002)
    assert len([t for t in sends if t < 3.0 - 1e-9]) == 10


def paced_window() -> RateWindow:
    """A window that has seen two refills in turn: paced at (20 - 9 - 1) / 1 = 10 a second (its
    pacing alone: it does not spread its last requests)."""
    window = RateWindow(learns=True)
    window.spreads = False
    answer(window, 0.0, remaining=9, reset=1.0)
    window.note_answer((9, 0.0, 0.01, 1), seq=2, admitted=True, reference=(9, 0.0, 0.005, 1), counted=0)
    window.note_answer((9, 0.02, 0.03, 3), seq=3, admitted=True, reference=(9, 0.01, 0.015, 2), counted=0)
    assert window.paced and window.refill_rate == pytest.approx(10.0)
    return window


def test_a_paced_window_waits_for_one_token_not_for_the_reset() -> None:
    window = paced_window()
    answer(window, 1.0, remaining=0, reset=2.0)
    assert window.delay(1.0) == pytest.approx(0.1)  # a token, at 10 a second
    assert window.delay(1.1) == 0.0
    window.take()
    assert window.delay(1.1) == pytest.approx(0.1)


def test_a_refill_seen_only_across_a_possible_reset_proves_nothing() -> None:
    window = RateWindow(learns=True)
    answer(window, 0.0, remaining=0, reset=1.0)
    # remaining rose between these answers, but more than a second apart: could be two resets
    window.note_answer((15, 1.0, 1.01, 2), seq=2, admitted=True, reference=(0, 0.0, 0.005, 1), counted=0)
    window.note_answer((15, 2.0, 2.01, 3), seq=3, admitted=True, reference=(10, 1.5, 1.6, 2), counted=0)
    # fell by exactly the admissions counted in between: what a fixed window does
    window.note_answer((10, 2.1, 2.11, 9), seq=9, admitted=True, reference=(15, 2.0, 2.01, 3), counted=4)
    # a 429 spends nothing: no refill shown
    window.note_answer((15, 2.2, 2.21, 10), seq=10, admitted=False, reference=(10, 2.1, 2.11, 9), counted=0)
    assert not window.paced


def test_a_429_while_paced_waits_for_the_reset_again_and_three_end_pacing_for_good() -> None:
    window = paced_window()
    for refusal in range(PACING_REFUSALS):
        window.refused()
        assert not window.paced and window.pacing_refusals == refusal + 1
        answer(window, 10.0 * refusal + 5.0, remaining=0, reset=1.0)
        assert window.delay(10.0 * refusal + 5.0) == pytest.approx(1.0)  # back to the whole window
        start = 10.0 * refusal + 6.0
        window.note_answer(
            (9, start, start + 0.01, 2),
            seq=2,
            admitted=True,
            reference=(9, start - 0.01, start - 0.005, 1),
            counted=0,
        )
        window.note_answer(
            (9, start + 0.02, start + 0.03, 3),
            seq=3,
            admitted=True,
            reference=(9, start + 0.01, start + 0.015, 2),
            counted=0,
        )
        assert window.paced is (refusal + 1 < PACING_REFUSALS)


def test_the_trial_of_a_long_fixed_window_takes_seconds_not_the_window() -> None:
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    window = FixedWindow(1000, 60.0, clock)
    clock.now = 1020.0  # 40 s left in the first window
    outcome = drive(budget, clock, window, 1500, 0.03)
    assert outcome.refused == 0 and not budget._global.paced
    # 1,000 in the first window; the other 500 once it turns at 1080: two seconds spread, then as
    # fast as 8 requests in flight go (about 2 s), not 500 of 1,000 spread over 60 s (30 s)
    assert outcome.last_sent < 1080.0 + 2.0 + 2.0 + 3.0
