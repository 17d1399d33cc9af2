"""The one shared request budget of a client: pacing, per-endpoint windows and AIMD concurrency.

Every request of a client, on every thread, passes through one ``RequestBudget`` before it is sent
(like Airbyte CDK's ``APIBudget``). The budget paces proactively: it reads the service's
``X-RateLimit-*`` and ``X-Endpoint-*`` headers from every answer and holds requests back when a
window is spent, so that a well-behaved sync rarely sees a 429 at all. After a 429 it holds back
everyone, not just the request that was refused.

The arithmetic (``RateWindow``, ``AIMDLimit``) is pure and takes the time as an argument, so it is
tested without sleeping; ``RequestBudget`` adds the locking and the waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from resources.api.headers import (
    ENDPOINT_LIMIT_PREFIX,
    RATE_LIMIT_PREFIX,
    WindowHeaders,
    parse_window,
)

#: When a window is spent and the service gave no reset time, wait this long before trying again.
UNKNOWN_RESET_SECONDS = 1.0
#: Sleep slices while waiting, so a window that reopens early (a new answer) is noticed.
MAX_WAIT_SLICE_SECONDS = 0.25


#: Requests sent this close together may reach the service in either order (threads, connections),
#: so an answer's ``remaining`` may not yet count a request sent just *before* it.
REORDER_SECONDS = 0.02


class RateWindow:
    """The client's estimate of one rate-limit window (global, or one endpoint's).

    ``remaining`` counts down on every send, because the headers of answers lag behind the requests
    still in flight; each answer then corrects it: the service's ``remaining`` less our requests it
    cannot have counted yet. The service's figure wins over the local count because it also sees
    refills (a token bucket grows between answers) and other clients spending the same key; answers
    older than the one the estimate rests on are ignored. When it is spent, requests wait for
    ``reset_at``: the end of a fixed window, or the time a token bucket is full again (either way
    the whole ``limit`` is available then).
    """

    def __init__(self) -> None:
        self.limit: int | None = None
        self.remaining: int | None = None
        self.reset_at: float | None = None
        self.blocked_until: float = 0.0
        #: Send number and send time of the request whose answer the estimate rests on.
        self.newest_seq = 0
        self.newest_sent_at = 0.0

    def delay(self, now: float, *, unanswered_since_newest: int = 0) -> float:
        """Seconds until one more request may be sent (0 when it may go now).

        ``unanswered_since_newest`` counts requests the answer behind the estimate did not see and
        that are still unanswered: they spend budget the reopened window will not have.
        """
        if now < self.blocked_until:
            return self.blocked_until - now
        if self.reset_at is not None and now >= self.reset_at:
            self.remaining = None if self.limit is None else self.limit - unanswered_since_newest
            self.reset_at = None
        if self.remaining is None or self.remaining > 0:
            return 0.0
        if self.reset_at is None:
            # Spent, and no idea when it reopens: wait a little, then let one request probe.
            self.reset_at = now + UNKNOWN_RESET_SECONDS
        return max(0.0, self.reset_at - now)

    def take(self) -> None:
        if self.remaining is not None:
            self.remaining -= 1

    def observe(
        self, window: WindowHeaders, now: float, *, seq: int = 0, sent_at: float = 0.0, unseen: int = 0
    ) -> None:
        """Correct the estimate from the headers of the answer to request number ``seq``.

        ``unseen`` counts our unanswered requests the service may not have counted when it wrote
        ``remaining``: those sent after this one, and those sent at most ``REORDER_SECONDS`` before.
        """
        if window.limit is not None:
            self.limit = window.limit
        if seq and seq < self.newest_seq:
            return  # a late answer describes the budget before later requests were counted
        self.newest_seq, self.newest_sent_at = seq, sent_at
        if window.remaining is not None:
            self.remaining = window.remaining - unseen
        if window.reset_seconds is not None:
            self.reset_at = now + window.reset_seconds
        elif self.remaining is not None and self.remaining <= 0 and self.reset_at is None:
            self.reset_at = now + UNKNOWN_RESET_SECONDS

    def block(self, until: float) -> None:
        """Hold every request back until ``until`` (after a 429 for this window)."""
        self.blocked_until = max(self.blocked_until, until)


class AIMDLimit:
    """Requests allowed in flight: additive increase on success, multiplicative decrease on refusal.

    A burst of refusals from one overload counts once: a refusal only decreases the limit when the
    refused request was sent after the previous decrease (its ``generation`` is current).
    """

    def __init__(self, maximum: int, *, decrease_factor: float = 0.5, minimum: int = 1) -> None:
        if maximum < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.maximum = float(maximum)
        self.minimum = float(minimum)
        self.value = float(maximum)
        self.decrease_factor = decrease_factor
        self.generation = 0

    @property
    def slots(self) -> int:
        return max(int(self.minimum), int(self.value))

    def on_success(self, saturated: bool) -> None:
        """Grow by one slot per window of successes, only when the slots were actually in use."""
        if saturated:
            self.value = min(self.maximum, self.value + 1.0 / self.value)

    def on_refused(self, generation: int) -> bool:
        """Halve after a ``concurrency_limited``; return whether the limit changed."""
        if generation != self.generation:
            return False
        self.value = max(self.minimum, self.value * self.decrease_factor)
        self.generation += 1
        return True


class BudgetExhausted(Exception):
    """Waiting for the budget would pass the caller's deadline."""

    def __init__(self, wait_seconds: float, scope: str) -> None:
        self.wait_seconds = wait_seconds
        self.scope = scope
        if scope == "concurrency":
            text = "no request slot freed up before the retry deadline"
        else:
            text = f"the {scope} rate-limit window reopens in {wait_seconds:.1f}s, after the retry deadline"
        super().__init__(text)


@dataclass
class Permit:
    """One request's place in the budget; hand it back through ``release``."""

    endpoint: str
    generation: int
    seq: int
    sent_at: float
    waited_for_rate: float = 0.0
    waited_for_slot: float = 0.0
    released: bool = False


@dataclass(frozen=True)
class BudgetSnapshot:
    """What the budget believes now; for metadata and tests."""

    concurrency_limit: float
    in_flight: int
    remaining: int | None
    limit: int | None
    endpoint_remaining: dict[str, int | None]


class RequestBudget:
    """Shared by every thread of one client: blocks ``acquire`` until a request may be sent."""

    def __init__(
        self,
        max_concurrency: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._global = RateWindow()
        self._endpoints: dict[str, RateWindow] = {}
        self._aimd = AIMDLimit(max_concurrency)
        #: Requests sent and not yet answered: send number -> (endpoint, send time).
        self._in_flight: dict[int, tuple[str, float]] = {}
        self._seq = 0
        self._answered = False

    def _endpoint(self, endpoint: str) -> RateWindow:
        window = self._endpoints.get(endpoint)
        if window is None:
            window = self._endpoints[endpoint] = RateWindow()
        return window

    def _unseen_by(self, seq: int, sent_at: float, endpoint: str | None = None) -> int:
        """Unanswered requests the answer to request ``seq`` may not have counted.

        Those sent after it, and those sent at most ``REORDER_SECONDS`` before it (to ``endpoint``
        only, if given).
        """
        since = sent_at - REORDER_SECONDS
        return sum(
            1
            for other, (other_endpoint, other_sent_at) in self._in_flight.items()
            if other != seq
            and (other > seq or other_sent_at >= since)
            and (endpoint is None or other_endpoint == endpoint)
        )

    def _slots(self) -> int:
        # Until the first answer tells us the limits, one request probes alone.
        return self._aimd.slots if self._answered else 1

    def acquire(self, endpoint: str, *, deadline: float | None = None) -> Permit:
        """Block until a slot is free and both the global and the endpoint window allow a request.

        Raises ``BudgetExhausted`` instead of waiting past ``deadline`` (a ``clock()`` value).
        """
        waited_rate = 0.0
        waited_slot = 0.0
        with self._cond:
            while True:
                now = self._clock()
                if len(self._in_flight) >= self._slots():
                    wait = MAX_WAIT_SLICE_SECONDS
                    if deadline is not None and now + wait > deadline:
                        wait = max(0.0, deadline - now)
                        if wait == 0.0:
                            raise BudgetExhausted(0.0, "concurrency")
                    self._cond.wait(wait)
                    waited_slot += self._clock() - now
                    continue
                endpoint_window = self._endpoint(endpoint)
                global_delay = self._global.delay(
                    now,
                    unanswered_since_newest=self._unseen_by(
                        self._global.newest_seq, self._global.newest_sent_at
                    ),
                )
                endpoint_delay = endpoint_window.delay(
                    now,
                    unanswered_since_newest=self._unseen_by(
                        endpoint_window.newest_seq, endpoint_window.newest_sent_at, endpoint
                    ),
                )
                delay = max(global_delay, endpoint_delay)
                if delay <= 0.0:
                    self._global.take()
                    endpoint_window.take()
                    self._seq += 1
                    self._in_flight[self._seq] = (endpoint, now)
                    return Permit(
                        endpoint=endpoint,
                        generation=self._aimd.generation,
                        seq=self._seq,
                        sent_at=now,
                        waited_for_rate=waited_rate,
                        waited_for_slot=waited_slot,
                    )
                if deadline is not None and now + delay > deadline:
                    scope = "global" if global_delay >= endpoint_delay else f"endpoint {endpoint}"
                    raise BudgetExhausted(delay, scope)
                self._cond.wait(min(delay, MAX_WAIT_SLICE_SECONDS))
                waited_rate += self._clock() - now

    def observe(self, permit: Permit, headers: Mapping[str, str]) -> None:
        """Learn the windows from an answer's headers (any status, 429s included)."""
        now = self._clock()
        global_headers = parse_window(headers, RATE_LIMIT_PREFIX)
        endpoint_headers = parse_window(headers, ENDPOINT_LIMIT_PREFIX)
        with self._cond:
            self._answered = True
            if global_headers.present:
                unseen = self._unseen_by(permit.seq, permit.sent_at)
                self._global.observe(
                    global_headers, now, seq=permit.seq, sent_at=permit.sent_at, unseen=unseen
                )
            if endpoint_headers.present:
                unseen = self._unseen_by(permit.seq, permit.sent_at, permit.endpoint)
                self._endpoint(permit.endpoint).observe(
                    endpoint_headers, now, seq=permit.seq, sent_at=permit.sent_at, unseen=unseen
                )
            self._cond.notify_all()

    def release(self, permit: Permit, *, success: bool = True) -> None:
        """Give the slot back; a success may grow the concurrency limit."""
        with self._cond:
            if permit.released:
                return
            permit.released = True
            saturated = len(self._in_flight) >= self._aimd.slots
            self._in_flight.pop(permit.seq, None)
            if success:
                self._aimd.on_success(saturated)
            self._cond.notify_all()

    def concurrency_refused(self, permit: Permit) -> bool:
        """A ``concurrency_limited`` answer: halve the slots (once per overload)."""
        with self._cond:
            changed = self._aimd.on_refused(permit.generation)
            self._cond.notify_all()
            return changed

    def block(self, seconds: float, endpoint: str | None = None) -> None:
        """After a 429: hold back every request (or every request to ``endpoint``) for ``seconds``."""
        with self._cond:
            until = self._clock() + seconds
            window = self._global if endpoint is None else self._endpoint(endpoint)
            window.block(until)
            self._cond.notify_all()

    def snapshot(self) -> BudgetSnapshot:
        with self._cond:
            return BudgetSnapshot(
                concurrency_limit=self._aimd.value,
                in_flight=len(self._in_flight),
                remaining=self._global.remaining,
                limit=self._global.limit,
                endpoint_remaining={name: w.remaining for name, w in self._endpoints.items()},
            )
