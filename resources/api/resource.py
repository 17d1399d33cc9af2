"""The Dagster face of the API client: the only module of ``resources/api`` that imports Dagster."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient
from resources.api.config import validate_api_key, validate_base_url

_HIDDEN = "[hidden]"

#: Budgets shared by every resource of one (URL, key) while ``shared_budget`` is active.
_SHARED_BUDGETS: dict[tuple[str, str], RequestBudget] = {}
_SHARED_GUARD = threading.Lock()


def _identity(api_url: str, api_key: str) -> tuple[str, str]:
    return api_url.rstrip("/"), hashlib.sha256(api_key.encode()).hexdigest()


@contextmanager
def shared_budget(api_url: str, api_key: str, max_concurrency: int = 8) -> Iterator[RequestBudget]:
    """One request budget for every run of this process using the key, while the block lasts.

    Dagster gives each run its own copy of a resource, so two runs at once (the command line syncs
    the daily and rollup assets side by side) would otherwise pace separately and trade 429s over the
    key's one rate limit. Nested blocks for the same key reuse the outer budget.
    """
    ident = _identity(api_url, api_key)
    with _SHARED_GUARD:
        outer = _SHARED_BUDGETS.get(ident)
        budget = outer or _SHARED_BUDGETS.setdefault(ident, RequestBudget(max_concurrency))
    try:
        yield budget
    finally:
        if outer is None:
            with _SHARED_GUARD:
                _SHARED_BUDGETS.pop(ident, None)


class VisibilityAPIResource(dg.ConfigurableResource):
    """Settings of the visibility API; ``get_client()`` opens a client for one asset or sync.

    Every client of one resource instance (one per run, per process) shares one request budget, so
    what one asset learnt about the limits holds for the next; inside ``shared_budget`` every run of
    the process using the same key shares one. Counters stay per client, so each
    asset reports its own requests. Pass the key as ``EnvVar("VISIBILITY_API_KEY")`` so it stays
    out of code and run config; Dagster shows an ``EnvVar`` by name but holds the resolved value
    inside a run, so this class also masks the key in its own ``repr``/``str``.
    """

    api_url: str = Field(
        description="Base URL of the service (VISIBILITY_API_URL); https:// unless the host is loopback."
    )
    api_key: str = Field(
        description="Bearer key (VISIBILITY_API_KEY); pass EnvVar('VISIBILITY_API_KEY'). Never logged."
    )
    max_concurrency: int = Field(
        default=8, description="Most requests in flight; lowered at run time on concurrency_limited."
    )
    timeout_seconds: float = Field(default=30.0, description="Timeout of one HTTP exchange.")
    retry_deadline_seconds: float = Field(
        default=300.0, description="How long one call keeps retrying 429s, 5xx and transport faults."
    )
    backoff_base_seconds: float = Field(
        default=0.5, description="First backoff step of the jittered exponential backoff."
    )

    _budget: RequestBudget | None = PrivateAttr(default=None)
    _budget_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, (_HIDDEN if name == "api_key" else value)

    def validate_settings(self) -> None:
        """Raise ``ConfigurationError`` naming the setting (VISIBILITY_API_URL/KEY) when it is wrong."""
        validate_base_url(self.api_url)
        validate_api_key(self.api_key)
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")

    def get_client(self, *, retry_deadline_seconds: float | None = None) -> VisibilityClient:
        """A new client (use it in a ``with`` block); settings are validated before any request.

        ``retry_deadline_seconds`` shortens the retry deadline (and the timeout with it) for callers
        that must stay short, such as sensor ticks.
        """
        self.validate_settings()
        deadline = self.retry_deadline_seconds if retry_deadline_seconds is None else retry_deadline_seconds
        with self._budget_lock:
            if self._budget is None:
                with _SHARED_GUARD:
                    shared = _SHARED_BUDGETS.get(_identity(self.api_url, self.api_key))
                self._budget = shared or RequestBudget(self.max_concurrency)
        return VisibilityClient(
            self.api_url,
            self.api_key,
            max_concurrency=self.max_concurrency,
            timeout_seconds=min(self.timeout_seconds, deadline),
            retry_deadline_seconds=deadline,
            backoff_base_seconds=self.backoff_base_seconds,
            budget=self._budget,
        )
