"""The service's address and key, how hard a sync may press it and what it trends: declared once.

Dagster-free, so a process can open clients before (or without) importing Dagster: the command line
starts its fetches while Dagster imports (``sync/head_start.py``), then hands the same budget to the
``api`` resource, which is an :class:`ApiAccess` too (``resources/api/resource.py``).
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr

from resources.api import config
from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient


class ApiTuning(BaseModel):
    """The API fields a ``VISIBILITY_*`` variable of the same name sets, with their bounds:
    ``settings.Settings`` reads them from the environment, :class:`ApiAccess` hands them to clients."""

    retry_deadline_seconds: float = Field(
        default=config.DEFAULT_RETRY_DEADLINE_SECONDS,
        gt=0,
        description="VISIBILITY_RETRY_DEADLINE_SECONDS: how long the sync keeps retrying an unreachable "
        "service (transport faults, 5xx), counted from the first failure and shared by every client "
        "of this resource; also how long one call waits out 429s.",
    )
    request_budget_floor: int = Field(
        default=config.DEFAULT_REQUEST_FLOOR,
        ge=config.MIN_REQUEST_FLOOR,
        le=config.MAX_REQUEST_FLOOR,
        description="VISIBILITY_REQUEST_BUDGET_FLOOR: requests a run may make before its plans add to "
        "its request budget (listings, discovery).",
    )
    request_budget_factor: int = Field(
        default=config.DEFAULT_REQUESTS_PER_CALL,
        ge=config.MIN_REQUESTS_PER_CALL,
        le=config.MAX_REQUESTS_PER_CALL,
        description="VISIBILITY_REQUEST_BUDGET_FACTOR: requests a run may make per planned call "
        "(further pages and retries included); a service that never ends a walk stops there.",
    )
    max_response_bytes: int = Field(
        default=config.DEFAULT_MAX_RESPONSE_BYTES,
        ge=config.MIN_MAX_RESPONSE_BYTES,
        le=config.MAX_MAX_RESPONSE_BYTES,
        description="VISIBILITY_MAX_RESPONSE_BYTES: the largest body of one answer read, raw or "
        "decoded; a larger one fails its table.",
    )
    max_new_columns: int = Field(
        default=config.DEFAULT_MAX_NEW_COLUMNS,
        ge=config.MIN_MAX_NEW_COLUMNS,
        le=config.MAX_MAX_NEW_COLUMNS,
        description="VISIBILITY_MAX_NEW_COLUMNS: the most unknown fields one table's fetch lands as new "
        "columns; more fail the table, the warehouse as it was.",
    )
    citation_urls: list[str] = Field(
        default_factory=list,
        description="VISIBILITY_CITATION_URLS: pages (absolute http(s) URLs) whose citation trend each "
        "brand syncs into citation_trends; a run's sync_daily config may pick others.",
    )
    citation_topics: list[str] = Field(
        default_factory=list,
        description="VISIBILITY_CITATION_TOPICS: topics (ids or names) within which each brand's own "
        "domain is trended; a run's sync_daily config may pick others.",
    )


class ApiAccess(ApiTuning):
    """What every client of a sync is opened with, and the one request budget they share (outage
    clock, cancel switch, wait hook, request allowance), made on first use; ``repr`` hides the key.
    Out-of-range numbers are refused when it is built (a launchpad edit fails the run's start naming
    the field); the client validates the URL and key (``resources/api/config.py``)."""

    api_url: str = Field(
        description="Base URL of the service (VISIBILITY_API_URL); https:// unless the host is loopback."
    )
    api_key: str = Field(
        description="Bearer key (VISIBILITY_API_KEY), read from the environment; never logged or stored."
    )
    max_concurrency: int = Field(
        default=8, ge=1, description="Most requests in flight; lowered at run time on concurrency_limited."
    )
    timeout_seconds: float = Field(default=30.0, gt=0, description="Timeout of one HTTP exchange.")
    backoff_base_seconds: float = Field(
        default=0.5, description="First backoff step of the jittered exponential backoff."
    )

    _budget: RequestBudget | None = PrivateAttr(default=None)
    _budget_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, ("[hidden]" if name == "api_key" else value)

    def get_budget(self) -> RequestBudget:
        """The budget every client of this object shares, made on first use."""
        with self._budget_lock:
            if self._budget is None:
                self._budget = RequestBudget(
                    self.max_concurrency,
                    retry_deadline_seconds=self.retry_deadline_seconds,
                    request_floor=self.request_budget_floor,
                    requests_per_call=self.request_budget_factor,
                )
            return self._budget

    def share_budget(self, budget: RequestBudget) -> None:
        """Use ``budget``, made by another :class:`ApiAccess` before this one's first client, so the
        command line's early fetches and its runs share one."""
        with self._budget_lock:
            self._budget = budget

    def cancel(self) -> None:
        """Cancel the sync: every client of this budget stops at once with ``SyncCancelled``."""
        self.get_budget().cancel()

    def get_client(self, *, retry_deadline_seconds: float | None = None) -> VisibilityClient:
        """A new client on this object's budget (use it in a ``with`` block); a shorter
        ``retry_deadline_seconds`` (the timeout with it) is for callers that must stay short, such as
        sensor ticks."""
        deadline = self.retry_deadline_seconds if retry_deadline_seconds is None else retry_deadline_seconds
        return VisibilityClient(
            self.api_url,
            self.api_key,
            max_concurrency=self.max_concurrency,
            timeout_seconds=min(self.timeout_seconds, deadline),
            retry_deadline_seconds=deadline,
            backoff_base_seconds=self.backoff_base_seconds,
            budget=self.get_budget(),
            max_response_bytes=self.max_response_bytes,
            max_new_columns=self.max_new_columns,
        )
