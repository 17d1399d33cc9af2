"""The Dagster-free HTTP client of the visibility API (public surface; see docs/ARCHITECTURE.md).

STUB: the method signatures below are the contract the assets and sensors are written against.
The implementation (budget, retries, paging, concurrency) lives in sibling modules.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

Row = dict[str, Any]


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

    @property
    def total_requests(self) -> int:
        return sum(self.requests_by_endpoint.values())


class VisibilityClient:
    """One client per sync: a pooled httpx.Client, one shared request budget, typed methods."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        max_concurrency: int = 8,
        timeout_seconds: float = 30.0,
        retry_deadline_seconds: float = 300.0,
        user_agent: str = "visibility-sync",
    ) -> None:
        raise NotImplementedError

    # lifecycle
    def close(self) -> None: ...
    def __enter__(self) -> VisibilityClient: ...
    def __exit__(self, *exc: object) -> None: ...

    @property
    def stats(self) -> RequestStats: ...

    # brands
    def list_brands(self, *, limit: int = 999) -> Iterator[Row]: ...
    def get_brand(self, brand_id: str) -> Row: ...

    # topics
    def list_topics(self, brand_id: str, *, limit: int = 999) -> Iterator[Row]: ...
    def create_topic(self, brand_id: str, name: str) -> Row: ...
    def rename_topic(self, brand_id: str, topic_id: str, name: str) -> Row: ...

    # prompts, answers, mentions
    def list_prompts(self, brand_id: str, *, limit: int = 999) -> Iterator[Row]: ...
    def list_answers(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = 100,
    ) -> Iterator[Row]: ...
    def list_prompt_mentions(
        self,
        prompt_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = 999,
    ) -> Iterator[Row]: ...

    # generations
    def list_generations(self, brand_id: str, *, limit: int = 999) -> CompleteSet: ...

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
    ) -> Row: ...
    def citation_urls(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        topic_id: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
        limit: int = 2000,
    ) -> CompleteSet: ...

    # competitors
    def list_tracked_competitors(self, brand_id: str) -> Iterator[Row]: ...
    def untrack_competitor(self, brand_id: str, competitor_id: str) -> Row: ...
    def competitor_trends(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
        granularity: str = "day",
    ) -> Row: ...

    # audits
    def create_audit(self, url: str, brand_id: str) -> Row: ...
    def poll_audit(self, poll_path: str) -> Row: ...

    # concurrency
    def map_concurrent(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Run independent calls (mentions of many prompts) concurrently within the budget.

        Yields results in input order; the first exception is raised after in-flight calls end.
        """
        ...
