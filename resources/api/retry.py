"""What to do with each answer (or missing answer), and how long to back off: pure decisions.

Kept apart from the client so that the policy (which 429 waits, which stops, what a POST may
retry) reads in one place and is tested without a server.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass


class Action(enum.Enum):
    SUCCESS = "success"
    FAIL = "fail"  # a typed error at once (4xx)
    QUOTA = "quota"  # quota_exceeded: stop at once, never retry
    WAIT_GLOBAL = "wait_global"  # rate_limited: everyone waits, then retry
    WAIT_ENDPOINT = "wait_endpoint"  # endpoint_rate_limited: callers of that endpoint wait
    SHED_CONCURRENCY = "shed_concurrency"  # concurrency_limited: fewer in flight, then retry
    RETRY = "retry"  # 5xx and transport faults: back off, then retry


@dataclass(frozen=True)
class Decision:
    action: Action
    #: The counter name in ``RequestStats.retries_by_cause`` (for retries) or the failure's kind.
    cause: str


#: Every success's decision (one object: ``classify`` runs for every answer).
_SUCCESS = Decision(Action.SUCCESS, "ok")


def classify(status: int, code: str | None) -> Decision:
    """Decide from the status and the service's stable error ``code`` (never its message)."""
    if 200 <= status < 300:
        return _SUCCESS
    if status == 429:
        if code == "quota_exceeded":
            return Decision(Action.QUOTA, "quota_exceeded")
        if code == "endpoint_rate_limited":
            return Decision(Action.WAIT_ENDPOINT, "endpoint_rate_limited")
        if code == "concurrency_limited":
            return Decision(Action.SHED_CONCURRENCY, "concurrency_limited")
        # rate_limited, and any 429 code the spec may add later: wait like rate_limited.
        return Decision(Action.WAIT_GLOBAL, "rate_limited")
    if status == 408:
        return Decision(Action.RETRY, "timeout")
    if status >= 500:
        return Decision(Action.RETRY, "server_error")
    return Decision(Action.FAIL, code or f"http_{status}")


#: Methods repeated blindly after an answer that does not say whether they were applied: reads.
SAFE_TO_REPEAT_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def may_retry_after_ambiguous_failure(method: str) -> bool:
    """Whether a request whose outcome is unknown (a 500, a read timeout) may be sent again at once.

    Only reads. A POST that reached the service may have created its record (the spec offers no
    idempotency key: a repeat could create a duplicate topic or audit). A PATCH or DELETE would land
    in the same state when repeated, but repeating it blindly cannot tell the user whether the first
    one was applied, and a repeated DELETE is answered 404: the caller reads the record back instead
    (``resources/api/write_operations.py``) and says which. The error raised carries ``may_have_applied``.
    """
    return method.upper() in SAFE_TO_REPEAT_METHODS


def full_jitter(
    attempt: int,
    *,
    base_seconds: float,
    cap_seconds: float,
    rand: Callable[[], float] = random.random,
) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**attempt)].

    Full jitter spreads the retries of many threads (and many clients) across the whole interval,
    so they do not return to the service in one synchronized wave.
    """
    ceiling = min(cap_seconds, base_seconds * (2 ** min(attempt, 30)))
    return ceiling * rand()
