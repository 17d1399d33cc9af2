"""The ``api`` and ``warehouse`` resources built from the settings.

Kept apart from :mod:`pipelines.definitions` so the command line can build them without loading the
whole code location (schedules, sensors and their ``VISIBILITY_AUDIT_*`` settings, which a sync
does not use and whose mistakes must not stop it).
"""

from __future__ import annotations

import os
from typing import Any

from dagster import EnvVar

from pipelines.config import Settings
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.resource import WarehouseResource


def _from_env(name: str, value: str | None) -> Any:
    """An ``EnvVar`` when the value came from the environment, so the UI shows the name, not a
    URL that may hold a password; the plain value otherwise (tests, the demo)."""
    return EnvVar(name) if value is None or os.environ.get(name, "").strip() == value else value


def build_resources(settings: Settings) -> dict[str, Any]:
    """``api`` and ``warehouse`` from the settings; the key is an EnvVar, resolved only inside runs."""
    return {
        "api": VisibilityAPIResource(
            api_url=_from_env("VISIBILITY_API_URL", settings.api_url),
            api_key=EnvVar("VISIBILITY_API_KEY"),
            retry_deadline_seconds=settings.retry_deadline_seconds,
        ),
        "warehouse": WarehouseResource(
            url=_from_env("VISIBILITY_WAREHOUSE", settings.warehouse_url),
            schema_name=settings.schema_name,
            duckdb_landing_memory_limit=settings.duckdb_memory_limit,
        ),
    }
