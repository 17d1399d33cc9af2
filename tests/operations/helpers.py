"""Helpers of the operation tests."""

from __future__ import annotations

from typing import Any

from resources.api.client import VisibilityClient
from sandbox.testing import SandboxHandle


def changes(world: SandboxHandle) -> dict[str, dict[str, int]]:
    """Requests the sandbox served that were not reads (GET), by endpoint and status."""
    return {
        endpoint: statuses for endpoint, statuses in world.stats().items() if not endpoint.startswith("GET ")
    }


def first_brand(client: VisibilityClient) -> dict[str, Any]:
    return next(iter(client.list_brands()))


def tracked_names(client: VisibilityClient, brand_id: str) -> list[str]:
    return [row["brand_name"] for row in client.list_tracked_competitors(brand_id)]


def topic_names(client: VisibilityClient, brand_id: str) -> list[str]:
    return [row["name"] for row in client.list_topics(brand_id)]
