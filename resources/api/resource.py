"""The Dagster face of the API client: the only module of ``resources/api`` that imports Dagster."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from resources.api.budget import RequestBudget, WaitCallback
from resources.api.client import VisibilityClient
from resources.api.config import (
    DEFAULT_REQUEST_FLOOR,
    DEFAULT_REQUESTS_PER_CALL,
    DEFAULT_RETRY_DEADLINE_SECONDS,
    RETRY_DEADLINE_SETTING,
    validate_api_key,
    validate_base_url,
)
from resources.api.errors import ConfigurationError
from resources.api.key_ledger import KeyLedger

_HIDDEN = "[hidden]"

#: Budgets shared by every resource of one (URL, key) while ``shared_budget`` is active.
_SHARED_BUDGETS: dict[tuple[str, str], RequestBudget] = {}
_SHARED_GUARD = threading.Lock()


def _identity(api_url: str, api_key: str) -> tuple[str, str]:
    return api_url.rstrip("/"), hashlib.sha256(api_key.encode()).hexdigest()


@contextmanager
def shared_budget(
    api_url: str,
    api_key: str,
    max_concurrency: int = 8,
    *,
    on_wait: WaitCallback | None = None,
    cancel_event: threading.Event | None = None,
    retry_deadline_seconds: float | None = None,
    request_floor: int | None = DEFAULT_REQUEST_FLOOR,
    requests_per_call: int = DEFAULT_REQUESTS_PER_CALL,
) -> Iterator[RequestBudget]:
    """One request budget for every run of this process using the key, while the block lasts.

    Dagster gives each run its own copy of a resource, so two runs at once (the command line syncs
    the daily and rollup assets side by side) would otherwise pace separately and trade 429s over the
    key's one rate limit. The budget is also the sync's outage clock (one retry deadline for all its
    calls: ``retry_deadline_seconds``, else each resource's), its cancel switch (``budget.cancel()``,
    or set ``cancel_event``), its wait hook (``on_wait``, also settable as ``budget.on_wait``) and its
    request allowance (``request_floor`` plus ``requests_per_call`` per planned call). Nested blocks
    for the same key reuse the outer budget (and ignore the keyword arguments).
    """
    ident = _identity(api_url, api_key)
    with _SHARED_GUARD:
        outer = _SHARED_BUDGETS.get(ident)
        budget = outer or _SHARED_BUDGETS.setdefault(
            ident,
            RequestBudget(
                max_concurrency,
                on_wait=on_wait,
                cancel_event=cancel_event,
                retry_deadline_seconds=retry_deadline_seconds,
                ledger=KeyLedger.for_key(api_url, api_key),  # shared with other processes on the key
                request_floor=request_floor,
                requests_per_call=requests_per_call,
            ),
        )
    try:
        yield budget
    finally:
        if outer is None:
            with _SHARED_GUARD:
                _SHARED_BUDGETS.pop(ident, None)


class VisibilityAPIResource(dg.ConfigurableResource):
    """The AI-search visibility service the sync reads: its URL and key (VISIBILITY_API_URL,
    VISIBILITY_API_KEY; the key is never logged or stored) and how hard the sync may press it. The
    defaults suit every key: the sync slows down by itself when the service asks it to."""

    # For developers: ``get_client()`` opens a client for one asset or sync.
    #
    # Every client of one resource instance (one per run, per process) shares one request budget, so
    # what one asset learnt about the limits holds for the next; inside ``shared_budget`` every run of
    # the process using the same key shares one. That budget is also the sync's retry deadline (one
    # outage clock for every client: once the service has failed for ``retry_deadline_seconds``,
    # every further call fails at once), its cancel switch (``cancel()``) and its wait hook
    # (``get_budget().on_wait``). Counters stay per client, so each asset reports its own requests.
    # Pass the key as ``EnvVar("VISIBILITY_API_KEY")`` so it stays out of code and run config; Dagster
    # shows an ``EnvVar`` by name but holds the resolved value inside a run, so this class also masks
    # the key in its own ``repr``/``str``.

    api_url: str = Field(
        description="Base URL of the service (VISIBILITY_API_URL); https:// unless the host is loopback."
    )
    api_key: str = Field(
        description="Bearer key (VISIBILITY_API_KEY), read from the environment; never logged or stored."
    )
    max_concurrency: int = Field(
        default=8, description="Most requests in flight; lowered at run time on concurrency_limited."
    )
    timeout_seconds: float = Field(default=30.0, description="Timeout of one HTTP exchange.")
    retry_deadline_seconds: float = Field(
        default=DEFAULT_RETRY_DEADLINE_SECONDS,
        description="VISIBILITY_RETRY_DEADLINE_SECONDS: how long the sync keeps retrying an unreachable "
        "service (transport faults, 5xx), counted from the first failure and shared by every client "
        "of this resource; also how long one call waits out 429s.",
    )
    backoff_base_seconds: float = Field(
        default=0.5, description="First backoff step of the jittered exponential backoff."
    )
    request_budget_floor: int = Field(
        default=DEFAULT_REQUEST_FLOOR,
        description="VISIBILITY_REQUEST_BUDGET_FLOOR: requests a run may make before its plans add to "
        "its request budget (listings, discovery).",
    )
    request_budget_factor: int = Field(
        default=DEFAULT_REQUESTS_PER_CALL,
        description="VISIBILITY_REQUEST_BUDGET_FACTOR: requests a run may make per planned call "
        "(further pages and retries included); a service that never ends a walk stops there.",
    )

    _budget: RequestBudget | None = PrivateAttr(default=None)
    _budget_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, (_HIDDEN if name == "api_key" else value)

    def validate_settings(self) -> None:
        """Raise ``ConfigurationError`` naming the setting (VISIBILITY_API_URL/KEY/RETRY_DEADLINE_SECONDS)
        when it is wrong."""
        validate_base_url(self.api_url)
        validate_api_key(self.api_key)
        if not self.retry_deadline_seconds > 0:  # the environment's bounds are settings.py's
            raise ConfigurationError(
                f"{RETRY_DEADLINE_SETTING} must be a positive number of seconds, "
                f"got {self.retry_deadline_seconds!r}"
            )
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")

    def get_budget(self) -> RequestBudget:
        """The budget every client of this instance shares (the ``shared_budget`` one when active).

        It is the sync's outage clock, cancel switch (``cancel()``) and wait hook (``on_wait``).
        """
        with self._budget_lock:
            if self._budget is None:
                with _SHARED_GUARD:
                    shared = _SHARED_BUDGETS.get(_identity(self.api_url, self.api_key))
                self._budget = shared or RequestBudget(
                    self.max_concurrency,
                    retry_deadline_seconds=self.retry_deadline_seconds,
                    ledger=KeyLedger.for_key(self.api_url, self.api_key),
                    request_floor=self.request_budget_floor,
                    requests_per_call=self.request_budget_factor,
                )
            return self._budget

    def cancel(self) -> None:
        """Cancel the sync: every client of this instance (and of its shared budget) stops at once
        with ``SyncCancelled``, waits included."""
        self.get_budget().cancel()

    def get_client(self, *, retry_deadline_seconds: float | None = None) -> VisibilityClient:
        """A new client (use it in a ``with`` block); settings are validated before any request.

        ``retry_deadline_seconds`` shortens each call's retry deadline (and the timeout with it) for
        callers that must stay short, such as sensor ticks; the outage clock shared through the
        budget still counts against the resource's own ``retry_deadline_seconds``.
        """
        self.validate_settings()
        deadline = self.retry_deadline_seconds if retry_deadline_seconds is None else retry_deadline_seconds
        budget = self.get_budget()
        return VisibilityClient(
            self.api_url,
            self.api_key,
            max_concurrency=self.max_concurrency,
            timeout_seconds=min(self.timeout_seconds, deadline),
            retry_deadline_seconds=deadline,
            backoff_base_seconds=self.backoff_base_seconds,
            budget=budget,
        )
