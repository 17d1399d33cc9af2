"""One call to the service: sent through the budget, retried as ``retry``'s policy says, judged.

A tenacity ``Retrying`` per call: each attempt (``_attempt``) passes the shared budget, sends one
exchange (``transport``), and returns the success, raises a typed error, or raises ``_Retry`` with
the wait the policy gives. Tenacity stops when that wait passes the call's deadline (or the sync's,
once an outage or a run of 429s started) and sleeps through the budget, so a cancel ends the wait.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import tenacity

from resources.api import endpoints as ep
from resources.api.budget import BudgetExhausted, Permit, RequestBudget
from resources.api.errors import (
    ERROR_BY_STATUS,
    NotFoundError,
    QuotaExceededError,
    RateLimitError,
    ResponseShapeError,
    ServerError,
    ServiceUnreachableError,
    TransportError,
    VisibilityAPIError,
)
from resources.api.headers import parse_retry_after
from resources.api.redaction import API_LOGGER, MAX_TEXT_CHARS, excerpt, sanitize
from resources.api.retry import Action, classify, full_jitter, may_retry_after_ambiguous_failure
from resources.api.stats import MAX_CODE_CHARS, Counters
from resources.api.transport import Answer, Failure, Transport

logger = logging.getLogger(API_LOGGER)

#: Failures after which the request may or may not have been applied.
_AMBIGUOUS_CAUSES = frozenset({"timeout", "connection_dropped", "invalid_body", "server_error"})
#: How long a sync retries a service that has answered none of its requests (connection refused, no
#: such host): a wrong URL or a service not started fails within seconds, not after the retry deadline
#: (that deadline is for a service lost after it answered).
NEVER_REACHED_SECONDS = 5.0
#: A backoff that would pass the deadline is cut to end at it (one last try) if this much time is left.
_LAST_TRY_MIN_SECONDS = 0.05


@dataclass
class _Call:
    """One ``request``, shared by its attempts: what it sends and what the earlier attempts left."""

    endpoint: ep.Endpoint
    path: str
    params: Mapping[str, Any] | None
    body: Any
    started: float  # the budget's clock
    deadline: float  # the call's own retry deadline, on the budget's clock
    last: Failure | None = None
    ambiguous: bool = False  # an earlier attempt ended without telling whether it was applied
    not_json: int = 0  # successes that were not JSON: one is retried, the second is a shape error
    attempts: int = 0
    left: float = 0.0  # seconds to the deadline when the last wait was judged


class _Retry(Exception):
    """An attempt the policy retries, and the seconds to wait before the next one."""

    def __init__(self, failure: Failure, delay: float) -> None:
        super().__init__(failure.cause)
        self.failure = failure
        self.delay = delay


def _retry_of(state: tenacity.RetryCallState) -> _Retry:
    assert state.outcome is not None
    retry = state.outcome.exception()
    assert isinstance(retry, _Retry)
    return retry


class Calls:
    """The retry loop of one client: its budget, counters and transport, and the quota stop."""

    def __init__(
        self,
        transport: Transport,
        budget: RequestBudget,
        counters: Counters,
        *,
        origin: str,
        retry_deadline_seconds: float,
        backoff_base_seconds: float,
        backoff_max_seconds: float,
    ) -> None:
        self._transport = transport
        self._budget = budget
        self._counters = counters
        self._origin = origin
        self._retry_deadline = retry_deadline_seconds
        self._backoff_base = backoff_base_seconds
        self._backoff_max = backoff_max_seconds
        #: Set by the first quota_exceeded: from then on nothing is sent (the quota will not recover
        #: within a sync, and every further request would be refused too).
        self._quota_error: QuotaExceededError | None = None

    def _scrub(self, text: str) -> str:
        """Texts quoted from the service go into exceptions: never let them carry the key."""
        return sanitize(text, MAX_TEXT_CHARS)

    def _backoff(self, attempt: int) -> float:
        return full_jitter(attempt, base_seconds=self._backoff_base, cap_seconds=self._backoff_max)

    def _sync_deadline(self) -> float:
        """Seconds the sync retries an unreachable service: the budget's, else this client's; at most
        :data:`NEVER_REACHED_SECONDS` while the service has answered nothing."""
        shared = self._budget.retry_deadline_seconds
        deadline = shared if shared is not None else self._retry_deadline
        return deadline if self._budget.answered else min(deadline, NEVER_REACHED_SECONDS)

    def _call_deadline(self, call_deadline: float) -> float:
        """The call's own deadline, or the sync's if an outage (or a run of 429s) started earlier
        (whichever is first)."""
        outage, refused = self._budget.outage, self._budget.refused_since
        starts = [t for t in (outage.since if outage is not None else None, refused) if t is not None]
        if not starts:
            return call_deadline
        return min(call_deadline, min(starts) + self._sync_deadline())

    def _fail_fast(self, endpoint: ep.Endpoint) -> None:
        """Once the sync's outage (or its run of 429s) outlived the retry deadline, fail at once
        instead of retrying again."""
        refused = self._budget.refused_since
        if refused is not None and self._budget.now() - refused >= self._sync_deadline():
            raise RateLimitError(
                f"not sent: the service at {self._origin} has answered every request with 429 for "
                f"{self._budget.now() - refused:.0f}s, past the {self._sync_deadline():g}s retry deadline "
                "the calls of this sync share; run again later",
                endpoint=endpoint.key,
                status=429,
            )
        outage = self._budget.outage
        if outage is None:
            return
        elapsed = self._budget.now() - outage.since
        deadline = self._sync_deadline()
        # the same rule as a call's give-up: a deadline with less than one last try left is spent
        if elapsed < deadline - _LAST_TRY_MIN_SECONDS:
            return
        raise ServiceUnreachableError(
            f"not sent: the service at {self._origin} has failed every attempt for {elapsed:.0f}s "
            f"(last: {outage.cause}), past the {deadline:g}s retry deadline the calls of this sync "
            "share; check that the service is up and reachable, then run again",
            endpoint=endpoint.key,
        )

    def request(
        self,
        endpoint: ep.Endpoint,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> tuple[dict[str, Any], str | None]:
        """Send until a success, a typed failure, or the retry deadline; return (body, request id).

        A tenacity loop: each attempt (``_attempt``) returns the success, raises a typed error, or
        raises ``_Retry`` with the wait the policy (``retry``, ``_judge``) gives (``_next_wait``);
        tenacity stops when that wait passes the deadline and sleeps through the budget, so a cancel
        ends the wait.
        """
        if self._transport.closed:
            raise VisibilityAPIError("the client is closed", endpoint=endpoint.key)
        self._budget.check_cancelled(endpoint.key)
        if self._quota_error is not None:
            raise self._quota_stop(endpoint)
        self._fail_fast(endpoint)
        started = self._budget.now()
        call = _Call(endpoint, path, params, body, started, started + self._retry_deadline)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Retry),
            wait=self._next_wait,
            stop=lambda state: state.upcoming_sleep > call.left,
            sleep=functools.partial(self._backoff_sleep, endpoint.key),
            before_sleep=self._announce_retry,
            retry_error_callback=self._gave_up,
        )
        return retrying(self._attempt, call)

    def _attempt(self, call: _Call) -> tuple[dict[str, Any], str | None]:
        """One try: (body, request id), a typed error, or ``_Retry`` (the failure and the wait)."""
        budget, endpoint = self._budget, call.endpoint
        try:
            permit = budget.acquire(endpoint.key, deadline=self._call_deadline(call.deadline))
        except BudgetExhausted as exc:
            last = call.last or Failure("rate_limited", str(exc))
            raise self._give_up(endpoint, last, call.attempts, call.started, extra=str(exc)) from None
        self._counters.wait("pacing", permit.waited_for_rate)
        self._counters.wait("concurrency", permit.waited_for_slot)
        if self._quota_error is not None:
            budget.release(permit, success=False)
            raise self._quota_stop(endpoint)
        try:
            budget.take_request(endpoint.key)
        except BaseException:
            budget.release(permit, success=False)
            raise
        self._counters.request(endpoint.key)
        success = False
        try:
            give_up_at = time.monotonic() + self._call_deadline(call.deadline) - budget.now()
            answer, failure = self._transport.exchange(
                endpoint, call.path, call.params, call.body, give_up_at
            )
            if answer is not None:
                budget.observe(permit, answer.headers)
                code = _error_code(answer.body)
                if answer.usable:
                    budget.note_reachable()
                elif answer.status < 300:
                    budget.note_unreachable(f"HTTP {answer.status} not JSON")
                else:
                    budget.note_unreachable(f"HTTP {answer.status}" + (f" {code}" if code else ""))
                self._counters.response(answer.status, code)
                try:
                    outcome = self._judge(endpoint, answer, permit, call.attempts, call.not_json)
                except NotFoundError as exc:
                    if call.ambiguous and endpoint.method == "DELETE":
                        raise NotFoundError(
                            f"{exc.detail}; an earlier attempt ended without an answer and has "
                            "probably applied this DELETE already",
                            endpoint=exc.endpoint,
                            status=exc.status,
                            code=exc.code,
                            request_id=exc.request_id,
                        ) from exc
                    raise
                if isinstance(outcome, dict):
                    success = True
                    budget.note_success()
                    return outcome, answer.request_id
                if answer.status == 429:
                    budget.note_refused()
                failure, delay = outcome
            else:
                assert failure is not None
                budget.note_unreachable(failure.cause)
                if failure.cause in _AMBIGUOUS_CAUSES and not may_retry_after_ambiguous_failure(
                    endpoint.method
                ):
                    raise self._not_repeated(endpoint, failure)
                delay = self._backoff(call.attempts)
        finally:
            budget.release(permit, success=success)
        call.last = failure
        call.ambiguous = call.ambiguous or failure.cause in _AMBIGUOUS_CAUSES
        call.not_json += failure.cause == "not_json"
        call.attempts += 1
        raise _Retry(failure, delay)

    def _next_wait(self, state: tenacity.RetryCallState) -> float:
        """The policy's wait before the next attempt; one that would pass the deadline is cut to end
        at it when the service is unreachable (one last try: retry for all of it, not less). The
        stop (tenacity's, in ``request``) gives up when the wait still passes it."""
        call: _Call = state.args[0]
        retry = _retry_of(state)
        call.left = self._call_deadline(call.deadline) - self._budget.now()
        if retry.delay > call.left and retry.failure.unreachable and call.left >= _LAST_TRY_MIN_SECONDS:
            retry.delay = call.left
        return retry.delay

    def _gave_up(self, state: tenacity.RetryCallState) -> NoReturn:
        call: _Call = state.args[0]
        assert call.last is not None
        raise self._give_up(call.endpoint, call.last, call.attempts, call.started)

    def _backoff_sleep(self, endpoint: str, seconds: float) -> None:
        """The wait before a retry: ended at once by a cancel (``SyncCancelled``)."""
        if seconds > 0:
            self._budget.sleep(seconds, endpoint=endpoint)
            self._counters.wait("backoff", seconds)

    def _announce_retry(self, state: tenacity.RetryCallState) -> None:
        """Count the retry; say what the coming backoff waits for, and which request it retries (the
        budget throttles the log lines)."""
        call: _Call = state.args[0]
        retry = _retry_of(state)
        endpoint, failure, delay = call.endpoint, retry.failure, retry.delay
        self._counters.retry(failure.cause)
        logger.debug(
            "retrying %s after %s (attempt %d) in %.2fs%s",
            endpoint.key,
            failure.cause,
            call.attempts,
            delay,
            f" [X-Request-Id {failure.request_id}]" if failure.request_id else "",
        )
        if failure.cause == "not_json":
            self._budget.announce(
                "unreachable",
                delay,
                f"retrying {endpoint.key} once at {self._origin}: {failure.detail}",
                warning=True,
            )
        elif failure.unreachable and self._budget.outage is not None:
            what = "unreachable" if failure.status is None else "failing"
            self._budget.announce(
                "unreachable",
                delay,
                f"service {what} at {self._origin} ({failure.outage_cause()}), retrying {endpoint.key} "
                f"for {max(0.0, call.left):.0f} more s",
                warning=True,
            )
        elif delay > 0:
            self._budget.announce(
                "backoff",
                delay,
                f"backoff: waiting {delay:.1f} s before retrying {endpoint.key} after {failure.cause}",
            )

    def _judge_success(
        self, endpoint: ep.Endpoint, answer: Answer, not_json: int
    ) -> dict[str, Any] | tuple[Failure, float]:
        """A 2xx: its body if it is a JSON object with ``data``; one that is not JSON is retried once."""
        if not answer.is_json_object:
            # A proxy's HTML page or a cut body: retried once (a cut may be a glitch); the second
            # is a shape error at once, so a service that answers HTML costs seconds, not deadlines.
            what = _not_json_detail(answer)
            if not_json == 0 and may_retry_after_ambiguous_failure(endpoint.method):
                return Failure("not_json", what, **_ids(answer)), self._backoff(0)
            if not may_retry_after_ambiguous_failure(endpoint.method):
                raise self._not_repeated(endpoint, Failure("invalid_body", what, **_ids(answer)))
            raise ResponseShapeError(
                f"{what}, twice in a row; a success must be a JSON object (is a proxy or a login "
                f"page in front of {self._origin}?)",
                endpoint=endpoint.key,
                status=answer.status,
                request_id=answer.request_id,
            )
        if "data" not in answer.body:
            raise ResponseShapeError(
                "the success body has no 'data' member",
                field="data",
                endpoint=endpoint.key,
                status=answer.status,
                request_id=answer.request_id,
            )
        return answer.body

    def _judge(
        self, endpoint: ep.Endpoint, answer: Answer, permit: Permit, attempt: int, not_json: int = 0
    ) -> dict[str, Any] | tuple[Failure, float]:
        """A success body, or (the failure, seconds to wait before retrying); raises typed errors."""
        code = _error_code(answer.body)
        decision = classify(answer.status, code)
        action = decision.action
        if action is Action.SUCCESS:
            return self._judge_success(endpoint, answer, not_json)
        # a failure: what it says (only now: a success never quotes the body or reads Retry-After)
        error = answer.body.get("error") if isinstance(answer.body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        message = self._scrub(message) if isinstance(message, str) else None
        failure = Failure(
            decision.cause,
            message or f"HTTP {answer.status}",
            status=answer.status,
            code=code,
            request_id=answer.request_id,
        )
        retry_after = parse_retry_after(answer.headers.get("retry-after"))
        if action is Action.QUOTA:
            quota = QuotaExceededError(
                message or "the quota is used up",
                endpoint=endpoint.key,
                status=answer.status,
                code=code,
                request_id=answer.request_id,
            )
            self._quota_error = self._quota_error or quota
            raise quota
        if action is Action.FAIL:
            error_type = ERROR_BY_STATUS.get(answer.status, VisibilityAPIError)
            raise error_type(
                message or f"the service refused the request (HTTP {answer.status})",
                endpoint=endpoint.key,
                status=answer.status,
                code=code,
                request_id=answer.request_id,
            )
        if action is Action.WAIT_GLOBAL:
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            self._budget.block(delay, reason=_block_reason(retry_after, code))
            return failure, 0.0  # the budget holds everyone back; acquire() does the waiting
        if action is Action.WAIT_ENDPOINT:
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            self._budget.block(delay, endpoint.key, reason=_block_reason(retry_after, code))
            return failure, 0.0
        if action is Action.SHED_CONCURRENCY:
            changed = self._budget.concurrency_refused(permit)
            if changed:
                logger.info(
                    "concurrency_limited: in-flight limit lowered to %.1f",
                    self._budget.snapshot().concurrency_limit,
                )
            return failure, self._backoff(0)
        # RETRY: 5xx and 408
        if answer.status == 503 or may_retry_after_ambiguous_failure(endpoint.method):
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            return failure, delay
        raise self._not_repeated(endpoint, failure)

    def _quota_stop(self, endpoint: ep.Endpoint) -> QuotaExceededError:
        first = self._quota_error
        assert first is not None
        return QuotaExceededError(
            f"not sent: the quota was already used up (first refused at {first.endpoint})",
            endpoint=endpoint.key,
            status=first.status,
            code=first.code,
            request_id=first.request_id,
        )

    def _give_up(
        self, endpoint: ep.Endpoint, last: Failure, attempts: int, started: float, extra: str = ""
    ) -> VisibilityAPIError:
        error_type: type[VisibilityAPIError]
        if last.status == 429 or last.cause.endswith("rate_limited"):
            error_type = RateLimitError
        elif last.status is not None and last.status >= 500:
            error_type = ServerError
        else:
            error_type = TransportError
        now = self._budget.now()
        outage = self._budget.outage
        if last.unreachable and outage is not None:
            # Name the service and how long it has been failing: the clock is the sync's, not the call's.
            retried = now - min(outage.since, started)
            detail = (
                f"gave up after {attempts} attempt(s): the service at {self._origin} failed every attempt "
                f"for {retried:.1f}s (retry deadline {min(self._retry_deadline, self._sync_deadline()):g}s, "
                f"counted from the first failure for every call of this sync); last failure: "
                f"{last.cause} ({last.detail})"
            )
            if not self._budget.answered:
                detail += "; it never answered: check the URL (scheme, host and port) and that it is up"
        else:
            detail = (
                f"gave up after {attempts} attempt(s) within the {self._retry_deadline:g}s retry deadline "
                f"({now - started:.1f}s); last failure at {self._origin}: {last.cause} ({last.detail})"
            )
        if extra:
            detail += f"; {extra}"
        return error_type(
            detail,
            endpoint=endpoint.key,
            status=last.status,
            code=last.code,
            request_id=last.request_id,
        )

    def _not_repeated(self, endpoint: ep.Endpoint, failure: Failure) -> VisibilityAPIError:
        error_type = ServerError if failure.status is not None and failure.status >= 500 else TransportError
        error = error_type(
            f"{failure.cause} ({failure.detail}) at {self._origin}; not retried because a "
            f"{endpoint.method} may already have been applied and the service offers no idempotency "
            "key: check the result before repeating it",
            endpoint=endpoint.key,
            status=failure.status,
            code=failure.code,
            request_id=failure.request_id,
        )
        error.may_have_applied = True
        return error

    # ------------------------------------------------------------------------------------------


def _error_code(body: Any) -> str | None:
    """The service's stable ``error.code``, when the body is the spec's error envelope."""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return sanitize(code, MAX_CODE_CHARS) if isinstance(code, str) else None


def _block_reason(retry_after: float | None, code: str | None) -> str:
    """What an announcement of a 429's wait names."""
    if retry_after is not None:
        return "Retry-After"
    return f"backoff after 429 {code or 'rate_limited'}, no Retry-After"


def _not_json_detail(answer: Answer) -> str:
    """What a success that is not a JSON object was: its content type and its first characters."""
    media = sanitize(answer.content_type or "no content type", 60)
    if isinstance(answer.body, dict) or answer.body is None:
        start = answer.raw_start.decode("utf-8", "replace").strip()
        shown = f"starting {excerpt(start, 60)}" if start else "empty"
    else:
        shown = f"a JSON {type(answer.body).__name__}"
    return f"the answer is not a JSON object ({media}, {shown})"


def _ids(answer: Answer) -> dict[str, Any]:
    return {"status": answer.status, "request_id": answer.request_id}
