"""The Dagster face of the API client: the only module of ``resources/api`` that imports Dagster."""

from __future__ import annotations

import dagster as dg

from resources.api.access import ApiAccess


class VisibilityAPIResource(dg.ConfigurableResource, ApiAccess):
    """The AI-search visibility service the sync reads: its URL and key (VISIBILITY_API_URL,
    VISIBILITY_API_KEY; the key is never logged or stored), how hard the sync may press it and the
    pages and topics it trends. The defaults suit every key: the sync slows down by itself when the
    service asks it to."""

    # Each run and sensor tick builds its own instance from the configuration, so its own budget; an
    # instance handed to Dagster as is (``hardcoded_resource``, the command line) keeps one for all its
    # runs.
