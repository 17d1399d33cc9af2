"""The one shared request budget of a client: pacing, per-endpoint windows and AIMD concurrency.

Every request of a client, on every thread, passes through one ``RequestBudget`` before it is sent
(like Airbyte CDK's ``APIBudget``). The budget paces proactively: it reads the service's
``X-RateLimit-*`` and ``X-Endpoint-*`` headers from every answer and holds requests back when a
window is spent, so that a well-behaved sync rarely sees a 429 at all. After a 429 it holds back
everyone, not just the request that was refused.

The arithmetic (``RateWindow``, ``AIMDLimit``) is pure and takes the time as an argument, so it is
tested without sleeping; ``RequestBudget`` adds the locking and the waiting.

The spec does not say whether the key's limit is a fixed window or a token bucket, so the global
window starts out safe on both: once spent, it waits for ``X-RateLimit-Reset``, then one request
probes it (another client of the key may have spent it). When the answers show tokens coming back
before any reset could have come (see ``RateWindow.note_answer``), it paces instead: one request
each time the estimated bucket holds a token, at a refill rate it knows a lower bound of, so the
requests of a long sync go out evenly at the key's rate instead of in bursts separated by waits for
a full bucket. A 429 while pacing ends it (the guess was wrong, or someone else spends the key):
back to waiting for the reset until refills are seen again, and for good after ``PACING_REFUSALS``
such 429s.

Clients of one key that do not see each other (runs, pods) share only its headers: below
``SPREAD_BELOW`` of its limit the global window spreads its last requests until the reset
(``RateWindow._spread_delay``), so together they keep the key's window from empty. No wait for a
Reset or Retry-After holds the sync back longer than a ``PROBES_PER_DEADLINE``-th of its retry
deadline: then one request probes the window, so one answer cannot stop a key.

A budget is also what the clients of one sync share beyond the rate limit (one budget per sync:
``VisibilityAPIResource`` hands the same one to every client it opens, during one run or, for an
instance the command line hands Dagster as is, during all the runs of its sync):

* **the outage clock**: the first transport failure or 5xx starts it, any answer below 500 stops it;
  once the outage is older than the sync's retry deadline (``retry_deadline_seconds`` of the budget,
  else of each client) every client gives up, and from then on fails at once, so a dead service costs
  a sync one deadline, not one per call;
* **cancellation**: ``cancel()`` (or setting the ``cancel_event`` given to the constructor) wakes
  every wait at once (pacing, slots, backoff, Retry-After) and makes every call raise
  ``SyncCancelled``;
* **the request allowance** (``allow_requests``, ``take_request``): how many requests the sync may
  send, grown by each table's plan (a multiple of its planned calls) on top of a floor, so a service
  that never ends a walk (new cursors, new rows on every page) stops the sync within minutes with
  ``RequestBudgetExceeded`` instead of some millions of requests later;
* **announcements**: every wait of a second or more, and every wait for an unreachable service, is
  logged on ``visibility.api`` (INFO; WARNING when unreachable; at most one line per cause every
  ``ANNOUNCE_EVERY_SECONDS``) and passed to the optional ``on_wait(cause, seconds, message)`` hook.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from resources.api.errors import RequestBudgetExceeded, SyncCancelled
from resources.api.headers import (
    ENDPOINT_LIMIT_PREFIX,
    RATE_LIMIT_PREFIX,
    WindowHeaders,
    parse_window,
)
from resources.api.redaction import API_LOGGER

logger = logging.getLogger(API_LOGGER)

#: ``on_wait(cause, seconds, message)``: called when a wait starts. Causes: ``rate_limit`` (the
#: global window, X-RateLimit-Reset or Retry-After), ``endpoint_rate_limit``, ``backoff`` (before a
#: retry), ``unreachable`` (transport failures or 5xx: the outage clock runs).
WaitCallback = Callable[[str, float, str], None]

#: When a window is spent and the service gave no reset time, wait this long before trying again.
UNKNOWN_RESET_SECONDS = 1.0
#: A window's Reset or a Retry-After holds requests back for at most this share of the sync's retry
#: deadline (``MAX_WAIT_SECONDS`` without one): a longer one is not believed, and one request probes
#: the window then, a few times before the deadline ends the sync.
PROBES_PER_DEADLINE = 4
MAX_WAIT_SECONDS = 300.0 / PROBES_PER_DEADLINE
#: Sleep slices while waiting, so a window that reopens early (a new answer) or a cancel event set
#: from outside is noticed.
MAX_WAIT_SLICE_SECONDS = 0.1
#: Waits this long or longer are announced (log line, ``on_wait``); shorter ones are routine pacing.
ANNOUNCE_MIN_SECONDS = 1.0
#: At most one log line per cause this often (``on_wait`` is called for every announced wait).
ANNOUNCE_EVERY_SECONDS = 5.0


#: Below this share of its limit, the global window's remaining requests are spread evenly over the
#: time until its Reset (``RateWindow.spread_delay``).
SPREAD_BELOW = 0.5

#: Requests sent this close together may reach the service in either order (threads, connections),
#: so an answer's ``remaining`` may not yet count a request sent just *before* it.
REORDER_SECONDS = 0.02

#: A fixed window is taken to last a second at least (its Reset counts whole seconds), so it cannot
#: reset twice within less than this: two refills seen closer together prove refills between resets.
MIN_WINDOW_SECONDS = 1.0
#: After this many 429s while pacing, a window is never paced again (a fixed window taken for a bucket
#: costs at most this many rounds of 429s, each as many as the requests in flight).
PACING_REFUSALS = 3
#: A trial lasts this long at most (it spreads the window's share of these seconds over them: a long
#: fixed window still bursts the rest when the trial ends).
TRIAL_SECONDS = 2.0
#: A trial spreads at least this many requests (two refills in turn need two answers to compare and
#: two requests sent after them); a window with fewer left waits for the next one.
TRIAL_MIN_REQUESTS = 6
#: The answer later answers are compared with is replaced by a newer one this often (and by the first
#: answer to a request sent after a refill was seen, so that the next refill seen can pair with it).
REFERENCE_SECONDS = 0.25

#: What one answer showed of the global window, for learning its kind: (X-RateLimit-Remaining, when
#: its request was sent, when the answer came, at most how many requests had been sent by then), on
#: the window's clock (the ledger's: wall clock) and send numbers.
AnswerSeen = tuple[int, float, float, int]


class RateWindow:
    """The client's estimate of one rate-limit window (global, or one endpoint's).

    ``remaining`` counts down on every send, because the headers of answers lag behind the requests
    still in flight; each answer then corrects it: the service's ``remaining`` less our requests it
    cannot have counted yet. The service's figure wins over the local count because it also sees
    refills (a token bucket grows between answers) and other clients spending the same key; answers
    older than the one the estimate rests on are ignored. When it is spent, requests wait for
    ``reset_at``: the end of a fixed window, or the time a token bucket is full again (either way
    the whole ``limit`` is available then).

    The global window (``learns``) also learns whether it is a bucket (``note_answer``). Refills
    only show while requests go out slower than they come back, so the first time a busy sync spends
    the window (``trial_due``), the next window's ``remaining`` is spread evenly over its ``Reset``
    (at most ``TRIAL_SECONDS`` of it; ``trial``: start, end, requests allowed, requests sent): no
    more than a burst would send before the reset, so just as safe on a fixed window, and slow
    enough for a bucket to show its refills.

    Once ``paced`` (a bucket was seen), a spent window waits for one token instead:
    ``remaining`` also grows by ``refill_rate`` a second from ``credit_at`` (whole tokens; the
    fraction stays in ``credit_at``). ``refill_rate`` is the largest ``(limit - remaining - 1) /
    reset`` of any answer: a lower bound of a bucket's rate when ``Reset`` is its time to full,
    rounded up. Running a little slow costs nothing in the long run: the tokens it leaves in the
    bucket show in the next answers' ``remaining`` and are spent then.
    """

    def __init__(
        self,
        reset_header: str = "X-RateLimit-Reset",
        *,
        learns: bool = False,
        max_wait: float = MAX_WAIT_SECONDS,
    ) -> None:
        self.limit: int | None = None
        #: a Reset or block longer than this is cut to it, then one request probes the window: one
        #: answer must not stop a key for as long as a sync keeps retrying
        self.max_wait = max_wait
        #: the global window spreads its last requests (``SPREAD_BELOW``) from the last send on
        self.spreads = learns
        self.last_sent = 0.0
        #: of ``unseen``, the requests counted against ``remaining`` only to pace a bucket safely
        #: (sent before the answer, or answered since): spreading does not count them
        self.spare = 0
        self.remaining: int | None = None
        self.reset_at: float | None = None
        self.blocked_until: float = 0.0
        #: What announcements name as the cause of a wait.
        self.reset_header = reset_header
        self.reset_from_header = False
        self.block_reason = "Retry-After"
        #: Send number and send time of the request whose answer the estimate rests on.
        self.newest_seq = 0
        self.newest_sent_at = 0.0
        #: Pacing: refills a second (a lower bound), whether requests are paced by it, since when
        #: ``remaining`` earns refills, and the 429s met while pacing.
        self.refill_rate: float | None = None
        self.paced = False
        self.credit_at = 0.0
        self.pacing_refusals = 0
        #: What ``note_answer`` learns the kind from: the answer later ones are compared with, the
        #: admitted answers since to requests sent after it, the last refill seen (from, to).
        self.reference: AnswerSeen | None = None
        self.counted = 0
        self.refill_seen: tuple[float, float] | None = None
        self.learns = learns
        self.trial_due = False
        self.trial: tuple[float, float, int, int] | None = None
        self.trialled = False

    def delay(self, now: float, *, unanswered_since_newest: int = 0) -> float:
        """Seconds until one more request may be sent (0 when it may go now).

        ``unanswered_since_newest`` counts requests the answer behind the estimate did not see and
        that are still unanswered: they spend budget the reopened window will not have.
        """
        if now < self.blocked_until:
            return self.blocked_until - now
        if self.reset_at is not None and now >= self.reset_at:
            # one request asks what is left: other clients of the key may have spent the new window
            self.remaining = 1 - unanswered_since_newest
            self.reset_at = None
            self.credit_at = now
        if self.paced:
            self._earn(now)
        return max(self._window_delay(now), self._trial_delay(now), self._spread_delay(now))

    def _spread_delay(self, now: float) -> float:
        """Below ``SPREAD_BELOW`` of its limit, the time of the next of the window's remaining
        requests spread evenly until its reset.

        Every client of the key reads the same ``Remaining`` and ``Reset``, so clients that share a
        key without seeing each other (pods, processes) slow down together as the window empties:
        n clients each sending ``remaining / reset`` a second hold a bucket at about ``limit / (n +
        1)``, never at zero (no 429), while its refills are spent in full (it never fills either);
        a fixed window is spent evenly to its end.
        """
        if not self.spreads or not self.limit or self.remaining is None or self.reset_at is None:
            return 0.0
        remaining = self.remaining + self.spare
        if not 0 < remaining < self.limit * SPREAD_BELOW:
            return 0.0
        return max(0.0, self.last_sent + (self.reset_at - self.last_sent) / remaining - now)

    def _window_delay(self, now: float) -> float:
        if self.remaining is None or self.remaining > 0:
            return 0.0
        if self.paced and self.refill_rate:
            # a bucket: wait for the next token, not for the whole window
            next_token = self.credit_at + (1 - self.remaining) / self.refill_rate
            if self.reset_at is not None:
                next_token = min(next_token, self.reset_at)
            return max(0.0, next_token - now)
        if self.learns and self.trial is None and not self.trialled:
            self.trial_due = True
        if self.reset_at is None:
            # Spent, and no idea when it reopens: wait a little, then let one request probe.
            self.reset_at = now + UNKNOWN_RESET_SECONDS
            self.reset_from_header = False
        return max(0.0, self.reset_at - now)

    def _trial_delay(self, now: float) -> float:
        """While the trial runs: the time of its next evenly spread request."""
        if self.trial is None:
            return 0.0
        start, end, allowed, sent = self.trial
        if now >= end or self.paced:
            self.trial, self.trialled = None, True
            return 0.0
        if sent >= allowed:
            return end - now
        return max(0.0, start + sent * (end - start) / allowed - now)

    def _earn(self, now: float) -> None:
        """Add the whole tokens refilled since ``credit_at`` (never beyond ``limit``)."""
        if self.remaining is None or not self.refill_rate:
            return
        if self.limit is not None and self.remaining >= self.limit:
            self.credit_at = now
            return
        tokens = math.floor((now - self.credit_at) * self.refill_rate)
        if tokens >= 1:
            self.remaining += tokens
            self.credit_at += tokens / self.refill_rate
            if self.limit is not None and self.remaining >= self.limit:
                self.remaining, self.credit_at = self.limit, now

    def reason(self, now: float) -> str:
        """Why ``delay`` holds requests back, in the words of the headers (for announcements)."""
        if now < self.blocked_until:
            return self.block_reason
        if self.paced and self.refill_rate:
            return f"X-RateLimit-Remaining refills at {self.refill_rate:.3g}/s"
        return self.reset_header if self.reset_from_header else "window spent, no reset header"

    def take(self, now: float | None = None) -> None:
        """One request sent (at ``now``, when the window spreads its last ones)."""
        if now is not None:
            self.last_sent = now
        if self.remaining is not None:
            self.remaining -= 1
        if self.trial is not None:
            start, end, allowed, sent = self.trial
            self.trial = (start, end, allowed, sent + 1)

    def observe(
        self,
        window: WindowHeaders,
        now: float,
        *,
        seq: int = 0,
        sent_at: float = 0.0,
        unseen: int = 0,
        spare: int = 0,
    ) -> None:
        """Correct the estimate from the headers of the answer to request number ``seq``.

        ``unseen`` counts our unanswered requests the service may not have counted when it wrote
        ``remaining``: those sent after this one, and those sent at most ``REORDER_SECONDS`` before.
        """
        if window.limit is not None:
            if window.limit != self.limit:
                self.refill_rate = None  # a new limit: its rate is learnt afresh
            self.limit = window.limit
        if self.limit and window.remaining is not None and window.reset_seconds:
            lower_bound = (self.limit - window.remaining - 1) / window.reset_seconds
            if lower_bound > (self.refill_rate or 0.0):
                self.refill_rate = lower_bound
        if seq and seq < self.newest_seq:
            return  # a late answer describes the budget before later requests were counted
        self.newest_seq, self.newest_sent_at = seq, sent_at
        if window.remaining is not None:
            self.remaining = window.remaining - unseen
            self.spare = spare
            self.credit_at = now
        if window.reset_seconds is not None:
            self.reset_at = now + min(window.reset_seconds, self.max_wait)
            self.reset_from_header = True
            if self.trial_due and not self.paced and self.remaining is not None and window.reset_seconds > 0:
                # the remaining's share of the trial's seconds, spread over them
                seconds = min(window.reset_seconds, TRIAL_SECONDS)
                allowed = int(self.remaining * seconds / window.reset_seconds)
                if allowed >= TRIAL_MIN_REQUESTS:
                    self.trial_due = False
                    self.trial = (now, now + seconds, allowed, 0)
        elif self.remaining is not None and self.remaining <= 0 and self.reset_at is None:
            self.reset_at = now + UNKNOWN_RESET_SECONDS
            self.reset_from_header = False

    def note_answer(
        self, answer: AnswerSeen, *, seq: int, admitted: bool, reference: AnswerSeen | None, counted: int
    ) -> None:
        """Learn the window's kind from the answer to request ``seq``; ``reference`` and ``counted``
        are what ``reference`` and ``counted`` were when that request was sent.

        Every request sent after the reference's answer came and answered before this one was sent
        was counted by the service between the two: ``counted`` of them were admitted, and so was
        this one. If ``remaining`` fell by less than that, the window refilled in between: a token
        bucket does that all the time, a fixed window only when it resets. Two such refills in turn,
        within ``MIN_WINDOW_SECONDS``, cannot both be resets: the window is paced from then on
        (unless ``PACING_REFUSALS`` 429s while pacing forbade it).
        """
        if admitted and reference is not None and answer[0] > reference[0] - counted - 1:
            start, end = reference[1], answer[2]
            seen = self.refill_seen
            if seen is not None and start >= seen[1] and end - seen[0] < MIN_WINDOW_SECONDS:
                self.paced = self.pacing_refusals < PACING_REFUSALS
            elif seen is None or end - seen[0] >= MIN_WINDOW_SECONDS:
                self.refill_seen = (start, end)
        if admitted and self.reference is not None and seq > self.reference[3]:
            self.counted += 1
        seen = self.refill_seen
        if (
            self.reference is None
            or answer[2] - self.reference[2] >= REFERENCE_SECONDS
            or (seen is not None and self.reference[1] < seen[1] <= answer[1])  # a fresh start after a refill
        ):
            self.reference, self.counted = answer, 0

    def block(self, until: float, reason: str = "Retry-After") -> None:
        """Hold every request back until ``until`` (after a 429 for this window; callers cut the
        wait to ``max_wait``)."""
        if until >= self.blocked_until:
            self.blocked_until = until
            self.block_reason = reason

    def refused(self) -> None:
        """A 429 for this window: if it was paced, the guess may be wrong (or another client spends
        the key out of sight): back to waiting for the reset (and to one more trial) until two
        refills are seen again, and for good after ``PACING_REFUSALS`` of them."""
        if self.paced:
            self.paced = False
            self.pacing_refusals += 1
            self.refill_seen, self.trialled = None, False


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


def _unseen(
    in_flight: Mapping[int, tuple[object, float]],
    seq: int,
    sent_at: float,
    owner: object = None,
    *,
    paced: bool = False,
) -> int:
    """Unanswered requests (``send number -> (owner, send time)``) the answer to request ``seq`` may
    not have counted.

    Those sent after it, and those sent at most ``REORDER_SECONDS`` before it (of ``owner`` only, if
    given: an endpoint, for its own window). Paced, all of them (and the caller adds those answered
    while it was in flight): pacing spends the bucket to its last token, where one request counted
    too early is a 429, and requests sent close together reach the service in any order (a busy
    machine, a new connection); counting too many only leaves a token or two in the bucket, which
    the next answers show.
    """
    since = -math.inf if paced else sent_at - REORDER_SECONDS
    return sum(
        1
        for other, (other_owner, other_sent_at) in in_flight.items()
        if other != seq
        and (other > seq or other_sent_at >= since)
        and (owner is None or other_owner == owner)
    )


class _Place:
    """A thread's place in ``RequestBudget.acquire``: whether it leads the line of the threads
    waiting for the global window's time; leaving the ``with`` block by an exception leaves the line."""

    __slots__ = ("budget", "leading")

    def __init__(self, budget: RequestBudget) -> None:
        self.budget = budget
        self.leading = False

    def __enter__(self) -> _Place:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: object, trace: object) -> None:
        if kind is not None:
            self.budget._leave_line(self)


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
    #: the global window's reference answer and count when it was sent, and its own answer's
    #: remaining: ``RateWindow.note_answer`` learns from them once the release says it was admitted
    reference: AnswerSeen | None = None
    counted: int = 0
    #: requests answered before it was sent: those answered while
    #: it was in flight may have been counted after it, though sent before
    releases_before: int = 0
    answer_remaining: int | None = None
    answered_at: float = 0.0


@dataclass(frozen=True)
class BudgetSnapshot:
    """What the budget believes now; for metadata and tests."""

    concurrency_limit: float
    in_flight: int
    remaining: int | None
    limit: int | None
    endpoint_remaining: dict[str, int | None]


@dataclass(frozen=True)
class Outage:
    """The service has failed every attempt (transport errors, 5xx) since ``since`` (a clock value)."""

    since: float
    cause: str


class RequestBudget:
    """Shared by every client of one sync: blocks ``acquire`` until a request may be sent.

    ``on_wait``: optional ``WaitCallback`` told about every announced wait (a CLI status line);
    settable later as the ``on_wait`` attribute. ``cancel_event``: an event that cancels the sync when
    set (``cancel()`` sets it too); a private one when not given. ``retry_deadline_seconds``: how long
    the sync's clients keep retrying once the service is unreachable, counted from the outage's start
    (``None``: each client's own ``retry_deadline_seconds``); a client's own, shorter deadline still
    bounds each of its calls (a sensor tick's).
    """

    def __init__(
        self,
        max_concurrency: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_wait: WaitCallback | None = None,
        cancel_event: threading.Event | None = None,
        retry_deadline_seconds: float | None = None,
        request_floor: int | None = None,
        requests_per_call: int = 1,
    ) -> None:
        if retry_deadline_seconds is not None and not retry_deadline_seconds > 0:
            raise ValueError("retry_deadline_seconds must be positive")
        if request_floor is not None and request_floor < 1:
            raise ValueError("request_floor must be at least 1")
        if requests_per_call < 1:
            raise ValueError("requests_per_call must be at least 1")
        #: Requests the sync may send (None: no bound): ``request_floor`` (listings, discovery), then
        #: ``requests_per_call`` for every call a table's plan adds (``allow_planned_calls``).
        self._allowance = request_floor
        self.requests_per_call = requests_per_call
        self._requests_taken = 0
        self._allowance_reasons: list[str] = []
        self._clock = clock
        self.retry_deadline_seconds = retry_deadline_seconds
        lock = threading.RLock()
        self._cond = threading.Condition(lock)
        #: Waiters for the global window's time form a line: one of them (the leader) waits on
        #: ``_cond`` for the time or a change of the window, the others on ``_line`` until the
        #: leader leaves (a wake of every thread on every answer cost a sync's CPU, issue 21).
        self._line = threading.Condition(lock)
        self._time_leader = False
        #: Threads waiting on ``_cond`` for a slot, or for an endpoint's window (``observe`` and
        #: ``release`` wake them).
        self._slot_waiters = 0
        self._endpoint_waiters = 0
        #: no window or Retry-After holds the sync back for more than a share of its retry deadline
        deadline = retry_deadline_seconds
        self._max_wait = MAX_WAIT_SECONDS if deadline is None else deadline / PROBES_PER_DEADLINE
        self._global = RateWindow("X-RateLimit-Reset", learns=True, max_wait=self._max_wait)
        self._endpoints: dict[str, RateWindow] = {}
        self._aimd = AIMDLimit(max_concurrency)
        #: Requests sent and not yet answered: send number -> (endpoint, send time).
        self._in_flight: dict[int, tuple[str, float]] = {}
        #: Requests answered (or given up) so far.
        self._releases = 0
        self._seq = 0
        self._answered = False
        self.on_wait: WaitCallback | None = on_wait
        self._cancel = cancel_event if cancel_event is not None else threading.Event()
        self._outage: Outage | None = None
        self._refused_since: float | None = None
        self._announce_lock = threading.Lock()
        self._announced_at: dict[str, float] = {}

    def _endpoint(self, endpoint: str) -> RateWindow:
        window = self._endpoints.get(endpoint)
        if window is None:
            window = self._endpoints[endpoint] = RateWindow("X-Endpoint-Reset", max_wait=self._max_wait)
        return window

    # -- cancellation ---------------------------------------------------------------------------

    @property
    def cancel_event(self) -> threading.Event:
        """The event that cancels the sync (set it from a signal handler, or call ``cancel()``)."""
        return self._cancel

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Cancel the sync: every wait wakes now, every call of every client raises ``SyncCancelled``.

        Thread-safe, idempotent and safe in a signal handler (it never blocks: if the budget's lock is
        busy, the waiters see the event within ``MAX_WAIT_SLICE_SECONDS``). A request already on the
        wire is not cut: it ends within the client's ``timeout_seconds`` and its caller then stops.
        """
        self._cancel.set()
        if self._cond.acquire(blocking=False):
            try:
                self._wake_all()
            finally:
                self._cond.release()

    def check_cancelled(self, endpoint: str | None = None) -> None:
        """Raise ``SyncCancelled`` when the sync was cancelled."""
        if self._cancel.is_set():
            raise SyncCancelled(endpoint=endpoint)

    def sleep(self, seconds: float, *, endpoint: str | None = None) -> None:
        """Sleep ``seconds`` unless the sync is cancelled first (then raise ``SyncCancelled`` at once)."""
        if seconds > 0 and self._cancel.wait(seconds):
            raise SyncCancelled(endpoint=endpoint)
        self.check_cancelled(endpoint)

    # -- the request allowance ------------------------------------------------------------------

    def allow_planned_calls(self, calls: int, what: str) -> None:
        """Grow the sync's allowance by ``requests_per_call`` for each of a plan's ``calls`` (further
        pages and retries included); no-op when the budget has no allowance."""
        with self._cond:
            if self._allowance is None or calls <= 0:
                return
            self._allowance += calls * self.requests_per_call
            if len(self._allowance_reasons) < 12:
                self._allowance_reasons.append(f"{what}: {calls} planned call(s)")

    @property
    def requests_taken(self) -> int:
        return self._requests_taken

    @property
    def request_allowance(self) -> int | None:
        return self._allowance

    def take_request(self, endpoint: str) -> None:
        """Count one request about to be sent; raise ``RequestBudgetExceeded`` once the sync's
        allowance is spent (every later call of the sync fails the same way, without sending)."""
        with self._cond:
            if self._allowance is not None and self._requests_taken >= self._allowance:
                plans = "; ".join(self._allowance_reasons) or "no table planned yet"
                raise RequestBudgetExceeded(
                    f"not sent: the sync has made {self._requests_taken} requests, all its request budget "
                    f"allows ({self._allowance}: the floor plus {self.requests_per_call} per planned call; "
                    f"{plans}); a service that keeps inventing pages meets this bound instead of "
                    "running for hours",
                    endpoint=endpoint,
                    requests=self._requests_taken,
                )
            self._requests_taken += 1

    # -- the outage clock -----------------------------------------------------------------------

    def note_unreachable(self, cause: str) -> Outage:
        """An attempt failed without a usable answer (transport failure, 5xx): start or continue
        the outage clock; return the outage (its start is shared by every client of the budget)."""
        with self._cond:
            since = self._outage.since if self._outage is not None else self._clock()
            self._outage = Outage(since, cause)
            return self._outage

    def note_reachable(self) -> None:
        """An answer below 500 arrived: the service is reachable, the outage clock stops."""
        if self._outage is not None:  # unlocked read: the common case costs nothing
            with self._cond:
                self._outage = None

    def note_refused(self) -> None:
        """A 429 that asks to wait: start the refusal clock (shared by every client) unless it runs."""
        if self._refused_since is None:
            with self._cond:
                if self._refused_since is None:
                    self._refused_since = self._clock()

    def note_success(self) -> None:
        """A success: the service takes requests again, the refusal clock stops."""
        if self._refused_since is not None:  # unlocked read: the common case costs nothing
            with self._cond:
                self._refused_since = None

    @property
    def answered(self) -> bool:
        """Whether the service has answered any request of this sync (any status)."""
        return self._answered

    @property
    def refused_since(self) -> float | None:
        """Since when every answer has been a 429 (``None`` once a request succeeds): with the outage
        clock, what keeps a sync within one retry deadline however many calls it makes."""
        return self._refused_since

    @property
    def outage(self) -> Outage | None:
        """The current outage (``None`` while the service answers)."""
        return self._outage

    def now(self) -> float:
        """The budget's clock (the one ``Outage.since`` and deadlines are read on)."""
        return self._clock()

    # -- announcements --------------------------------------------------------------------------

    def announce(self, cause: str, seconds: float, message: str, *, warning: bool = False) -> None:
        """Say what a wait waits for: a log line (throttled per cause) and the ``on_wait`` hook.

        Waits shorter than ``ANNOUNCE_MIN_SECONDS`` are not announced, unless ``warning`` (the service
        is unreachable: every such wait matters).
        """
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

    def _slots(self) -> int:
        # Until the first answer tells us the limits, one request probes alone.
        return self._aimd.slots if self._answered else 1

    def acquire(self, endpoint: str, *, deadline: float | None = None) -> Permit:
        """Block until a slot is free and both the global and the endpoint window allow a request.

        Raises ``BudgetExhausted`` instead of waiting past ``deadline`` (a ``clock()`` value), and
        ``SyncCancelled`` as soon as the sync is cancelled. A wait for a rate-limit window of
        ``ANNOUNCE_MIN_SECONDS`` or more is announced once per call. Threads waiting for the global
        window's time wait in line (``_wait_for_time``).
        """
        waited_rate = 0.0
        waited_slot = 0.0
        announced = False
        announcement: tuple[str, float, str] | None = None
        place = _Place(self)
        while True:
            if announcement is not None:  # outside the lock: handlers and hooks may be slow
                self.announce(*announcement)
                announcement = None
            with self._cond, place:  # a thread that fails leaves the line
                if self._cancel.is_set():
                    raise SyncCancelled(endpoint=endpoint)
                now = self._clock()
                if len(self._in_flight) >= self._slots():
                    wait = MAX_WAIT_SLICE_SECONDS
                    if deadline is not None and now + wait > deadline:
                        wait = max(0.0, deadline - now)
                        if wait == 0.0:
                            raise BudgetExhausted(0.0, "concurrency")
                    self._leave_line(place)
                    self._slot_waiters += 1
                    try:
                        self._cond.wait(wait)
                    finally:
                        self._slot_waiters -= 1
                    waited_slot += self._clock() - now
                    continue
                endpoint_window = self._endpoint(endpoint)
                endpoint_delay = endpoint_window.delay(
                    now,
                    unanswered_since_newest=_unseen(
                        self._in_flight, endpoint_window.newest_seq, endpoint_window.newest_sent_at, endpoint
                    ),
                )
                global_delay = self._global.delay(
                    now,
                    unanswered_since_newest=_unseen(
                        self._in_flight, self._global.newest_seq, self._global.newest_sent_at
                    ),
                )
                delay = max(global_delay, endpoint_delay)
                if delay <= 0.0:
                    self._global.take(now)
                    endpoint_window.take(now)
                    self._seq += 1
                    self._in_flight[self._seq] = (endpoint, now)
                    self._leave_line(place, sent=True)
                    return Permit(
                        endpoint=endpoint,
                        generation=self._aimd.generation,
                        seq=self._seq,
                        sent_at=now,
                        waited_for_rate=waited_rate,
                        waited_for_slot=waited_slot,
                        reference=self._global.reference,
                        counted=self._global.counted,
                        releases_before=self._releases,
                    )
                if deadline is not None and now + delay > deadline:
                    scope = "global" if global_delay >= endpoint_delay else f"endpoint {endpoint}"
                    raise BudgetExhausted(delay, scope)
                if not announced and delay >= ANNOUNCE_MIN_SECONDS:
                    announced = True
                    if global_delay >= endpoint_delay:
                        reason = self._global.reason(now)
                        announcement = ("rate_limit", delay, f"rate limit: waiting {delay:.1f} s ({reason})")
                    else:
                        reason = endpoint_window.reason(now)
                        announcement = (
                            "endpoint_rate_limit",
                            delay,
                            f"rate limit of {endpoint}: waiting {delay:.1f} s ({reason})",
                        )
                    continue
                if global_delay >= endpoint_delay:
                    self._wait_for_time(min(delay, MAX_WAIT_SLICE_SECONDS), place)
                else:
                    self._leave_line(place)
                    self._endpoint_waiters += 1
                    try:
                        self._cond.wait(min(delay, MAX_WAIT_SLICE_SECONDS))
                    finally:
                        self._endpoint_waiters -= 1
                waited_rate += self._clock() - now

    def _wait_for_time(self, timeout: float, place: _Place) -> None:
        """Wait (the lock held) for the global window: the leader of the line, or the first to come
        when there is none, waits ``timeout`` on ``_cond`` (answers, releases and blocks wake it);
        the others wait on ``_line`` until the leader leaves.

        Only the leader wakes when the time comes or the window changes; the line's waits are still
        bounded by ``MAX_WAIT_SLICE_SECONDS``, so a cancel that could not take the lock is noticed.
        """
        if place.leading or not self._time_leader:
            self._time_leader = place.leading = True
            self._cond.wait(timeout)
        else:
            self._line.wait(MAX_WAIT_SLICE_SECONDS)

    def _leave_line(self, place: _Place, *, sent: bool = False) -> None:
        """A thread stops waiting for the time (it sends, fails, or waits for something else): if
        it led the line, or it ``sent`` while nobody leads it, the next in line takes a look (the
        window may allow it too, and someone must watch the time)."""
        if place.leading:
            self._time_leader = place.leading = False
            self._line.notify()
        elif sent and not self._time_leader:
            self._line.notify()

    def _wake_all(self) -> None:
        """Wake every waiter (the lock held): a cancel, a block, a new concurrency limit."""
        self._cond.notify_all()
        self._line.notify_all()

    def observe(self, permit: Permit, headers: Mapping[str, str]) -> None:
        """Learn the windows from an answer's headers (any status, 429s included)."""
        now = self._clock()
        global_headers = parse_window(headers, RATE_LIMIT_PREFIX)
        endpoint_headers = parse_window(headers, ENDPOINT_LIMIT_PREFIX)
        with self._cond:
            # who may send sooner now: anyone, after the first answer (it sets the slots); those
            # waiting for a window this answer corrects
            wake = not self._answered
            self._answered = True
            if global_headers.present:
                wake = True
                unseen = _unseen(self._in_flight, permit.seq, permit.sent_at)
                extra = 0
                if self._global.paced:
                    extra = _unseen(self._in_flight, permit.seq, permit.sent_at, paced=True) - unseen
                    extra += self._releases - permit.releases_before
                self._global.observe(
                    global_headers,
                    now,
                    seq=permit.seq,
                    sent_at=permit.sent_at,
                    unseen=unseen + extra,
                    spare=extra,
                )
                permit.answer_remaining, permit.answered_at = global_headers.remaining, now
            if endpoint_headers.present:
                unseen = _unseen(self._in_flight, permit.seq, permit.sent_at, permit.endpoint)
                self._endpoint(permit.endpoint).observe(
                    endpoint_headers, now, seq=permit.seq, sent_at=permit.sent_at, unseen=unseen
                )
                wake = wake or self._endpoint_waiters > 0
            if wake:
                self._cond.notify_all()

    def release(self, permit: Permit, *, success: bool = True) -> None:
        """Give the slot back; a success may grow the concurrency limit."""
        with self._cond:
            if permit.released:
                return
            permit.released = True
            saturated = len(self._in_flight) >= self._aimd.slots
            self._in_flight.pop(permit.seq, None)
            self._releases += 1
            if permit.answer_remaining is not None:
                answered_at = permit.answered_at
                sent_then = self._seq - sum(1 for _, sent in self._in_flight.values() if sent > answered_at)
                self._global.note_answer(
                    (permit.answer_remaining, permit.sent_at, answered_at, sent_then),
                    seq=permit.seq,
                    admitted=success,
                    reference=permit.reference,
                    counted=permit.counted,
                )
            if success:
                self._aimd.on_success(saturated)
            self._cond.notify_all()
            if not self._time_leader:
                self._line.notify()

    def concurrency_refused(self, permit: Permit) -> bool:
        """A ``concurrency_limited`` answer: halve the slots (once per overload)."""
        with self._cond:
            changed = self._aimd.on_refused(permit.generation)
            self._cond.notify_all()
            return changed

    def block(self, seconds: float, endpoint: str | None = None, *, reason: str = "Retry-After") -> None:
        """After a 429: hold back every request (or every request to ``endpoint``) for ``seconds``;
        ``reason`` is what announcements of the wait name (``Retry-After``, a backoff)."""
        seconds = min(seconds, self._max_wait)
        with self._cond:
            until = self._clock() + seconds
            window = self._global if endpoint is None else self._endpoint(endpoint)
            window.block(until, reason)
            if endpoint is None:
                window.refused()
            self._wake_all()

    def snapshot(self) -> BudgetSnapshot:
        with self._cond:
            window = self._global
            return BudgetSnapshot(
                concurrency_limit=self._aimd.value,
                in_flight=len(self._in_flight),
                remaining=window.remaining,
                limit=window.limit,
                endpoint_remaining={name: w.remaining for name, w in self._endpoints.items()},
            )
