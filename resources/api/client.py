"""The Dagster-free HTTP client of the visibility API (public surface; see docs/ARCHITECTURE.md).

One client per sync: a pooled ``httpx.Client``, one shared ``RequestBudget`` that every thread
passes through, typed methods for every endpoint, and counters the assets put in their metadata.
The policy pieces live in sibling modules: ``budget`` (pacing, AIMD), ``retry`` (what each answer
means), ``paging`` (cursor walks), ``endpoints`` (shapes and required fields), ``headers``.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from resources.api import endpoints as ep
from resources.api.budget import BudgetExhausted, Permit, RequestBudget
from resources.api.config import validate_api_key, validate_base_url
from resources.api.errors import (
    ERROR_BY_STATUS,
    NotFoundError,
    QuotaExceededError,
    RateLimitError,
    ResponseShapeError,
    ServerError,
    TransportError,
    VisibilityAPIError,
)
from resources.api.headers import parse_retry_after
from resources.api.paging import complete_set_fields, iterate_pages
from resources.api.redaction import install as install_log_guard
from resources.api.retry import Action, classify, full_jitter, may_retry_after_ambiguous_failure

T = TypeVar("T")
R = TypeVar("R")

Row = dict[str, Any]

logger = logging.getLogger(__name__)

#: Failures after which the request may or may not have been applied.
_AMBIGUOUS_CAUSES = frozenset({"timeout", "connection_dropped", "invalid_body", "server_error"})

#: Longest service-provided error message quoted in an exception.
_MAX_MESSAGE_CHARS = 300


@dataclass(frozen=True)
class CompleteSet:
    """A non-paging, possibly truncated answer (generations, citation URLs)."""

    rows: list[Row]
    total_count: int
    capped: bool
    total_citations: int | None = None  # citation URLs only


@dataclass
class RequestStats:
    """Counters of one client instance; assets put them in their materialization metadata."""

    requests_by_endpoint: dict[str, int] = field(default_factory=dict)  # endpoint template -> count
    responses_by_status: dict[int, int] = field(default_factory=dict)
    retries_by_cause: dict[str, int] = field(default_factory=dict)  # e.g. rate_limited, 5xx, timeout
    wait_seconds: float = 0.0
    #: ``wait_seconds`` split by why: ``pacing`` (a spent window), ``concurrency`` (no free slot),
    #: ``backoff`` (sleeping before a retry).
    wait_seconds_by_cause: dict[str, float] = field(default_factory=dict)
    #: Error answers by the service's ``code`` (``rate_limited``, ``internal_error``...).
    errors_by_code: dict[str, int] = field(default_factory=dict)

    @property
    def total_requests(self) -> int:
        return sum(self.requests_by_endpoint.values())

    @property
    def total_retries(self) -> int:
        return sum(self.retries_by_cause.values())

    def to_metadata(self) -> dict[str, Any]:
        """A JSON-ready view with string keys, for Dagster metadata."""
        return {
            "total_requests": self.total_requests,
            "requests_by_endpoint": dict(sorted(self.requests_by_endpoint.items())),
            "responses_by_status": {str(k): v for k, v in sorted(self.responses_by_status.items())},
            "retries_by_cause": dict(sorted(self.retries_by_cause.items())),
            "wait_seconds": round(self.wait_seconds, 3),
            "wait_seconds_by_cause": {k: round(v, 3) for k, v in sorted(self.wait_seconds_by_cause.items())},
            "errors_by_code": dict(sorted(self.errors_by_code.items())),
        }


class _Counters:
    """``RequestStats`` behind a lock: every thread of a client updates the same counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = RequestStats()

    def request(self, endpoint: str) -> None:
        with self._lock:
            counts = self._stats.requests_by_endpoint
            counts[endpoint] = counts.get(endpoint, 0) + 1

    def response(self, status: int, code: str | None) -> None:
        with self._lock:
            counts = self._stats.responses_by_status
            counts[status] = counts.get(status, 0) + 1
            if code is not None:
                codes = self._stats.errors_by_code
                codes[code] = codes.get(code, 0) + 1

    def retry(self, cause: str) -> None:
        with self._lock:
            counts = self._stats.retries_by_cause
            counts[cause] = counts.get(cause, 0) + 1

    def wait(self, cause: str, seconds: float) -> None:
        if seconds <= 0:
            return
        with self._lock:
            self._stats.wait_seconds += seconds
            by_cause = self._stats.wait_seconds_by_cause
            by_cause[cause] = by_cause.get(cause, 0.0) + seconds

    def snapshot(self) -> RequestStats:
        with self._lock:
            return copy.deepcopy(self._stats)


class _Secret:
    """Holds the key so that no repr, ``vars()`` dump or traceback local shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def scrub(self, text: str) -> str:
        return text.replace(self._value, "[redacted]") if self._value in text else text

    def __repr__(self) -> str:
        return "_Secret('[hidden]')"

    __str__ = __repr__


@dataclass
class _Failure:
    """The last thing that went wrong in a retry loop; quoted when the loop gives up."""

    cause: str
    detail: str
    status: int | None = None
    code: str | None = None
    request_id: str | None = None


@dataclass(frozen=True)
class _Answer:
    status: int
    body: Any
    request_id: str | None
    headers: httpx.Headers


def _iso(day: dt.date | None) -> str | None:
    return day.isoformat() if day is not None else None


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters without the unset ones (so service defaults apply)."""
    return {name: value for name, value in values.items() if value is not None}


class VisibilityClient:
    """One client per sync: a pooled httpx.Client, one shared request budget, typed methods.

    Thread-safe: ``map_concurrent`` and any caller thread may share one instance.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        max_concurrency: int = 8,
        timeout_seconds: float = 30.0,
        retry_deadline_seconds: float = 300.0,
        user_agent: str = "visibility-sync",
        backoff_base_seconds: float = 0.5,
        backoff_max_seconds: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        budget: RequestBudget | None = None,
    ) -> None:
        """``budget``: share one budget between clients of the same key (the resource does)."""
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if timeout_seconds <= 0 or retry_deadline_seconds <= 0:
            raise ValueError("timeout_seconds and retry_deadline_seconds must be positive")
        self._base_url = validate_base_url(base_url)
        key = validate_api_key(api_key)
        self._secret = _Secret(key)  # only to scrub texts quoted from the service
        self._max_concurrency = max_concurrency
        self._retry_deadline = retry_deadline_seconds
        self._backoff_base = backoff_base_seconds
        self._backoff_max = backoff_max_seconds
        self._budget = budget if budget is not None else RequestBudget(max_concurrency)
        self._counters = _Counters()
        self._closed = False
        #: Set by the first quota_exceeded: from then on nothing is sent (the quota will not recover
        #: within a sync, and every further request would be refused too).
        self._quota_error: QuotaExceededError | None = None
        install_log_guard()
        # httpx masks the Authorization value in its Headers repr; it never logs request headers.
        self._http = httpx.Client(
            base_url=self._base_url,
            headers={
                "Authorization": f"Bearer {key}",
                "User-Agent": user_agent,
                "Accept": "application/json",
            },
            timeout=httpx.Timeout(timeout_seconds, connect=min(10.0, timeout_seconds)),
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
            follow_redirects=False,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"VisibilityClient(base_url={self._base_url!r}, max_concurrency={self._max_concurrency})"

    __str__ = __repr__

    # lifecycle
    def close(self) -> None:
        self._closed = True
        self._http.close()

    def __enter__(self) -> VisibilityClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def stats(self) -> RequestStats:
        """A consistent copy of the counters (later requests do not change it)."""
        return self._counters.snapshot()

    @property
    def budget(self) -> RequestBudget:
        """The shared budget (read ``budget.snapshot()`` to see the current limits)."""
        return self._budget

    # ------------------------------------------------------------------------------------------
    # The one request path
    # ------------------------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        """Texts quoted from the service go into exceptions: never let them carry the key."""
        return self._secret.scrub(text)[:_MAX_MESSAGE_CHARS]

    def _backoff(self, attempt: int) -> float:
        return full_jitter(attempt, base_seconds=self._backoff_base, cap_seconds=self._backoff_max)

    def _send_once(
        self, endpoint: ep.Endpoint, path: str, params: Mapping[str, Any] | None, body: Any
    ) -> tuple[_Answer | None, _Failure | None]:
        """One HTTP exchange: an answer (any status, body decoded), or a transport failure."""
        started = time.monotonic()
        try:
            response = self._http.request(endpoint.method, path, params=params, json=body)
        except httpx.TimeoutException as exc:
            sent = not isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
            return None, _Failure("timeout" if sent else "connect_timeout", type(exc).__name__)
        except httpx.RemoteProtocolError as exc:
            return None, _Failure("connection_dropped", type(exc).__name__)
        except httpx.ConnectError as exc:
            return None, _Failure("connect_error", type(exc).__name__)
        except httpx.DecodingError as exc:  # a compressed body cut short
            return None, _Failure("invalid_body", type(exc).__name__)
        except httpx.RequestError as exc:  # read/write errors, and anything else on the wire
            return None, _Failure("connection_dropped", type(exc).__name__)
        request_id = response.headers.get("x-request-id")
        decoded: Any = None
        if response.content:
            try:
                decoded = json.loads(response.content)
            except (ValueError, UnicodeDecodeError):
                decoded = None
        logger.debug(
            "%s %s -> %s in %.3fs [X-Request-Id %s]",
            endpoint.method,
            endpoint.template,
            response.status_code,
            time.monotonic() - started,
            request_id,
        )
        return _Answer(response.status_code, decoded, request_id, response.headers), None

    def _request(
        self,
        endpoint: ep.Endpoint,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> tuple[dict[str, Any], str | None]:
        """Send until a success, a typed failure, or the retry deadline; return (body, request id)."""
        if self._closed:
            raise VisibilityAPIError("the client is closed", endpoint=endpoint.key)
        if self._quota_error is not None:
            raise self._quota_stop(endpoint)
        deadline = time.monotonic() + self._retry_deadline
        attempt = 0
        last: _Failure | None = None
        ambiguous = False  # an earlier attempt ended without telling whether it was applied
        while True:
            try:
                permit = self._budget.acquire(endpoint.key, deadline=deadline)
            except BudgetExhausted as exc:
                last = last or _Failure("rate_limited", str(exc))
                raise self._give_up(endpoint, last, attempt, extra=str(exc)) from None
            self._counters.wait("pacing", permit.waited_for_rate)
            self._counters.wait("concurrency", permit.waited_for_slot)
            if self._quota_error is not None:
                self._budget.release(permit, success=False)
                raise self._quota_stop(endpoint)
            self._counters.request(endpoint.key)
            success = False
            try:
                answer, failure = self._send_once(endpoint, path, params, body)
                if answer is not None:
                    self._budget.observe(permit, answer.headers)
                    self._counters.response(answer.status, _error_code(answer.body))
                    try:
                        outcome = self._judge(endpoint, answer, permit, attempt)
                    except NotFoundError as exc:
                        if ambiguous and endpoint.method == "DELETE":
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
                        return outcome, answer.request_id
                    failure, delay = outcome
                else:
                    assert failure is not None
                    if failure.cause in _AMBIGUOUS_CAUSES and not may_retry_after_ambiguous_failure(
                        endpoint.method
                    ):
                        raise self._not_repeated(endpoint, failure)
                    delay = self._backoff(attempt)
            finally:
                self._budget.release(permit, success=success)
            last = failure
            ambiguous = ambiguous or failure.cause in _AMBIGUOUS_CAUSES
            attempt += 1
            if time.monotonic() + delay > deadline:
                raise self._give_up(endpoint, last, attempt)
            self._counters.retry(failure.cause)
            logger.info(
                "retrying %s after %s (attempt %d) in %.2fs%s",
                endpoint.key,
                failure.cause,
                attempt,
                delay,
                f" [X-Request-Id {failure.request_id}]" if failure.request_id else "",
            )
            if delay > 0:
                time.sleep(delay)
                self._counters.wait("backoff", delay)

    def _judge(
        self, endpoint: ep.Endpoint, answer: _Answer, permit: Permit, attempt: int
    ) -> dict[str, Any] | tuple[_Failure, float]:
        """A success body, or (the failure, seconds to wait before retrying); raises typed errors."""
        error = answer.body.get("error") if isinstance(answer.body, dict) else None
        code = _error_code(answer.body)
        message = error.get("message") if isinstance(error, dict) else None
        message = self._scrub(message) if isinstance(message, str) else None
        decision = classify(answer.status, code)
        failure = _Failure(
            decision.cause,
            message or f"HTTP {answer.status}",
            status=answer.status,
            code=code,
            request_id=answer.request_id,
        )
        retry_after = parse_retry_after(answer.headers.get("retry-after"))
        action = decision.action
        if action is Action.SUCCESS:
            if not isinstance(answer.body, dict):
                if may_retry_after_ambiguous_failure(endpoint.method):
                    return _Failure("invalid_body", "the body is not complete JSON", **_ids(answer)), (
                        self._backoff(attempt)
                    )
                raise self._not_repeated(
                    endpoint, _Failure("invalid_body", "the body is not complete JSON", **_ids(answer))
                )
            if "data" not in answer.body:
                raise ResponseShapeError(
                    "the success body has no 'data' member",
                    endpoint=endpoint.key,
                    status=answer.status,
                    request_id=answer.request_id,
                )
            return answer.body
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
            self._budget.block(delay)
            return failure, 0.0  # the budget holds everyone back; acquire() does the waiting
        if action is Action.WAIT_ENDPOINT:
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            self._budget.block(delay, endpoint.key)
            return failure, 0.0
        if action is Action.SHED_CONCURRENCY:
            changed = self._budget.concurrency_refused(permit)
            if changed:
                logger.info(
                    "concurrency_limited: in-flight limit lowered to %.1f",
                    self._budget.snapshot().concurrency_limit,
                )
            return failure, full_jitter(0, base_seconds=self._backoff_base, cap_seconds=self._backoff_max)
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
        self, endpoint: ep.Endpoint, last: _Failure, attempts: int, extra: str = ""
    ) -> VisibilityAPIError:
        error_type: type[VisibilityAPIError]
        if last.status == 429 or last.cause.endswith("rate_limited"):
            error_type = RateLimitError
        elif last.status is not None and last.status >= 500:
            error_type = ServerError
        else:
            error_type = TransportError
        detail = (
            f"gave up after {attempts} attempt(s) within the {self._retry_deadline:g}s retry deadline; "
            f"last failure: {last.cause} ({last.detail})"
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

    def _not_repeated(self, endpoint: ep.Endpoint, failure: _Failure) -> VisibilityAPIError:
        error_type = ServerError if failure.status is not None and failure.status >= 500 else TransportError
        return error_type(
            f"{failure.cause} ({failure.detail}); not retried because a {endpoint.method} may already "
            "have been applied and the service offers no idempotency key: check the result before "
            "repeating it",
            endpoint=endpoint.key,
            status=failure.status,
            code=failure.code,
            request_id=failure.request_id,
        )

    # ------------------------------------------------------------------------------------------
    # Shapes of answers
    # ------------------------------------------------------------------------------------------

    def _object(
        self,
        endpoint: ep.Endpoint,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Row:
        payload, request_id = self._request(endpoint, path, params=params, body=body)
        return endpoint.validate(payload["data"], request_id=request_id)

    def _pages(self, endpoint: ep.Endpoint, path: str, params: Mapping[str, Any]) -> Iterator[Row]:
        def fetch(cursor: str | None) -> tuple[dict[str, Any], str | None]:
            query = dict(params)
            if cursor is not None:
                query["cursor"] = cursor
            return self._request(endpoint, path, params=query)

        return iterate_pages(endpoint.key, fetch, endpoint.validate)

    def _complete(
        self,
        endpoint: ep.Endpoint,
        path: str,
        params: Mapping[str, Any],
        *,
        with_citations: bool = False,
    ) -> CompleteSet:
        payload, request_id = self._request(endpoint, path, params=params)
        rows, total_count, capped, total_citations = complete_set_fields(
            payload, endpoint.key, request_id=request_id, with_citations=with_citations
        )
        return CompleteSet(
            rows=[endpoint.validate(row, request_id=request_id) for row in rows],
            total_count=total_count,
            capped=capped,
            total_citations=total_citations,
        )

    # ------------------------------------------------------------------------------------------
    # Endpoints
    # ------------------------------------------------------------------------------------------

    # brands
    def list_brands(self, *, limit: int = 999) -> Iterator[Row]:
        return self._pages(ep.LIST_BRANDS, ep.LIST_BRANDS.path(), {"limit": limit})

    def get_brand(self, brand_id: str) -> Row:
        return self._object(ep.GET_BRAND, ep.GET_BRAND.path(id=brand_id))

    # topics
    def list_topics(self, brand_id: str, *, limit: int = 999) -> Iterator[Row]:
        return self._pages(ep.LIST_TOPICS, ep.LIST_TOPICS.path(id=brand_id), {"limit": limit})

    def create_topic(self, brand_id: str, name: str) -> Row:
        return self._object(ep.CREATE_TOPIC, ep.CREATE_TOPIC.path(id=brand_id), body={"name": name})

    def rename_topic(self, brand_id: str, topic_id: str, name: str) -> Row:
        path = ep.RENAME_TOPIC.path(id=brand_id, topicId=topic_id)
        return self._object(ep.RENAME_TOPIC, path, body={"name": name})

    # prompts, answers, mentions
    def list_prompts(self, brand_id: str, *, limit: int = 999) -> Iterator[Row]:
        return self._pages(ep.LIST_PROMPTS, ep.LIST_PROMPTS.path(id=brand_id), {"limit": limit})

    def list_answers(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = 100,
    ) -> Iterator[Row]:
        params = _params(engine=engine, limit=limit, **{"from": _iso(start), "to": _iso(end)})
        return self._pages(ep.LIST_ANSWERS, ep.LIST_ANSWERS.path(id=brand_id), params)

    def list_prompt_mentions(
        self,
        prompt_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = 999,
    ) -> Iterator[Row]:
        params = _params(engine=engine, limit=limit, **{"from": _iso(start), "to": _iso(end)})
        return self._pages(ep.LIST_PROMPT_MENTIONS, ep.LIST_PROMPT_MENTIONS.path(id=prompt_id), params)

    # generations
    def list_generations(self, brand_id: str, *, limit: int = 999) -> CompleteSet:
        path = ep.LIST_GENERATIONS.path(id=brand_id)
        return self._complete(ep.LIST_GENERATIONS, path, {"limit": limit})

    # citations
    def citation_trends(
        self,
        brand_id: str,
        *,
        domain: str | None = None,
        url: str | None = None,
        engine: str | None = None,
        topic_id: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
    ) -> Row:
        params = _params(
            domain=domain,
            url=url,
            engine=engine,
            **{ep.TOPIC_FILTER_PARAM: topic_id, "from": _iso(start), "to": _iso(end)},
        )
        return self._object(ep.CITATION_TRENDS, ep.CITATION_TRENDS.path(id=brand_id), params=params)

    def citation_urls(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        topic_id: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
        limit: int = 2000,
    ) -> CompleteSet:
        params = _params(
            engine=engine,
            limit=limit,
            **{ep.TOPIC_FILTER_PARAM: topic_id, "from": _iso(start), "to": _iso(end)},
        )
        path = ep.CITATION_URLS.path(id=brand_id)
        return self._complete(ep.CITATION_URLS, path, params, with_citations=True)

    # competitors
    def list_tracked_competitors(self, brand_id: str) -> Iterator[Row]:
        path = ep.LIST_TRACKED_COMPETITORS.path(id=brand_id)
        return self._pages(ep.LIST_TRACKED_COMPETITORS, path, {})

    def untrack_competitor(self, brand_id: str, competitor_id: str) -> Row:
        path = ep.UNTRACK_COMPETITOR.path(id=brand_id, competitorId=competitor_id)
        return self._object(ep.UNTRACK_COMPETITOR, path)

    def competitor_trends(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
        granularity: str = "day",
    ) -> Row:
        params = _params(engine=engine, granularity=granularity, **{"from": _iso(start), "to": _iso(end)})
        path = ep.COMPETITOR_TRENDS.path(id=brand_id)
        return self._object(ep.COMPETITOR_TRENDS, path, params=params)

    # audits
    def create_audit(self, url: str, brand_id: str) -> Row:
        return self._object(ep.CREATE_AUDIT, ep.CREATE_AUDIT.path(), body={"url": url, "brand_id": brand_id})

    def poll_audit(self, poll_path: str) -> Row:
        """GET the ``poll`` path of ``create_audit``'s answer (only a path on this service)."""
        return self._object(ep.POLL_AUDIT, self._same_origin_path(poll_path))

    def wait_for_audit(
        self, poll_path: str, *, timeout_seconds: float = 300.0, interval_seconds: float = 2.0
    ) -> Row:
        """Poll until ``status`` is ``complete``; raise ``TimeoutError`` after ``timeout_seconds``."""
        give_up_at = time.monotonic() + timeout_seconds
        while True:
            report = self.poll_audit(poll_path)
            if report.get("status") == "complete":
                return report
            if time.monotonic() + interval_seconds > give_up_at:
                raise TimeoutError(
                    f"audit {report.get('id')} still {report.get('status')!r} after {timeout_seconds:g}s"
                )
            time.sleep(interval_seconds)
            self._counters.wait("audit_poll", interval_seconds)

    def _same_origin_path(self, poll_path: str) -> str:
        """The key must never travel to another host, whatever a response says."""
        target = httpx.URL(poll_path)
        base = httpx.URL(self._base_url)
        if target.is_absolute_url:
            if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
                raise ResponseShapeError(
                    "the audit 'poll' URL points to another origin; refusing to send the key there",
                    endpoint=ep.POLL_AUDIT.key,
                )
            base_path = base.path.rstrip("/")
            path = target.path
            if base_path and path.startswith(base_path + "/"):
                path = path[len(base_path) :]
            return path + (f"?{target.query.decode()}" if target.query else "")
        if not poll_path.startswith("/") or poll_path.startswith("//"):
            raise ResponseShapeError(
                f"the audit 'poll' path must start with '/', got {poll_path[:80]!r}",
                endpoint=ep.POLL_AUDIT.key,
            )
        return poll_path

    # concurrency
    def map_concurrent(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Run independent calls (mentions of many prompts) concurrently within the budget.

        Yields results in input order; the first exception is raised after in-flight calls end.
        The thread pool only supplies callers: how many requests are really in flight is decided by
        the shared budget (AIMD), so a pool larger than the service allows does no harm.
        """
        # Keep the workers fed whichever call finishes first; finished results wait in `pending`
        # for their turn, so one slow call (a long backoff) does not idle the other workers.
        feed_ahead = 2 * self._max_concurrency
        max_buffered = 16 * self._max_concurrency
        iterator = iter(items)
        pool = ThreadPoolExecutor(max_workers=self._max_concurrency, thread_name_prefix="visibility-api")
        pending: deque[Future[R]] = deque()
        exhausted = False

        def feed() -> None:
            nonlocal exhausted
            unfinished = sum(1 for future in pending if not future.done())
            while not exhausted and unfinished < feed_ahead and len(pending) < max_buffered:
                try:
                    item = next(iterator)
                except StopIteration:
                    exhausted = True
                    return
                pending.append(pool.submit(fn, item))
                unfinished += 1

        try:
            feed()
            while pending:
                head = pending[0]
                if not head.done():
                    done, _ = wait_futures([f for f in pending if not f.done()], return_when=FIRST_COMPLETED)
                    if any(not f.cancelled() and f.exception() is not None for f in done):
                        # A call failed: start nothing new, let the running calls end, then yield
                        # what precedes the failure and raise the first error in input order.
                        exhausted = True
                        for future in pending:
                            future.cancel()
                        wait_futures(pending)
                    else:
                        feed()
                    continue
                pending.popleft()
                if head.cancelled():
                    continue
                error = head.exception()
                if error is not None:
                    for future in pending:
                        future.cancel()
                    wait_futures(pending)
                    raise error
                feed()
                yield head.result()
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)


def _error_code(body: Any) -> str | None:
    """The service's stable ``error.code``, when the body is the spec's error envelope."""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _ids(answer: _Answer) -> dict[str, Any]:
    return {"status": answer.status, "request_id": answer.request_id}
