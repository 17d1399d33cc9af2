"""What a sync is: the assets, checks and jobs a sync runs, bound to their resources.

``visibility-sync run`` executes these definitions' jobs; the code location adds schedules, sensors
and audits, whose ``VISIBILITY_AUDIT_*`` settings must not stop a sync.
"""

from __future__ import annotations

from collections.abc import Sequence

from dagster import AssetsDefinition, AssetSpec, Definitions, map_asset_specs

from assets.builders import daily_assets, snapshot_assets
from pipelines.downstream import for_downstream
from pipelines.jobs import DEFAULT_EXECUTOR, all_jobs
from pipelines.resources import build_resources
from resources.warehouse.urls import WAREHOUSE_KINDS, warehouse_kind
from settings import Settings
from sync.catalog import ALL_TABLES

all_assets = [*snapshot_assets, *daily_assets]


def with_warehouse_kind(
    assets: Sequence[AssetsDefinition | AssetSpec], settings: Settings
) -> list[AssetsDefinition | AssetSpec]:
    """The assets, each landed table's kinds naming the settings' warehouse (``duckdb``, ``postgres``
    or ``bigquery``) in place of whatever warehouse it was declared with."""
    kind = warehouse_kind(settings.warehouse_url)

    def name_warehouse(spec: AssetSpec) -> AssetSpec:
        if spec.key.path[-1] not in ALL_TABLES:
            return spec
        return spec.replace_attributes(kinds=(set(spec.kinds) - WAREHOUSE_KINDS) | {kind})

    return list(map_asset_specs(name_warehouse, assets))


def sync_definitions(settings: Settings) -> Definitions:
    """The syncs' assets (loadable by users' own assets, of the settings' warehouse kind), checks and
    jobs, with the settings' resources."""
    return Definitions(
        assets=with_warehouse_kind(for_downstream(all_assets, settings), settings),
        jobs=all_jobs,
        resources=build_resources(settings),
        executor=DEFAULT_EXECUTOR,
    )
