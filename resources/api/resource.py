"""The Dagster face of the API client: the only module of ``resources/api`` that imports Dagster."""

from __future__ import annotations

import threading

import dagster as dg
from pydantic import PrivateAttr

from resources.api.access import ApiAccess
from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient


class VisibilityAPIResource(dg.ConfigurableResource, ApiAccess):
    """The AI-search visibility service the sync reads: its URL and key (VISIBILITY_API_URL,
    VISIBILITY_API_KEY; the key is never logged or stored), how hard the sync may press it and the
    pages and topics it trends. The defaults suit every key: the sync slows down by itself when the
    service asks it to."""

    # Every client of one instance shares its budget (outage clock, cancel switch, wait hook, request
    # allowance). Dagster gives each run and sensor tick its own copy, set up without one; an instance
    # handed to Dagster as is (``hardcoded_resource``, the command line) keeps one for all its runs.

    _budget: RequestBudget | None = PrivateAttr(default=None)
    _budget_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """The run (or sensor tick) this copy serves starts with no budget; its first client makes
        the run's one. (No teardown: ``build_sensor_context`` callers would have to enter it.)"""
        with self._budget_lock:
            self._budget = None

    def get_budget(self) -> RequestBudget:
        """The budget every client of this instance shares, made on first use."""
        with self._budget_lock:
            if self._budget is None:
                self._budget = self.new_budget()
            return self._budget

    def share_budget(self, budget: RequestBudget) -> None:
        """Use ``budget``, made before this resource (:class:`resources.api.access.SyncApi`), so the
        command line's early fetches and its runs share one. Only for an instance used as is."""
        with self._budget_lock:
            if self._budget is not None and self._budget is not budget:
                raise RuntimeError("this api resource already has a budget of its own")
            self._budget = budget

    def cancel(self) -> None:
        """Cancel the sync: every client of this budget stops at once with ``SyncCancelled``."""
        self.get_budget().cancel()

    def get_client(self, *, retry_deadline_seconds: float | None = None) -> VisibilityClient:
        """A new client on this instance's budget (use it in a ``with`` block); a shorter
        ``retry_deadline_seconds`` is for callers that must stay short, such as sensor ticks."""
        return self.client(self.get_budget(), retry_deadline_seconds=retry_deadline_seconds)
