"""The date x engine tables as assets, synced by one step: ``sync_daily`` (tables: :mod:`sync.catalog`).

One step (one run per launch, one partitions definition) for every partitioned table, so the UI's
group "Materialize" picks one date range for all of them and a sync fetches them back to back with
one client, in the catalog's order.
"""

from __future__ import annotations

from dagster import AssetsDefinition

from assets.builders import DAILY_STEP, build_partitioned_assets
from assets.partitions import DAILY_PARTITIONS
from sync.catalog import DAILY, DAILY_GROUP

sync_daily = build_partitioned_assets(
    DAILY_STEP,
    DAILY,
    partitions_def=DAILY_PARTITIONS,
    group_name=DAILY_GROUP,
    description="Every date x engine table (engines plus the `all` rollup): fetched back to back, "
    "each landed while the next is fetched; of a backfill's runs, the first to reach a table fetches "
    "and lands it for all of them.",
)

daily_assets: list[AssetsDefinition] = [sync_daily]
