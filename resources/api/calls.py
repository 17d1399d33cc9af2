"""One call to the service: sent through the budget, judged by ``retry``'s policy, retried by tenacity.

Each attempt returns the success, raises a typed error, or raises ``_Retry`` with the policy's wait;
tenacity stops when that wait passes the call's deadline and sleeps through the budget (a cancel
ends the wait).
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
#: How long a sync retries a service that has answered none of its requests: a wrong URL fails within
#: seconds (the retry deadline is for a service lost after it answered).
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


def _retry_of(state: tenacity.RetryCallState) -> tuple[_Call, _Retry]:
    assert state.outcome is not None
    retry = state.outcome.exception()
    assert isinstance(retry, _Retry)
    return state.args[0], retry


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
        #: the first quota_exceeded: from then on nothing is sent (a quota does not recover within a sync)
        self._quota_error: QuotaExceededError | None = None

    def _backoff(self, attempt: int) -> float:
        return full_jitter(attempt, base_seconds=self._backoff_base, cap_seconds=self._backoff_max)

    def _sync_deadline(self) -> float:
        """Seconds the sync retries an unreachable service: the budget's, else this client's; at most
        :data:`NEVER_REACHED_SECONDS` while the service has answered nothing."""
        shared = self._budget.retry_deadline_seconds
        deadline = shared if shared is not None else self._retry_deadline
        return deadline if self._budget.answered else min(deadline, NEVER_REACHED_SECONDS)

    def _call_deadline(self, call: _Call) -> float:
        """The call's own deadline, or the sync's if an outage (or a run of 429s) started earlier."""
        outage = self._budget.outage
        return call.deadline if outage is None else min(call.deadline, outage.since + self._sync_deadline())

    def _fail_fast(self, endpoint: ep.Endpoint) -> None:
        """Once the sync's outage (or run of 429s) outlived the retry deadline, fail at once."""
        now, deadline, outage = self._budget.now(), self._sync_deadline(), self._budget.outage
        # the same rule as a call's give-up: a deadline with less than one last try left is spent
        if outage is None or now - outage.since < deadline - _LAST_TRY_MIN_SECONDS:
            return
        advice = "check that the service is up and reachable, then run again"
        error_type: type[VisibilityAPIError] = ServiceUnreachableError
        if outage.refused:
            advice, error_type = "run again later", RateLimitError
        raise error_type(
            f"not sent: the service at {self._origin} has failed every attempt for "
            f"{now - outage.since:.0f}s (last: {outage.cause}), past the {deadline:g}s retry deadline "
            f"the calls of this sync share; {advice}",
            endpoint=endpoint.key,
            status=429 if outage.refused else None,
        )

    def request(
        self,
        endpoint: ep.Endpoint,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> tuple[dict[str, Any], str | None]:
        """Send until a success, a typed failure, or the retry deadline; return (body, request id)."""
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
        """One try through the budget: (body, request id), a typed error, or ``_Retry``."""
        try:
            permit = self._budget.acquire(call.endpoint.key, deadline=self._call_deadline(call))
        except BudgetExhausted as exc:
            raise self._give_up(
                call, call.last or Failure("rate_limited", str(exc)), extra=str(exc)
            ) from None
        self._counters.wait("pacing", permit.waited_for_rate)
        self._counters.wait("concurrency", permit.waited_for_slot)
        success = False
        try:
            if self._quota_error is not None:
                raise self._quota_stop(call.endpoint)
            self._budget.take_request(call.endpoint.key)
            self._counters.request(call.endpoint.key)
            result = self._send(call, permit)
            success = True
            return result
        finally:
            self._budget.release(permit, success=success)

    def _send(self, call: _Call, permit: Permit) -> tuple[dict[str, Any], str | None]:
        """Send one exchange and judge it; a failure to retry updates ``call`` and raises ``_Retry``."""
        budget, endpoint = self._budget, call.endpoint
        give_up_at = time.monotonic() + self._call_deadline(call) - budget.now()
        answer, failure = self._transport.exchange(endpoint, call.path, call.params, call.body, give_up_at)
        if answer is None:
            assert failure is not None
            budget.note_unreachable(failure.cause)
            if failure.cause in _AMBIGUOUS_CAUSES and not may_retry_after_ambiguous_failure(endpoint.method):
                raise self._not_repeated(endpoint, failure)
            delay = self._backoff(call.attempts)
        else:
            budget.observe(permit, answer.headers)
            code = _error_code(answer.body)
            if answer.usable and answer.status != 429:
                budget.note_reachable()
            elif answer.status < 300:
                budget.note_unreachable(f"HTTP {answer.status} not JSON")
            else:
                budget.note_unreachable(f"HTTP {answer.status}" + (f" {code}" if code else ""))
            if code is not None:
                self._counters.error_code(code)
            outcome = self._judge(call, answer, code, permit)
            if isinstance(outcome, dict):
                return outcome, answer.request_id
            failure, delay = outcome
        call.last = failure
        call.ambiguous = call.ambiguous or failure.cause in _AMBIGUOUS_CAUSES
        call.not_json += failure.cause == "not_json"
        call.attempts += 1
        raise _Retry(failure, delay)

    def _next_wait(self, state: tenacity.RetryCallState) -> float:
        """The policy's wait; one that would pass the deadline is cut to end at it when the service is
        unreachable (one last try). Tenacity's stop gives up when the wait still passes it."""
        call, retry = _retry_of(state)
        call.left = self._call_deadline(call) - self._budget.now()
        if retry.delay > call.left and retry.failure.unreachable and call.left >= _LAST_TRY_MIN_SECONDS:
            retry.delay = call.left
        return retry.delay

    def _gave_up(self, state: tenacity.RetryCallState) -> NoReturn:
        call: _Call = state.args[0]
        assert call.last is not None
        raise self._give_up(call, call.last)

    def _backoff_sleep(self, endpoint: str, seconds: float) -> None:
        """The wait before a retry: ended at once by a cancel (``SyncCancelled``)."""
        if seconds > 0:
            self._budget.sleep(seconds, endpoint=endpoint)
            self._counters.wait("backoff", seconds)

    def _announce_retry(self, state: tenacity.RetryCallState) -> None:
        """Count the retry and say what its wait waits for (the budget throttles the log lines)."""
        call, retry = _retry_of(state)
        key, failure, delay = call.endpoint.key, retry.failure, retry.delay
        self._counters.retry(failure.cause)
        request_id = f" [X-Request-Id {failure.request_id}]" if failure.request_id else ""
        logger.debug(
            "retrying %s after %s (attempt %d) in %.2fs%s",
            key,
            failure.cause,
            call.attempts,
            delay,
            request_id,
        )
        if failure.cause == "not_json":
            message = f"retrying {key} once at {self._origin}: {failure.detail}"
            self._budget.announce("unreachable", delay, message, warning=True)
        elif failure.unreachable and self._budget.outage is not None:
            what = "unreachable" if failure.status is None else "failing"
            message = (
                f"service {what} at {self._origin} ({failure.outage_cause()}), retrying {key} "
                f"for {max(0.0, call.left):.0f} more s"
            )
            self._budget.announce("unreachable", delay, message, warning=True)
        elif delay > 0:
            message = f"backoff: waiting {delay:.1f} s before retrying {key} after {failure.cause}"
            self._budget.announce("backoff", delay, message)

    def _judge_success(self, call: _Call, answer: Answer) -> dict[str, Any] | tuple[Failure, float]:
        """A 2xx: its body if it is a JSON object with ``data``. One that is not (a proxy's HTML page, a
        cut body) is retried once, then is a shape error: an HTML service costs seconds, not deadlines."""
        ids = {"endpoint": call.endpoint.key, "status": answer.status, "request_id": answer.request_id}
        if answer.is_json_object:
            if "data" not in answer.body:
                raise ResponseShapeError("the success body has no 'data' member", field="data", **ids)
            return answer.body
        what = _not_json_detail(answer)
        failure_ids = {"status": answer.status, "request_id": answer.request_id}
        if not may_retry_after_ambiguous_failure(call.endpoint.method):
            raise self._not_repeated(call.endpoint, Failure("invalid_body", what, **failure_ids))
        if call.not_json == 0:
            return Failure("not_json", what, **failure_ids), self._backoff(0)
        raise ResponseShapeError(
            f"{what}, twice in a row; a success must be a JSON object (is a proxy or a login page in "
            f"front of {self._origin}?)",
            **ids,
        )

    def _judge(
        self, call: _Call, answer: Answer, code: str | None, permit: Permit
    ) -> dict[str, Any] | tuple[Failure, float]:
        """A success's body, or (the failure, seconds to wait before retrying); raises typed errors."""
        decision = classify(answer.status, code)
        if decision.action is Action.SUCCESS:
            return self._judge_success(call, answer)
        endpoint, status = call.endpoint, answer.status
        # what the failure says (only now: a success never quotes the body or reads Retry-After)
        error = answer.body.get("error") if isinstance(answer.body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        message = sanitize(message, MAX_TEXT_CHARS) if isinstance(message, str) else None
        ids = {"endpoint": endpoint.key, "status": status, "code": code, "request_id": answer.request_id}
        if decision.action is Action.QUOTA:
            quota = QuotaExceededError(message or "the quota is used up", **ids)
            self._quota_error = self._quota_error or quota
            raise quota
        if decision.action is Action.FAIL:
            text = message or f"the service refused the request (HTTP {status})"
            if status == 404 and call.ambiguous and endpoint.method == "DELETE":
                text += "; an earlier attempt ended without an answer and has probably applied it already"
            raise ERROR_BY_STATUS.get(status, VisibilityAPIError)(text, **ids)
        failure = Failure(decision.cause, message or f"HTTP {status}", status, code, answer.request_id)
        retry_after = parse_retry_after(answer.headers.get("retry-after"))
        wait = retry_after if retry_after is not None else self._backoff(call.attempts)
        if decision.action in (Action.WAIT_GLOBAL, Action.WAIT_ENDPOINT):
            scope = endpoint.key if decision.action is Action.WAIT_ENDPOINT else None
            reason = "Retry-After" if retry_after is not None else "backoff after a 429 without Retry-After"
            self._budget.block(wait, scope, reason=reason)
            return failure, 0.0  # the budget holds back every request it concerns; acquire() waits
        if decision.action is Action.SHED_CONCURRENCY:
            if self._budget.concurrency_refused(permit):
                limit = self._budget.snapshot().concurrency_limit
                logger.info("concurrency_limited: in-flight limit lowered to %.1f", limit)
            return failure, self._backoff(0)
        # 5xx and 408: a write is repeated only after a 503 (refused before it was applied)
        if status == 503 or may_retry_after_ambiguous_failure(endpoint.method):
            return failure, wait
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

    def _give_up(self, call: _Call, last: Failure, extra: str = "") -> VisibilityAPIError:
        """The error of a call that retried until its deadline: the service, how long, the last failure."""
        error_type: type[VisibilityAPIError] = TransportError
        if last.status == 429 or last.cause.endswith("rate_limited"):
            error_type = RateLimitError
        elif last.status is not None and last.status >= 500:
            error_type = ServerError
        now, outage = self._budget.now(), self._budget.outage
        if last.unreachable and outage is not None and not outage.refused:
            # the service and how long it has been failing: the clock is the sync's, not the call's
            deadline = min(self._retry_deadline, self._sync_deadline())
            detail = (
                f"gave up after {call.attempts} attempt(s): the service at {self._origin} failed every "
                f"attempt for {now - min(outage.since, call.started):.1f}s (retry deadline {deadline:g}s, "
                f"counted from the first failure for every call of this sync); last failure: "
                f"{last.cause} ({last.detail})"
            )
            if not self._budget.answered:
                detail += "; it never answered: check the URL (scheme, host and port) and that it is up"
        else:
            detail = (
                f"gave up after {call.attempts} attempt(s) within the {self._retry_deadline:g}s retry "
                f"deadline ({now - call.started:.1f}s); last failure at {self._origin}: {last.cause} "
                f"({last.detail})"
            )
        if extra:
            detail += f"; {extra}"
        return error_type(
            detail, endpoint=call.endpoint.key, status=last.status, code=last.code, request_id=last.request_id
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


def _error_code(body: Any) -> str | None:
    """The service's stable ``error.code``, when the body is the spec's error envelope."""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return sanitize(code, MAX_CODE_CHARS) if isinstance(code, str) else None


def _not_json_detail(answer: Answer) -> str:
    """What a success that is not a JSON object was: its content type and its first characters."""
    media = sanitize(answer.content_type or "no content type", 60)
    if isinstance(answer.body, dict) or answer.body is None:
        start = answer.raw_start.decode("utf-8", "replace").strip()
        shown = f"starting {excerpt(start, 60)}" if start else "empty"
    else:
        shown = f"a JSON {type(answer.body).__name__}"
    return f"the answer is not a JSON object ({media}, {shown})"
