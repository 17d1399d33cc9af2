"""The resources of a sync, from the :class:`~settings.Settings`: for the code location, secrets as
``EnvVar`` (Dagster stores configured values in each run's snapshot); for the runs a command executes
itself, the objects as hardcoded resources (nothing stored; one ``api`` object, one request budget).
Apart from :mod:`pipelines.definitions`: a bad ``VISIBILITY_AUDIT_*`` must not stop a sync.
"""

from __future__ import annotations

from typing import Any

from dagster import EnvVar, IOManagerDefinition, ResourceDefinition

from pipelines.downstream import LANDED_TABLES_IO_MANAGER, downstream_resources
from resources.api.config import KEY_SETTING
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.contract import WAREHOUSE_SETTING
from resources.warehouse.io_manager import LandedTablesIOManager
from resources.warehouse.resource import WarehouseResource
from resources.warehouse.urls import redact_url
from settings import Settings
from sync.head_start import SyncSession
from sync.progress import NO_PROGRESS, Listener

#: The resource key of the sync's progress listener (:data:`sync.progress.Listener`).
PROGRESS_RESOURCE = "progress"
#: The resource key of what the runs of a sync share (:class:`sync.head_start.SyncSession`).
SESSION_RESOURCE = "sync_session"


def _progress_resource(progress: Listener) -> ResourceDefinition:
    return ResourceDefinition.hardcoded_resource(
        progress, "How far each table's fetch got, for the command line's display (elsewhere: nowhere)."
    )


def session_per_run() -> ResourceDefinition:
    """A new :class:`SyncSession` for each run: its steps share their listings, and nothing more."""
    return ResourceDefinition(lambda _: SyncSession(), description=SyncSession.__doc__)


def _warehouse(settings: Settings, url: str | EnvVar) -> WarehouseResource:
    return WarehouseResource(
        url=url, schema_name=settings.schema_name, duckdb_landing_memory_limit=settings.duckdb_memory_limit
    )


def build_resources(settings: Settings) -> dict[str, Any]:
    """The code location's resources, secrets as ``EnvVar``. Without an API URL or key, ``api`` holds none:
    a sensor tick skips and a run fails before its first request, each naming the missing variable.
    """
    url = settings.warehouse_url
    warehouse = _warehouse(settings, EnvVar(WAREHOUSE_SETTING) if redact_url(url) != url else url)
    api = VisibilityAPIResource(
        api_url=settings.api_url or "",  # no secret in an API URL (validated)
        api_key="" if settings.api_key is None else EnvVar(KEY_SETTING),
        **settings.api_values(),
    )
    return {
        "api": api,
        "warehouse": warehouse,
        PROGRESS_RESOURCE: _progress_resource(NO_PROGRESS),
        SESSION_RESOURCE: session_per_run(),
        # users' own assets read the landed tables through these (pipelines/downstream.py)
        **downstream_resources(settings, warehouse),
    }


def api_resource(settings: Settings) -> VisibilityAPIResource:
    """The ``api`` resource with the settings' own URL and key (ConfigError naming a missing one)."""
    return VisibilityAPIResource(**dict(settings.api_access()))


def process_resources(
    settings: Settings,
    api: VisibilityAPIResource,
    progress: Listener = NO_PROGRESS,
    session: SyncSession | None = None,
) -> dict[str, ResourceDefinition]:
    """The resources of the runs this process executes itself, secrets held by the objects; give them
    to ``execute_in_process(resources=...)``. Every run given ``api`` shares its budget; every run
    given ``session`` its listings and head start (None: one per run)."""
    warehouse = _warehouse(settings, settings.warehouse_url)
    return {
        "api": ResourceDefinition.hardcoded_resource(api, VisibilityAPIResource.__doc__),
        "warehouse": ResourceDefinition.hardcoded_resource(warehouse, WarehouseResource.__doc__),
        PROGRESS_RESOURCE: _progress_resource(progress),
        SESSION_RESOURCE: (
            session_per_run()
            if session is None
            else ResourceDefinition.hardcoded_resource(session, SyncSession.__doc__)
        ),
        LANDED_TABLES_IO_MANAGER: IOManagerDefinition.hardcoded_io_manager(
            LandedTablesIOManager(warehouse=warehouse), LandedTablesIOManager.__doc__
        ),
    }
