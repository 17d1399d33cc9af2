"""The retry policy: what each answer means and how long to back off (pure; ``calls`` applies it)."""

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


#: A 429 by its ``code``; any other code (``rate_limited``, one the spec adds later) waits for everyone.
POLICY_429 = {
    "quota_exceeded": Decision(Action.QUOTA, "quota_exceeded"),
    "endpoint_rate_limited": Decision(Action.WAIT_ENDPOINT, "endpoint_rate_limited"),
    "concurrency_limited": Decision(Action.SHED_CONCURRENCY, "concurrency_limited"),
}
_RATE_LIMITED = Decision(Action.WAIT_GLOBAL, "rate_limited")
_SUCCESS = Decision(Action.SUCCESS, "ok")
_TIMEOUT = Decision(Action.RETRY, "timeout")
_SERVER_ERROR = Decision(Action.RETRY, "server_error")


def classify(status: int, code: str | None) -> Decision:
    """Decide from the status and the service's stable error ``code`` (never its message)."""
    if 200 <= status < 300:
        return _SUCCESS
    if status == 429:
        return POLICY_429.get(code or "", _RATE_LIMITED)
    if status == 408:
        return _TIMEOUT
    if status >= 500:
        return _SERVER_ERROR
    return Decision(Action.FAIL, code or f"http_{status}")


#: Methods repeated blindly after an answer that does not say whether they were applied: reads.
SAFE_TO_REPEAT_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def may_retry_after_ambiguous_failure(method: str) -> bool:
    """Whether a request whose outcome is unknown (a 500, a read timeout) may be sent again at once.

    Only reads: the spec offers no idempotency key, so a repeated POST could create a duplicate topic
    or audit, and a PATCH or DELETE is read back by its caller instead (``write_operations.py``).
    """
    return method.upper() in SAFE_TO_REPEAT_METHODS


def full_jitter(
    attempt: int, *, base_seconds: float, cap_seconds: float, rand: Callable[[], float] = random.random
) -> float:
    """Uniform in [0, min(cap, base * 2**attempt)]: the retries of many threads and clients spread
    over the whole interval instead of returning to the service in one wave."""
    return min(cap_seconds, base_seconds * (2 ** min(attempt, 30))) * rand()
