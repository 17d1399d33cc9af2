"""The one request budget of a sync: every request of every client, on every thread, waits in
``RequestBudget.acquire`` until the key's window (``X-RateLimit-*``), its endpoint's window
(``X-Endpoint-*``) and the concurrency limit allow it. It also carries what a sync's clients share:
the outage clock, cancellation, the request allowance and the announcement of long waits.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from resources.api.errors import RequestBudgetExceeded, SyncCancelled
from resources.api.headers import ENDPOINT_LIMIT_PREFIX, RATE_LIMIT_PREFIX, WindowHeaders, parse_window
from resources.api.redaction import API_LOGGER

logger = logging.getLogger(API_LOGGER)

#: ``on_wait(cause, seconds, message)``: called when a wait starts. Causes: ``rate_limit``,
#: ``endpoint_rate_limit``, ``backoff`` (before a retry), ``unreachable`` (the outage clock runs).
WaitCallback = Callable[[str, float, str], None]

#: A spent window without a Reset header is probed again after this long.
UNKNOWN_RESET_SECONDS = 1.0
#: A Reset or Retry-After holds requests back for at most this share of the sync's retry deadline
#: (``MAX_WAIT_SECONDS`` without one), so one answer cannot stop a key for a whole sync.
PROBES_PER_DEADLINE = 4
MAX_WAIT_SECONDS = 300.0 / PROBES_PER_DEADLINE
#: Waits are sliced so that a cancel event set from outside is noticed.
MAX_WAIT_SLICE_SECONDS = 0.1
#: Waits this long or longer are announced; shorter ones are routine pacing.
ANNOUNCE_MIN_SECONDS = 1.0
#: At most one log line per cause this often (``on_wait`` hears of every announced wait).
ANNOUNCE_EVERY_SECONDS = 5.0
#: Below this share of its limit, the key's window spreads its remaining requests until its Reset.
SPREAD_BELOW = 0.5
#: Requests sent this close together may reach the service in either order, so an answer may not
#: count a request sent just before its own.
REORDER_SECONDS = 0.02


class RateWindow:
    """The estimate of one window (the key's, or one endpoint's); pure, the time is an argument.

    ``remaining`` counts down on every send and each answer corrects it: the service's figure (which
    also sees refills and other clients of the key) less our requests it cannot have counted yet.
    Answers to requests older than the one the estimate rests on are ignored.
    """

    def __init__(
        self,
        reset_header: str = "X-RateLimit-Reset",
        *,
        spreads: bool = False,
        max_wait: float = MAX_WAIT_SECONDS,
    ) -> None:
        self.reset_header = reset_header  # what announcements name as the cause of a wait
        self.spreads = spreads
        self.max_wait = max_wait
        self.limit: int | None = None
        self.remaining: int | None = None
        self.reset_at: float | None = None
        self.blocked_until = 0.0
        self.block_reason = "Retry-After"
        self.last_sent = 0.0
        #: send number and send time of the request whose answer the estimate rests on
        self.newest_seq = 0
        self.newest_sent_at = 0.0

    def delay(self, now: float, *, unanswered_since_newest: int = 0) -> float:
        """Seconds until one more request may go (0: now).

        ``unanswered_since_newest``: requests the newest answer did not see, still unanswered; at a
        reset they stand for the probe (their answers will tell what is left).
        """
        if now < self.blocked_until:
            return self.blocked_until - now
        if self.reset_at is not None and now >= self.reset_at:
            # one request asks what is left: other clients of the key may have spent the new window
            self.remaining = 1 - unanswered_since_newest
            self.reset_at = None
        if self.remaining is None:
            return 0.0
        if self.remaining <= 0:
            if self.reset_at is None:
                self.reset_at = now + UNKNOWN_RESET_SECONDS
            return self.reset_at - now
        if not self.spreads or not self.limit or self.reset_at is None:
            return 0.0
        if self.remaining >= self.limit * SPREAD_BELOW:
            return 0.0
        # n clients each sending remaining / reset a second hold a bucket near limit / (n + 1): never
        # empty, its refills still spent; a fixed window is spent evenly to its end
        return max(0.0, self.last_sent + (self.reset_at - self.last_sent) / self.remaining - now)

    def reason(self, now: float) -> str:
        """What holds requests back, in the words of the headers (for announcements)."""
        return self.block_reason if now < self.blocked_until else self.reset_header

    def take(self, now: float = 0.0) -> None:
        """One request sent at ``now``."""
        self.last_sent = now
        if self.remaining is not None:
            self.remaining -= 1

    def observe(
        self, window: WindowHeaders, now: float, *, seq: int = 0, sent_at: float = 0.0, unseen: int = 0
    ) -> None:
        """Correct the estimate from the answer to request number ``seq``; ``unseen`` counts our
        unanswered requests the service may not have counted yet (``_unseen``)."""
        if window.limit is not None:
            self.limit = window.limit
        if seq and seq < self.newest_seq:
            return  # a late answer describes the window before later requests were counted
        self.newest_seq, self.newest_sent_at = seq, sent_at
        if window.remaining is not None:
            self.remaining = window.remaining - unseen
        if window.reset_seconds is not None:
            self.reset_at = now + min(window.reset_seconds, self.max_wait)

    def block(self, until: float, reason: str = "Retry-After") -> None:
        """Hold every request back until ``until`` (a 429's wait; callers cut it to ``max_wait``)."""
        if until >= self.blocked_until:
            self.blocked_until, self.block_reason = until, reason


class AIMDLimit:
    """Requests allowed in flight: one more per window of successes, halved by ``concurrency_limited``.

    A burst of refusals from one overload halves once: only a request sent after the previous
    decrease (its ``generation`` is current) decreases it.
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = self.value = float(maximum)
        self.generation = 0

    @property
    def slots(self) -> int:
        return max(1, int(self.value))

    def on_success(self, saturated: bool) -> None:
        """Grow, only when the slots were all in use."""
        if saturated:
            self.value = min(self.maximum, self.value + 1.0 / self.value)

    def on_refused(self, generation: int) -> bool:
        """Halve after a ``concurrency_limited``; return whether the limit changed."""
        if generation != self.generation:
            return False
        self.value = max(1.0, self.value / 2)
        self.generation += 1
        return True


def _unseen(
    in_flight: Mapping[int, tuple[str, float]], seq: int, sent_at: float, endpoint: str | None = None
) -> int:
    """Unanswered requests (``send number -> (endpoint, send time)``) the answer to request ``seq``
    may not have counted: those sent after it or at most ``REORDER_SECONDS`` before it (of
    ``endpoint`` only, if given)."""
    since = sent_at - REORDER_SECONDS
    return sum(
        1
        for other, (other_endpoint, other_sent_at) in in_flight.items()
        if other != seq and (other > seq or other_sent_at >= since) and endpoint in (None, other_endpoint)
    )


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


@dataclass(frozen=True)
class BudgetSnapshot:
    """What the budget believes now; for metadata and tests."""

    concurrency_limit: float
    in_flight: int
    remaining: int | None
    endpoint_remaining: dict[str, int | None]


@dataclass(frozen=True)
class Outage:
    """No attempt has succeeded since ``since`` (a clock value): transport errors, 5xx, 429s; ``cause``
    is the last one's."""

    since: float
    cause: str

    @property
    def refused(self) -> bool:
        """The last failure was a 429: the service answers, but will not serve."""
        return self.cause.startswith("HTTP 429")


class RequestBudget:
    """Shared by every client of one sync: ``acquire`` blocks until a request may be sent.

    ``on_wait``: a ``WaitCallback`` told of every announced wait (settable later). ``cancel_event``:
    cancels the sync when set (``cancel()`` sets it). ``retry_deadline_seconds``: how long the sync's
    clients retry once the service is unreachable, from the outage's start (``None``: each client's
    own). ``request_floor`` and ``requests_per_call``: the sync's request allowance (``None``: none).
    The settings validate them (``settings.py``, ``config.py``).
    """

    def __init__(
        self,
        max_concurrency: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_wait: WaitCallback | None = None,
        retry_deadline_seconds: float | None = None,
        request_floor: int | None = None,
        requests_per_call: int = 1,
    ) -> None:
        self._clock = clock
        self.on_wait = on_wait
        self.cancel_event = threading.Event()
        self.retry_deadline_seconds = retry_deadline_seconds
        #: requests the sync may send (``None``: no bound): the floor, plus ``requests_per_call`` for
        #: every call a table's plan adds (``allow_planned_calls``)
        self.request_allowance = request_floor
        self.requests_per_call = requests_per_call
        self.requests_taken = 0
        self._allowance_reasons: list[str] = []
        self._cond = threading.Condition(threading.RLock())
        self._max_wait = (
            MAX_WAIT_SECONDS
            if retry_deadline_seconds is None
            else retry_deadline_seconds / PROBES_PER_DEADLINE
        )
        self._global = RateWindow("X-RateLimit-Reset", spreads=True, max_wait=self._max_wait)
        self._endpoints: dict[str, RateWindow] = {}
        self._aimd = AIMDLimit(max_concurrency)
        #: requests sent and not yet answered: send number -> (endpoint, send time)
        self._in_flight: dict[int, tuple[str, float]] = {}
        self._seq = 0
        #: whether the service has answered any request of the sync (any status)
        self.answered = False
        #: the current outage (``None`` while the service answers)
        self.outage: Outage | None = None
        self._announce_lock = threading.Lock()
        self._announced_at: dict[str, float] = {}

    def _endpoint(self, endpoint: str) -> RateWindow:
        window = self._endpoints.get(endpoint)
        if window is None:
            window = self._endpoints[endpoint] = RateWindow("X-Endpoint-Reset", max_wait=self._max_wait)
        return window

    def now(self) -> float:
        """The budget's clock (the one ``Outage.since`` and deadlines are read on)."""
        return self._clock()

    # -- cancellation ---------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def cancel(self) -> None:
        """Every wait wakes now, every call of every client raises ``SyncCancelled``.

        Safe in a signal handler: it never blocks (with the lock busy, waiters see the event within
        ``MAX_WAIT_SLICE_SECONDS``). A request on the wire ends within the client's timeout.
        """
        self.cancel_event.set()
        if self._cond.acquire(blocking=False):
            try:
                self._cond.notify_all()
            finally:
                self._cond.release()

    def check_cancelled(self, endpoint: str | None = None) -> None:
        if self.cancel_event.is_set():
            raise SyncCancelled(endpoint=endpoint)

    def sleep(self, seconds: float, *, endpoint: str | None = None) -> None:
        """Sleep ``seconds`` unless the sync is cancelled first (then raise ``SyncCancelled`` at once)."""
        if seconds > 0 and self.cancel_event.wait(seconds):
            raise SyncCancelled(endpoint=endpoint)
        self.check_cancelled(endpoint)

    # -- the request allowance: a service that never ends a walk stops the sync within minutes --

    def allow_planned_calls(self, calls: int, what: str) -> None:
        """Grow the allowance by ``requests_per_call`` for each of a plan's ``calls``."""
        with self._cond:
            if self.request_allowance is None or calls <= 0:
                return
            self.request_allowance += calls * self.requests_per_call
            if len(self._allowance_reasons) < 12:
                self._allowance_reasons.append(f"{what}: {calls} planned call(s)")

    def take_request(self, endpoint: str) -> None:
        """Count one request about to be sent; past the allowance raise ``RequestBudgetExceeded``."""
        with self._cond:
            if self.request_allowance is not None and self.requests_taken >= self.request_allowance:
                plans = "; ".join(self._allowance_reasons) or "no table planned yet"
                raise RequestBudgetExceeded(
                    f"not sent: the sync has made {self.requests_taken} requests, all its request budget "
                    f"allows ({self.request_allowance}: the floor plus {self.requests_per_call} per planned "
                    f"call; {plans}); a service that keeps inventing pages meets this bound instead of "
                    "running for hours",
                    endpoint=endpoint,
                    requests=self.requests_taken,
                )
            self.requests_taken += 1

    # -- the outage clock: one retry deadline for the whole sync -----------------------------------

    def note_unreachable(self, cause: str) -> None:
        """An attempt failed without an answer to use (or with a 429): start or continue the clock."""
        with self._cond:
            since = self.outage.since if self.outage is not None else self._clock()
            self.outage = Outage(since, cause)

    def note_reachable(self) -> None:
        """A success or a typed refusal (4xx but 429): the outage clock stops."""
        if self.outage is not None:  # unlocked read: the common case costs nothing
            with self._cond:
                self.outage = None

    def announce(self, cause: str, seconds: float, message: str, *, warning: bool = False) -> None:
        """Say what a wait waits for: a log line (throttled per cause) and the ``on_wait`` hook.
        Waits under ``ANNOUNCE_MIN_SECONDS`` are not announced, unless ``warning`` (unreachable)."""
        if seconds < ANNOUNCE_MIN_SECONDS and not warning:
            return
        now = time.monotonic()
        with self._announce_lock:
            last = self._announced_at.get(cause)
            log_it = last is None or now - last >= ANNOUNCE_EVERY_SECONDS
            if log_it:
                self._announced_at[cause] = now
        if log_it:
            logger.log(logging.WARNING if warning else logging.INFO, "%s", message)
        callback = self.on_wait
        if callback is not None:
            try:
                callback(cause, seconds, message)
            except Exception:  # a broken status line must not break the sync
                logger.debug("on_wait callback failed", exc_info=True)

    # -- the budget -----------------------------------------------------------------------------

    def acquire(self, endpoint: str, *, deadline: float = math.inf) -> Permit:
        """Block until a slot is free and both windows allow a request; return its ``Permit``.

        Raises ``BudgetExhausted`` rather than wait past ``deadline`` (a ``clock()`` value), and
        ``SyncCancelled`` once the sync is cancelled. A window's wait of ``ANNOUNCE_MIN_SECONDS`` or
        more is announced once per call.
        """
        waited_rate = waited_slot = 0.0
        announced = False
        while True:
            with self._cond:
                self.check_cancelled(endpoint)
                now = self._clock()
                # until the first answer tells the limits, one request probes alone
                if len(self._in_flight) >= (self._aimd.slots if self.answered else 1):
                    wait = min(MAX_WAIT_SLICE_SECONDS, deadline - now)
                    if wait <= 0.0:
                        raise BudgetExhausted(0.0, "concurrency")
                    self._cond.wait(wait)
                    waited_slot += self._clock() - now
                    continue
                delay, window = self._window_delay(endpoint, now)
                if delay <= 0.0:
                    self._global.take(now)
                    self._endpoint(endpoint).take(now)
                    self._seq += 1
                    self._in_flight[self._seq] = (endpoint, now)
                    return Permit(endpoint, self._aimd.generation, self._seq, now, waited_rate, waited_slot)
                scope = "global" if window is self._global else f"endpoint {endpoint}"
                if now + delay > deadline:
                    raise BudgetExhausted(delay, scope)
                if announced or delay < ANNOUNCE_MIN_SECONDS:
                    self._cond.wait(min(delay, MAX_WAIT_SLICE_SECONDS))
                    waited_rate += self._clock() - now
                    continue
                what = "rate limit" if window is self._global else f"rate limit of {endpoint}"
                message = f"{what}: waiting {delay:.1f} s ({window.reason(now)})"
            announced = True  # outside the lock: handlers and hooks may be slow
            self.announce("rate_limit" if window is self._global else "endpoint_rate_limit", delay, message)

    def _window_delay(self, endpoint: str, now: float) -> tuple[float, RateWindow]:
        """Seconds until the key's and the endpoint's windows allow a request, and the window that
        holds it back longer."""

        def delay(window: RateWindow, of: str | None) -> float:
            unseen = _unseen(self._in_flight, window.newest_seq, window.newest_sent_at, of)
            return window.delay(now, unanswered_since_newest=unseen)

        window = self._endpoint(endpoint)
        endpoint_delay, global_delay = delay(window, endpoint), delay(self._global, None)
        return (global_delay, self._global) if global_delay >= endpoint_delay else (endpoint_delay, window)

    def observe(self, permit: Permit, headers: Mapping[str, str]) -> None:
        """Learn the windows from an answer's headers (any status, 429s included); the waiters wake
        when its permit is released."""
        now = self._clock()
        global_headers = parse_window(headers, RATE_LIMIT_PREFIX)
        endpoint_headers = parse_window(headers, ENDPOINT_LIMIT_PREFIX)
        with self._cond:
            self.answered = True
            for window_headers, of in ((global_headers, None), (endpoint_headers, permit.endpoint)):
                if window_headers.present:  # a window is made only once its headers are seen
                    window = self._global if of is None else self._endpoint(of)
                    unseen = _unseen(self._in_flight, permit.seq, permit.sent_at, of)
                    window.observe(window_headers, now, seq=permit.seq, sent_at=permit.sent_at, unseen=unseen)

    def release(self, permit: Permit, *, success: bool = True) -> None:
        """Give the slot back (once per permit); a success may grow the concurrency limit."""
        with self._cond:
            saturated = len(self._in_flight) >= self._aimd.slots
            self._in_flight.pop(permit.seq, None)
            if success:
                self._aimd.on_success(saturated)
            self._cond.notify_all()

    def concurrency_refused(self, permit: Permit) -> bool:
        """A ``concurrency_limited`` answer: halve the slots (once per overload)."""
        with self._cond:
            return self._aimd.on_refused(permit.generation)

    def block(self, seconds: float, endpoint: str | None = None, *, reason: str = "Retry-After") -> None:
        """After a 429: hold back every request (or every request to ``endpoint``) for ``seconds``
        (at most a quarter of the retry deadline); ``reason`` is what announcements name."""
        with self._cond:
            window = self._global if endpoint is None else self._endpoint(endpoint)
            window.block(self._clock() + min(seconds, self._max_wait), reason)

    def snapshot(self) -> BudgetSnapshot:
        with self._cond:
            return BudgetSnapshot(
                concurrency_limit=self._aimd.value,
                in_flight=len(self._in_flight),
                remaining=self._global.remaining,
                endpoint_remaining={name: window.remaining for name, window in self._endpoints.items()},
            )
