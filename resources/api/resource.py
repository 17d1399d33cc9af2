"""The Dagster face of the API client: the only module of ``resources/api`` that imports Dagster."""

from __future__ import annotations

import threading
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from resources.api.access import ApiAccess
from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient
from resources.api.config import (
    DEFAULT_MAX_NEW_COLUMNS,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_FLOOR,
    DEFAULT_REQUESTS_PER_CALL,
    DEFAULT_RETRY_DEADLINE_SECONDS,
)

_HIDDEN = "[hidden]"


class VisibilityAPIResource(dg.ConfigurableResource):
    """The AI-search visibility service the sync reads: its URL and key (VISIBILITY_API_URL,
    VISIBILITY_API_KEY; the key is never logged or stored) and how hard the sync may press it. The
    defaults suit every key: the sync slows down by itself when the service asks it to."""

    # For developers: ``get_client()`` opens a client for one asset or sync.
    #
    # Every client of one resource instance shares its request budget, so what one asset learnt about
    # the limits holds for the next. Dagster gives each run (and each sensor tick) its own copy of a
    # configured resource, set up with no budget of its own yet: one budget per run. A
    # process that runs several runs of one sync (the command line) hands Dagster one instance as is
    # (``ResourceDefinition.hardcoded_resource``, pipelines/resources.py): Dagster neither copies nor
    # sets it up, so its runs share its one budget. That budget is also the sync's retry deadline (one
    # outage clock for every client: once the service has failed for ``retry_deadline_seconds``,
    # every further call fails at once), its cancel switch (``cancel()``), its wait hook
    # (``get_budget().on_wait``) and its request allowance. Counters stay per client, so each asset
    # reports its own requests. In a code location pass the key as ``EnvVar("VISIBILITY_API_KEY")``
    # so it stays out of code and run config; Dagster shows an ``EnvVar`` by name but holds the
    # resolved value inside a run, so this class also masks the key in its own ``repr``/``str``.

    api_url: str = Field(
        description="Base URL of the service (VISIBILITY_API_URL); https:// unless the host is loopback."
    )
    api_key: str = Field(
        description="Bearer key (VISIBILITY_API_KEY), read from the environment; never logged or stored."
    )
    max_concurrency: int = Field(
        default=ApiAccess.max_concurrency,
        description="Most requests in flight; lowered at run time on concurrency_limited.",
    )
    timeout_seconds: float = Field(
        default=ApiAccess.timeout_seconds, description="Timeout of one HTTP exchange."
    )
    retry_deadline_seconds: float = Field(
        default=DEFAULT_RETRY_DEADLINE_SECONDS,
        description="VISIBILITY_RETRY_DEADLINE_SECONDS: how long the sync keeps retrying an unreachable "
        "service (transport faults, 5xx), counted from the first failure and shared by every client "
        "of this resource; also how long one call waits out 429s.",
    )
    backoff_base_seconds: float = Field(
        default=ApiAccess.backoff_base_seconds,
        description="First backoff step of the jittered exponential backoff.",
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

    max_response_bytes: int = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        description="VISIBILITY_MAX_RESPONSE_BYTES: the largest body of one answer read, raw or "
        "decoded; a larger one fails its table.",
    )
    max_new_columns: int = Field(
        default=DEFAULT_MAX_NEW_COLUMNS,
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

    _budget: RequestBudget | None = PrivateAttr(default=None)
    _budget_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, (_HIDDEN if name == "api_key" else value)

    def access(self) -> ApiAccess:
        """The Dagster-free description of this resource's clients (:mod:`resources.api.access`)."""
        return ApiAccess(
            api_url=self.api_url,
            api_key=self.api_key,
            max_concurrency=self.max_concurrency,
            timeout_seconds=self.timeout_seconds,
            retry_deadline_seconds=self.retry_deadline_seconds,
            backoff_base_seconds=self.backoff_base_seconds,
            request_budget_floor=self.request_budget_floor,
            request_budget_factor=self.request_budget_factor,
            max_response_bytes=self.max_response_bytes,
            max_new_columns=self.max_new_columns,
        )

    def validate_settings(self) -> None:
        """Raise ``ConfigurationError`` naming the setting (VISIBILITY_API_URL/KEY/RETRY_DEADLINE_SECONDS)
        when it is wrong."""
        self.access().validate()

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """The run (or sensor tick) this copy of the resource serves starts with no budget; its first
        client makes the run's one, which goes with the copy.

        No ``teardown_after_execution``: there is nothing to release before the process exits,
        and it would make the resource one that ``build_sensor_context`` callers must enter.
        """
        with self._budget_lock:
            self._budget = None

    def get_budget(self) -> RequestBudget:
        """The budget every client of this instance shares: the sync's outage clock, cancel switch
        (``cancel()``), wait hook (``on_wait``) and request allowance.

        Made on first use: once per run for Dagster's per-run copy (``setup_for_execution``), once
        for an instance used as is (the command line's, a script's), which keeps it as long as it
        lives.
        """
        with self._budget_lock:
            if self._budget is None:
                self._budget = self.access().new_budget()
            return self._budget

    def share_budget(self, budget: RequestBudget) -> None:
        """Use ``budget``, made before this resource (:class:`resources.api.access.SyncApi`): the
        command line's fetches that start while Dagster imports, and its runs, share one budget.
        Only for an instance used as is (Dagster gives each run's copy a budget of its own)."""
        with self._budget_lock:
            if self._budget is not None and self._budget is not budget:
                raise RuntimeError("this api resource already has a budget of its own")
            self._budget = budget

    def cancel(self) -> None:
        """Cancel the sync: every client of this instance's budget stops at once with
        ``SyncCancelled``, waits included."""
        self.get_budget().cancel()

    def get_client(self, *, retry_deadline_seconds: float | None = None) -> VisibilityClient:
        """A new client (use it in a ``with`` block); settings are validated before any request.

        ``retry_deadline_seconds`` shortens each call's retry deadline (and the timeout with it) for
        callers that must stay short, such as sensor ticks; the outage clock shared through the
        budget still counts against the resource's own ``retry_deadline_seconds``.
        """
        return self.access().client(self.get_budget(), retry_deadline_seconds=retry_deadline_seconds)
