"""The Dagster-free HTTP client of the visibility API: ``VisibilityClient``, a typed method per endpoint,
wiring ``transport``, ``calls``, ``budget``, ``paging``, ``endpoints`` and ``redaction``, and
running independent calls on a thread pool (``map_concurrent``)."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

import httpx

from resources.api import endpoints as ep
from resources.api.budget import RequestBudget
from resources.api.calls import Calls
from resources.api.config import (
    DEFAULT_MAX_NEW_COLUMNS,
    DEFAULT_MAX_RESPONSE_BYTES,
    origin,
    validate_api_key,
    validate_base_url,
)
from resources.api.errors import ResponseShapeError
from resources.api.paging import DEFAULT_MAX_PAGES, CompleteSet, WalkPosition, complete_set, iterate_pages
from resources.api.redaction import API_LOGGER, excerpt, register_secret, sanitize
from resources.api.redaction import install as install_log_guard
from resources.api.stats import Counters, RequestStats
from resources.api.transport import Transport

T = TypeVar("T")
R = TypeVar("R")

Row = dict[str, Any]

logger = logging.getLogger(API_LOGGER)

#: At most one warning about rows with an unknown engine per endpoint this often (per client).
_UNKNOWN_ENGINE_WARN_EVERY_SECONDS = 30.0


def _query(start: dt.date | None, end: dt.date | None, **values: Any) -> dict[str, Any]:
    """Query parameters of a date window (``end`` exclusive) without the unset ones (so service
    defaults apply)."""
    values["from"] = start.isoformat() if start else None
    values["to"] = end.isoformat() if end else None
    return {name: value for name, value in values.items() if value is not None}


class VisibilityClient:
    """One client per asset or step; its budget (and with it the retry deadline's outage clock, the
    cancel switch and the wait hook) is shared by every client of the sync.

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
        backoff_base_seconds: float = 0.5,
        backoff_max_seconds: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        budget: RequestBudget | None = None,
        max_pages: int = DEFAULT_MAX_PAGES,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_new_columns: int = DEFAULT_MAX_NEW_COLUMNS,
    ) -> None:
        """The numbers are checked where they are set (``ApiAccess``, ``settings.py``). ``budget``: the
        sync's shared budget (without one the client makes its own); ``max_new_columns`` is only
        carried to the fetch that checks it (``VISIBILITY_MAX_NEW_COLUMNS``)."""
        self.base_url = validate_base_url(base_url)
        key = validate_api_key(api_key)
        register_secret(key)  # every text quoted from the service is scrubbed of it
        #: a keyed one-way hash of the key: tells what one key fetched from another's (sync.resume)
        self.key_fingerprint = hashlib.blake2b(
            key.encode(), digest_size=16, person=b"visibility-key"
        ).hexdigest()
        self._max_concurrency = max_concurrency
        self._max_pages = max_pages
        self.max_new_columns = max_new_columns
        #: the sync's shared budget (``budget.snapshot()`` shows the current limits)
        self.budget = budget if budget is not None else RequestBudget(max_concurrency)
        self._counters = Counters()
        self._engine_warned_at: dict[str, float] = {}
        install_log_guard()
        self._transport = Transport(
            self.base_url,
            key,
            budget=self.budget,
            timeout_seconds=timeout_seconds,
            max_concurrency=max_concurrency,
            max_response_bytes=max_response_bytes,
            transport=transport,
        )
        self._calls = Calls(
            self._transport,
            self.budget,
            self._counters,
            origin=origin(self.base_url),  # what messages name: never a key, user info or path
            retry_deadline_seconds=retry_deadline_seconds,
            backoff_base_seconds=backoff_base_seconds,
            backoff_max_seconds=backoff_max_seconds,
        )

    def __repr__(self) -> str:
        return f"VisibilityClient(base_url={self.base_url!r}, max_concurrency={self._max_concurrency})"

    def close(self) -> None:
        self._transport.http.close()

    def __enter__(self) -> VisibilityClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stats(self) -> RequestStats:
        """A consistent copy of the counters (later requests do not change it)."""
        return self._counters.snapshot()

    def _page_rows(self, endpoint: ep.Endpoint, rows: list[Any], request_id: str | None) -> list[Row]:
        """A page's rows validated and rid of engines outside the spec's seven (they fit no
        partition): counted, and warned about at most every 30 s per endpoint."""
        checked = endpoint.validate_rows(rows, request_id=request_id)
        if not endpoint.engine_rows:
            return checked
        known = [row for row in checked if row.get("engine") in ep.ENGINE_SET]
        dropped = len(checked) - len(known)
        if not dropped:
            return known
        total = self._counters.unknown_engine(endpoint.key, dropped)
        now = time.monotonic()
        if now - self._engine_warned_at.get(endpoint.key, -math.inf) < _UNKNOWN_ENGINE_WARN_EVERY_SECONDS:
            return known
        self._engine_warned_at[endpoint.key] = now
        values = sorted({str(row.get("engine")) for row in checked} - ep.ENGINE_SET)
        logger.warning(
            "%s: dropped %d row(s) with an engine outside the spec's seven (%s); %d so far in this client%s",
            endpoint.key,
            dropped,
            ", ".join(sanitize(v, 40) for v in values[:5]),
            total,
            f" [X-Request-Id {request_id}]" if request_id else "",
        )
        return known

    def _object(
        self,
        endpoint: ep.Endpoint,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Row:
        payload, request_id = self._calls.request(endpoint, path, params=params, body=body)
        return endpoint.validate(payload["data"], request_id=request_id)

    def pages(
        self,
        endpoint: ep.Endpoint,
        path: str,
        params: Mapping[str, Any],
        *,
        walk: WalkPosition | None = None,
    ) -> Iterator[Row]:
        """Every row of a paged endpoint, validated page by page (a new table reads an endpoint
        without a typed method here). ``walk``: where a resumed walk starts and stands."""

        def fetch(cursor: str | None) -> tuple[dict[str, Any], str | None]:
            query = dict(params)
            if cursor is not None:
                query["cursor"] = cursor
            return self._calls.request(endpoint, path, params=query)

        limit = params.get("limit")
        return iterate_pages(
            endpoint.key,
            fetch,
            lambda rows, request_id: self._page_rows(endpoint, rows, request_id),
            limit=limit if isinstance(limit, int) else None,
            max_pages=self._max_pages,
            walk=walk,
        )

    def _complete(
        self,
        endpoint: ep.Endpoint,
        path: str,
        params: Mapping[str, Any],
        *,
        with_citations: bool = False,
    ) -> CompleteSet:
        payload, request_id = self._calls.request(endpoint, path, params=params)
        answer = complete_set(payload, endpoint.key, request_id=request_id, with_citations=with_citations)
        return replace(answer, rows=self._page_rows(endpoint, answer.rows, request_id))

    def list_brands(self, *, limit: int = ep.MAX_LIMIT_PAGING) -> Iterator[Row]:
        return self.pages(ep.LIST_BRANDS, ep.LIST_BRANDS.path(), {"limit": limit})

    def get_brand(self, brand_id: str) -> Row:
        return self._object(ep.GET_BRAND, ep.GET_BRAND.path(id=brand_id))

    def list_topics(self, brand_id: str, *, limit: int = ep.MAX_LIMIT_PAGING) -> Iterator[Row]:
        return self.pages(ep.LIST_TOPICS, ep.LIST_TOPICS.path(id=brand_id), {"limit": limit})

    def create_topic(self, brand_id: str, name: str) -> Row:
        return self._object(ep.CREATE_TOPIC, ep.CREATE_TOPIC.path(id=brand_id), body={"name": name})

    def rename_topic(self, brand_id: str, topic_id: str, name: str) -> Row:
        path = ep.RENAME_TOPIC.path(id=brand_id, topicId=topic_id)
        return self._object(ep.RENAME_TOPIC, path, body={"name": name})

    def list_prompts(self, brand_id: str, *, limit: int = ep.MAX_LIMIT_PAGING) -> Iterator[Row]:
        return self.pages(ep.LIST_PROMPTS, ep.LIST_PROMPTS.path(id=brand_id), {"limit": limit})

    def list_answers(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = ep.MAX_LIMIT_ANSWERS,
        walk: WalkPosition | None = None,
    ) -> Iterator[Row]:
        return self.list_window(
            ep.LIST_ANSWERS, brand_id, engine=engine, start=start, end=end, limit=limit, walk=walk
        )

    def list_prompt_mentions(
        self,
        prompt_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = ep.MAX_LIMIT_PAGING,
        walk: WalkPosition | None = None,
    ) -> Iterator[Row]:
        return self.list_window(
            ep.LIST_PROMPT_MENTIONS, prompt_id, engine=engine, start=start, end=end, limit=limit, walk=walk
        )

    def list_window(
        self,
        endpoint: ep.Endpoint,
        owner_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = ep.MAX_LIMIT_PAGING,
        walk: WalkPosition | None = None,
    ) -> Iterator[Row]:
        """Every row of a date-windowed paged endpoint of one brand or prompt (``/v1/.../{id}/...``):
        a new table's endpoint reads through this without a typed method of its own."""
        params = _query(start, end, engine=engine, limit=limit)
        return self.pages(endpoint, endpoint.path(id=owner_id), params, walk=walk)

    def list_generations(self, brand_id: str, *, limit: int = ep.MAX_LIMIT_PAGING) -> CompleteSet:
        path = ep.LIST_GENERATIONS.path(id=brand_id)
        return self._complete(ep.LIST_GENERATIONS, path, {"limit": limit})

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
        params = _query(
            start, end, domain=domain, url=url, engine=engine, **{ep.TOPIC_FILTER_PARAM: topic_id}
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
        limit: int = ep.MAX_LIMIT_CITATION_URLS,
    ) -> CompleteSet:
        params = _query(start, end, engine=engine, limit=limit, **{ep.TOPIC_FILTER_PARAM: topic_id})
        path = ep.CITATION_URLS.path(id=brand_id)
        return self._complete(ep.CITATION_URLS, path, params, with_citations=True)

    def list_tracked_competitors(self, brand_id: str) -> Iterator[Row]:
        path = ep.LIST_TRACKED_COMPETITORS.path(id=brand_id)
        return self.pages(ep.LIST_TRACKED_COMPETITORS, path, {})

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
        params = _query(start, end, engine=engine, granularity=granularity)
        path = ep.COMPETITOR_TRENDS.path(id=brand_id)
        return self._object(ep.COMPETITOR_TRENDS, path, params=params)

    def create_audit(self, url: str, brand_id: str) -> Row:
        return self._object(ep.CREATE_AUDIT, ep.CREATE_AUDIT.path(), body={"url": url, "brand_id": brand_id})

    def poll_audit(self, poll_path: str) -> Row:
        """GET the ``poll`` path of ``create_audit``'s answer (only a path on this service)."""
        return self._object(ep.POLL_AUDIT, _poll_path(poll_path))

    def wait_for_audit(
        self, poll_path: str, *, timeout_seconds: float = 300.0, interval_seconds: float = 2.0
    ) -> Row:
        """Poll until ``status`` is ``complete`` or ``timeout_seconds`` pass: the last report. The
        waits sleep through the budget, so a cancelled sync ends them (``SyncCancelled``)."""
        give_up_at = time.monotonic() + timeout_seconds
        while True:
            report = self.poll_audit(poll_path)
            if report.get("status") == "complete" or time.monotonic() + interval_seconds > give_up_at:
                return report
            self.budget.sleep(interval_seconds, endpoint=ep.POLL_AUDIT.key)
            self._counters.wait("audit_poll", interval_seconds)

    def map_concurrent(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Run independent calls (mentions of many prompts) concurrently, yielding results in input
        order. After the first failure no new call starts, and the first error in input order is
        raised once the calls in flight end. The pool only supplies callers: the shared budget
        decides how many requests are in flight."""
        failed = threading.Event()

        def call(item: T) -> R:
            if failed.is_set():
                raise _Skipped
            try:
                return fn(item)
            except BaseException:
                failed.set()
                raise

        with ThreadPoolExecutor(self._max_concurrency, thread_name_prefix="visibility-api") as pool:
            futures = [pool.submit(call, item) for item in items]
            try:
                for future in futures:
                    try:
                        yield future.result()
                    except _Skipped:
                        continue
            finally:  # an error, or the caller stopped early: what has not started never will
                for future in futures:
                    future.cancel()


class _Skipped(Exception):
    """A call not started because an earlier one failed."""


def _poll_path(poll: str) -> str:
    """The spec's ``poll`` is a path on this service; anything else (an absolute URL, ``//host``) is
    refused, so the key never travels to another host, whatever an answer says."""
    if not poll.startswith("/") or poll.startswith("//"):
        raise ResponseShapeError(
            f"the audit 'poll' must be a path starting with '/', got {excerpt(poll, 80)}; "
            "refusing to send the key anywhere else",
            endpoint=ep.POLL_AUDIT.key,
        )
    return poll
