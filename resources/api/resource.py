"""The Dagster face of the API client: the only module of ``resources/api`` that imports Dagster."""

from __future__ import annotations

import dagster as dg

from resources.api.access import ApiAccess


class VisibilityAPIResource(dg.ConfigurableResource, ApiAccess):
    """The AI-search visibility service the sync reads: its URL and key (VISIBILITY_API_URL,
    VISIBILITY_API_KEY; the key is never logged or stored), how hard the sync may press it and the
    pages and topics it trends. The defaults suit every key: the sync slows down by itself when the
    service asks it to."""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Dagster gives each run and sensor tick its own copy: it starts with no budget, and its first
        client makes the run's one. An instance handed to Dagster as is (``hardcoded_resource``, the
        command line) is not set up: it keeps one budget for all its runs."""
        with self._budget_lock:
            self._budget = None
