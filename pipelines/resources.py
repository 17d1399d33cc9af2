"""The ``api`` and ``warehouse`` resources built from the :class:`~settings.Settings`.

Every value comes from the validated settings except the secrets: Dagster stores a resource's
configured values in each run's job snapshot (its instance storage), so a key or a password given
as a plain string would be written there. Secrets are therefore passed as ``EnvVar``, which Dagster
stores by name and resolves from ``os.environ`` only inside the run: the API key always, the
warehouse URL when it holds a password. A run resolves them from the environment the settings were
read from; when the settings came from elsewhere (the demo's sandbox key, a test's mapping),
:func:`secrets_for_runs` puts them there for the runs of this process, and takes them out again.

Kept apart from :mod:`pipelines.definitions` so the command line can build them without loading the
whole code location (schedules, sensors and their ``VISIBILITY_AUDIT_*`` settings, which a sync
does not use and whose mistakes must not stop it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from dagster import EnvVar

from pipelines.downstream import downstream_resources
from resources.api.config import KEY_SETTING, URL_SETTING
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.contract import WAREHOUSE_SETTING
from resources.warehouse.resource import WarehouseResource
from settings import Settings


def _holds_password(url: str) -> bool:
    try:
        return urlsplit(url).password is not None
    except ValueError:
        return True  # unparseable: treat as secret


def run_secrets(settings: Settings) -> dict[str, str]:
    """The secrets the runs read through ``EnvVar``: variable -> value (never log it)."""
    secrets = {}
    if settings.api_key is not None:
        secrets[KEY_SETTING] = settings.api_key.get_secret_value()
    if _holds_password(settings.warehouse_url):
        secrets[WAREHOUSE_SETTING] = settings.warehouse_url
    return secrets


def build_resources(settings: Settings) -> dict[str, Any]:
    """``api``, ``warehouse`` and the landed tables' IO manager (and ``duckdb`` on DuckDB) from the
    settings; secrets as ``EnvVar`` (module docstring)."""
    warehouse_url = settings.warehouse_url
    warehouse = WarehouseResource(
        url=EnvVar(WAREHOUSE_SETTING) if _holds_password(warehouse_url) else warehouse_url,
        schema_name=settings.schema_name,
        duckdb_landing_memory_limit=settings.duckdb_memory_limit,
    )
    return {
        "api": VisibilityAPIResource(
            # no secret in an API URL (validated); unset: the run fails naming the variable
            api_url=settings.api_url or EnvVar(URL_SETTING),
            api_key=EnvVar(KEY_SETTING),
            retry_deadline_seconds=settings.retry_deadline_seconds,
            request_budget_floor=settings.request_budget_floor,
            request_budget_factor=settings.request_budget_factor,
        ),
        "warehouse": warehouse,
        # users' own assets read the landed tables through these (pipelines/downstream.py)
        **downstream_resources(settings, warehouse),
    }


@contextmanager
def secrets_for_runs(settings: Settings) -> Iterator[None]:
    """Runs in this process resolve the settings' secrets, then the environment is as it was.

    Needed when the settings were not read from ``os.environ`` (the demo), since ``EnvVar`` reads
    nothing else; when they were, it writes the values already there. Not thread-safe: for a
    command's own process.
    """
    secrets = run_secrets(settings)
    before = {name: os.environ.get(name) for name in secrets}
    os.environ.update(secrets)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
