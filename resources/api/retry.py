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


def classify(status: int, code: str | None) -> Decision:
    """Decide from the status and the service's stable error ``code`` (never its message)."""
    if 200 <= status < 300:
        return Decision(Action.SUCCESS, "ok")
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


#: Methods that may be repeated without changing the result a second time (RFC 9110, 9.2.2).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"})


def may_retry_after_ambiguous_failure(method: str) -> bool:
    """Whether a request whose outcome is unknown (a 500, a read timeout) may be sent again.

    A POST that reached the service may have created its record, and the spec offers no
    idempotency key, so a repeat could create a duplicate topic or audit. PATCH here renames to a
    fixed name and DELETE untracks, both of which land in the same state when repeated.
    """
    return method.upper() in IDEMPOTENT_METHODS


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
