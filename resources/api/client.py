"""The Dagster-free HTTP client of the visibility API (public surface; see docs/ARCHITECTURE.md).

One client per asset or step, one budget per sync: ``VisibilityClient`` holds the typed method of
every endpoint and wires the pieces that do the work, each in its own module: ``transport`` (one
HTTP exchange, bounded), ``calls`` (the retry loop and the judgement of each answer, after
``retry``'s policy), ``budget`` (pacing, AIMD, the outage clock, cancellation), ``paging`` (bounded
cursor walks), ``engine_rows`` (rows validated, unknown engines dropped), ``audit`` (polling),
``concurrency`` (``map_concurrent``), ``endpoints`` (shapes and types), ``redaction`` (the key out
of every text).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import httpx

from resources.api import audit
from resources.api import endpoints as ep
from resources.api.budget import RequestBudget, WaitCallback
from resources.api.calls import NEVER_REACHED_SECONDS, Calls
from resources.api.complete_sets import CompleteSet, complete_set_fields
from resources.api.concurrency import map_concurrent
from resources.api.config import (
    DEFAULT_MAX_NEW_COLUMNS,
    DEFAULT_MAX_RESPONSE_BYTES,
    origin,
    validate_api_key,
    validate_base_url,
)
from resources.api.engine_rows import EngineFilter
from resources.api.paging import DEFAULT_MAX_PAGES, WalkPosition, iterate_pages
from resources.api.redaction import install as install_log_guard
from resources.api.redaction import register_secret
from resources.api.stats import Counters, RequestStats
from resources.api.transport import Transport, tls_context

__all__ = ["NEVER_REACHED_SECONDS", "CompleteSet", "Row", "VisibilityClient", "tls_context"]

T = TypeVar("T")
R = TypeVar("R")

Row = dict[str, Any]


def _iso(day: dt.date | None) -> str | None:
    return day.isoformat() if day is not None else None


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters without the unset ones (so service defaults apply)."""
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
        user_agent: str = "visibility-sync",
        backoff_base_seconds: float = 0.5,
        backoff_max_seconds: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        budget: RequestBudget | None = None,
        on_wait: WaitCallback | None = None,
        cancel_event: threading.Event | None = None,
        max_pages: int = DEFAULT_MAX_PAGES,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_new_columns: int = DEFAULT_MAX_NEW_COLUMNS,
    ) -> None:
        """``budget``: the sync's shared budget (the resource passes it); without one the client
        makes its own, with ``on_wait`` and ``cancel_event`` (which otherwise belong to the budget).

        ``retry_deadline_seconds``: how long the client keeps retrying, counted per call for 429s and
        from the start of the outage (shared by the budget's clients) for transport failures and
        5xx. ``max_pages``: the most pages one paging walk reads (``paging``).
        ``max_response_bytes``: the largest body read, raw or decoded (``VISIBILITY_MAX_RESPONSE_BYTES``).
        ``max_new_columns``: the most unknown fields a table fetched through this client may bring
        (``VISIBILITY_MAX_NEW_COLUMNS``); the client only carries it to the fetch that checks it.
        """
        if max_concurrency < 1 or max_response_bytes < 1:
            raise ValueError("max_concurrency and max_response_bytes must be at least 1")
        if timeout_seconds <= 0 or retry_deadline_seconds <= 0:
            raise ValueError("timeout_seconds and retry_deadline_seconds must be positive")
        if budget is not None and (on_wait is not None or cancel_event is not None):
            raise ValueError(
                "on_wait and cancel_event belong to the shared budget: give them to RequestBudget"
            )
        self._base_url = validate_base_url(base_url)
        key = validate_api_key(api_key)
        register_secret(key)  # every text quoted from the service is scrubbed of it
        self._origin = origin(self._base_url)
        # names what a key fetched (sync.resume) without holding the key: a keyed hash, not reversible
        self._key_fingerprint = hashlib.blake2b(
            key.encode(), digest_size=16, person=b"visibility-key"
        ).hexdigest()
        self._max_concurrency = max_concurrency
        self._retry_deadline = retry_deadline_seconds
        self._max_pages = max_pages
        self.max_new_columns = max_new_columns
        self._budget = (
            budget
            if budget is not None
            else RequestBudget(max_concurrency, on_wait=on_wait, cancel_event=cancel_event)
        )
        self._counters = Counters()
        self._engines = EngineFilter(self._counters)
        install_log_guard()
        self._transport = Transport(
            self._base_url,
            key,
            budget=self._budget,
            user_agent=user_agent,
            timeout_seconds=timeout_seconds,
            max_concurrency=max_concurrency,
            max_response_bytes=max_response_bytes,
            transport=transport,
        )
        self._calls = Calls(
            self._transport,
            self._budget,
            self._counters,
            origin=self._origin,
            retry_deadline_seconds=retry_deadline_seconds,
            backoff_base_seconds=backoff_base_seconds,
            backoff_max_seconds=backoff_max_seconds,
        )

    def __repr__(self) -> str:
        return f"VisibilityClient(base_url={self._base_url!r}, max_concurrency={self._max_concurrency})"

    __str__ = __repr__

    # lifecycle
    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> VisibilityClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def key_fingerprint(self) -> str:
        """A one-way hash of the key: tells what one key fetched from another's, never the key."""
        return self._key_fingerprint

    @property
    def origin(self) -> str:
        """``scheme://host:port`` of the service: what messages name (never a key or user info)."""
        return self._origin

    @property
    def retry_deadline_seconds(self) -> float:
        return self._retry_deadline

    @property
    def stats(self) -> RequestStats:
        """A consistent copy of the counters (later requests do not change it)."""
        return self._counters.snapshot()

    @property
    def budget(self) -> RequestBudget:
        """The shared budget (read ``budget.snapshot()`` to see the current limits)."""
        return self._budget

    def cancel(self) -> None:
        """Cancel the sync: this client and every client sharing its budget raise ``SyncCancelled``."""
        self._budget.cancel()

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
        """Every row of a paged endpoint, validated page by page: what a typed method of a paged
        endpoint returns, for an endpoint that has none (a new table reads it here). ``walk``: where
        a resumed walk starts and where this one stands (``paging.WalkPosition``)."""

        def fetch(cursor: str | None) -> tuple[dict[str, Any], str | None]:
            query = dict(params)
            if cursor is not None:
                query["cursor"] = cursor
            return self._calls.request(endpoint, path, params=query)

        limit = params.get("limit")
        return iterate_pages(
            endpoint.key,
            fetch,
            on_page=lambda rows, request_id: self._engines.page_rows(endpoint, rows, request_id),
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
        rows, total_count, capped, total_citations = complete_set_fields(
            payload, endpoint.key, request_id=request_id, with_citations=with_citations
        )
        return CompleteSet(
            rows=self._engines.page_rows(endpoint, rows, request_id),
            total_count=total_count,
            capped=capped,
            total_citations=total_citations,
        )

    # ------------------------------------------------------------------------------------------
    # Endpoints
    # ------------------------------------------------------------------------------------------

    # brands
    def list_brands(self, *, limit: int = ep.MAX_LIMIT_PAGING) -> Iterator[Row]:
        return self.pages(ep.LIST_BRANDS, ep.LIST_BRANDS.path(), {"limit": limit})

    def get_brand(self, brand_id: str) -> Row:
        return self._object(ep.GET_BRAND, ep.GET_BRAND.path(id=brand_id))

    # topics
    def list_topics(self, brand_id: str, *, limit: int = ep.MAX_LIMIT_PAGING) -> Iterator[Row]:
        return self.pages(ep.LIST_TOPICS, ep.LIST_TOPICS.path(id=brand_id), {"limit": limit})

    def create_topic(self, brand_id: str, name: str) -> Row:
        return self._object(ep.CREATE_TOPIC, ep.CREATE_TOPIC.path(id=brand_id), body={"name": name})

    def rename_topic(self, brand_id: str, topic_id: str, name: str) -> Row:
        path = ep.RENAME_TOPIC.path(id=brand_id, topicId=topic_id)
        return self._object(ep.RENAME_TOPIC, path, body={"name": name})

    # prompts, answers, mentions
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
        params = _params(engine=engine, limit=limit, **{"from": _iso(start), "to": _iso(end)})
        return self.pages(ep.LIST_ANSWERS, ep.LIST_ANSWERS.path(id=brand_id), params, walk=walk)

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
        params = _params(engine=engine, limit=limit, **{"from": _iso(start), "to": _iso(end)})
        path = ep.LIST_PROMPT_MENTIONS.path(id=prompt_id)
        return self.pages(ep.LIST_PROMPT_MENTIONS, path, params, walk=walk)

    # generations
    def list_generations(self, brand_id: str, *, limit: int = ep.MAX_LIMIT_PAGING) -> CompleteSet:
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
        limit: int = ep.MAX_LIMIT_CITATION_URLS,
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
        params = _params(engine=engine, granularity=granularity, **{"from": _iso(start), "to": _iso(end)})
        path = ep.COMPETITOR_TRENDS.path(id=brand_id)
        return self._object(ep.COMPETITOR_TRENDS, path, params=params)

    # audits
    def create_audit(self, url: str, brand_id: str) -> Row:
        return self._object(ep.CREATE_AUDIT, ep.CREATE_AUDIT.path(), body={"url": url, "brand_id": brand_id})

    def poll_audit(self, poll_path: str) -> Row:
        """GET the ``poll`` path of ``create_audit``'s answer (only a path on this service)."""
        return self._object(ep.POLL_AUDIT, audit.same_origin_path(poll_path, self._base_url))

    def wait_for_audit(
        self, poll_path: str, *, timeout_seconds: float = 300.0, interval_seconds: float = 2.0
    ) -> Row:
        """Poll until ``status`` is ``complete``; raise ``TimeoutError`` after ``timeout_seconds``.

        The waits between polls end at once when the sync is cancelled (``SyncCancelled``).
        """
        return audit.wait_for_audit(
            lambda: self.poll_audit(poll_path),
            self._budget,
            self._counters,
            timeout_seconds=timeout_seconds,
            interval_seconds=interval_seconds,
        )

    # concurrency
    def map_concurrent(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Run independent calls (mentions of many prompts) concurrently within the budget.

        Yields results in input order; after the first failure no new call starts, and the first
        error in input order is raised once the calls in flight end. The pool only supplies callers:
        how many requests are really in flight is decided by the shared budget (AIMD). Up to
        ``16 * max_concurrency`` calls are queued ahead of the oldest unfinished one, so a slow call
        (a long backoff) does not idle the other workers.
        """
        return map_concurrent(fn, items, self._max_concurrency)
