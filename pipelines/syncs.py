"""What a sync is: the assets, checks and jobs a sync runs, bound to their resources.

``visibility-sync run`` executes these definitions' jobs; the code location
(:mod:`pipelines.definitions`) is the same plus schedules, sensors and audits. Kept apart so the
command line runs the very jobs the UI and the schedule run without loading the sensors'
``VISIBILITY_AUDIT_*`` settings, whose mistakes must not stop a sync.
"""

from __future__ import annotations

from dagster import Definitions

from assets.checks import with_freshness_policies
from assets.daily import daily_assets
from assets.snapshots import snapshot_assets
from pipelines.downstream import for_downstream
from pipelines.jobs import DEFAULT_EXECUTOR, all_jobs
from pipelines.resources import build_resources
from settings import Settings, load_citation_target_settings

all_assets = [*snapshot_assets, *daily_assets]


def sync_definitions(settings: Settings) -> Definitions:
    """The syncs' assets (with freshness policies, loadable by users' own assets), checks and jobs,
    with the settings' resources. A bad ``VISIBILITY_CITATION_*`` stops here, before any request."""
    load_citation_target_settings()
    return Definitions(
        assets=for_downstream(with_freshness_policies(all_assets), settings),
        jobs=all_jobs,
        resources=build_resources(settings),
        executor=DEFAULT_EXECUTOR,
    )
