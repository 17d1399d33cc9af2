"""Pacing by the key's refill rate, learnt from the headers, on a fake clock (no I/O, no sleeping).

A ``RequestBudget`` on a fake clock is driven against two limiters: the sandbox's token bucket
(``sandbox.limits.Limiter``, the real one) and a fixed window (below), each answering every request
after a round trip. Whether the budget paces or waits is read from what it does: requests sent,
429s met, and the time the requests took against the limiter's rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from resources.api.budget import BudgetExhausted, RateWindow, RequestBudget
from resources.api.headers import WindowHeaders
from sandbox.limits import LimitsConfig, Limiter

ENDPOINT = "GET /v1/brands"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FixedWindow:
    """``limit`` requests per ``period`` seconds, windows aligned on multiples of ``period``; Reset
    is the seconds left in the window, rounded up (as a real fixed-window service would say)."""

    def __init__(self, limit: int, period: float, clock: Callable[[], float]) -> None:
        self.limit, self.period, self.clock = limit, period, clock
        self.window, self.count = -1, 0

    def admit(self, key: str, method: str, path: str) -> tuple[bool, dict[str, str]]:
        now = self.clock()
        window = math.floor(now / self.period)
        if window != self.window:
            self.window, self.count = window, 0
        admitted = self.count < self.limit
        self.count += admitted
        reset = math.ceil((window + 1) * self.period - now - 1e-9)
        headers = {
            "x-ratelimit-limit": str(self.limit),
            "x-ratelimit-remaining": str(self.limit - self.count),
            "x-ratelimit-reset": str(reset),
        }
        return admitted, headers


class Bucket:
    """The sandbox's limiter: a token bucket of ``burst`` tokens refilled at ``rate`` a second."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        config = LimitsConfig(rate_per_second=rate, burst=burst, max_concurrent=1000)
        self.limiter = Limiter(config, clock=clock)

    def admit(self, key: str, method: str, path: str) -> tuple[bool, dict[str, str]]:
        decision = self.limiter.admit(key, method, path)
        if decision.admitted:
            self.limiter.release(key)  # the answer's round trip is the driver's; concurrency is not tested
        return decision.admitted, {name.decode(): value.decode() for name, value in decision.headers}


@dataclass
class Outcome:
    admitted: int = 0
    refused: int = 0
    first_sent: float = 0.0
    last_sent: float = 0.0
    sends: list[float] = field(default_factory=list)


def drive(
    budget: RequestBudget,
    clock: FakeClock,
    service: Bucket | FixedWindow,
    requests: int,
    round_trip: float,
    *,
    pause_every: int = 0,
) -> Outcome:
    """Send ``requests`` admitted requests as fast as the budget allows (as many in flight as its
    slots), each answered ``round_trip`` seconds after it is sent; a 429 blocks for the second the
    sandbox's Retry-After would say and is sent again. ``pause_every``: after that many sends,
    wait for every answer before the next (a sync's listings, one page after another)."""
    outcome = Outcome()
    in_flight: list[tuple[float, object, bool, dict[str, str]]] = []
    sent = 0
    while outcome.admitted < requests or in_flight:
        wait = math.inf
        if sent - outcome.refused < requests and not (pause_every and sent % pause_every == 0 and in_flight):
            try:
                permit = budget.acquire(ENDPOINT, deadline=clock.now)
            except BudgetExhausted as exhausted:
                if exhausted.scope != "concurrency":
                    wait = exhausted.wait_seconds
            else:
                admitted, headers = service.admit("key", "GET", "/v1/brands")
                in_flight.append((clock.now + round_trip, permit, admitted, headers))
                outcome.sends.append(clock.now)
                sent += 1
                continue
        answer_at = min((entry[0] for entry in in_flight), default=math.inf)
        if answer_at <= clock.now + wait:
            clock.now = max(clock.now, answer_at)
            entry = min(in_flight, key=lambda e: e[0])
            in_flight.remove(entry)
            _, permit, admitted, headers = entry
            budget.observe(permit, headers)  # type: ignore[arg-type]
            if admitted:
                outcome.admitted += 1
            else:
                outcome.refused += 1
                budget.block(1.0)
            budget.release(permit, success=admitted)  # type: ignore[arg-type]
        else:
            clock.now += wait
    outcome.first_sent, outcome.last_sent = outcome.sends[0], outcome.sends[-1]
    return outcome


def test_a_token_bucket_is_learnt_and_paced_at_its_rate_without_a_429() -> None:
    clock = FakeClock()
    budget = RequestBudget(8, clock=clock)
    bucket = Bucket(rate=20.0, burst=20, clock=clock)
    drive(budget, clock, bucket, 12, 0.03, pause_every=1)  # listings: one after another
    assert budget._global.paced
    outcome = drive(budget, clock, bucket, 1000, 0.03)
    took = outcome.last_sent - outcome.first_sent
    print(took, outcome.refused, budget._global.refill_rate)
    assert outcome.refused == 0
    assert took <= (1000 - 20) / 20.0 * 1.01
