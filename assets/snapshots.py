"""The snapshot tables as assets, synced by one step: ``sync_snapshots`` (tables: :mod:`sync.catalog`)."""

from __future__ import annotations

from dagster import AssetsDefinition

from assets.builders import build_snapshot_assets
from sync.catalog import SNAPSHOT_GROUP, SNAPSHOTS

sync_snapshots = build_snapshot_assets("sync_snapshots", SNAPSHOTS, group_name=SNAPSHOT_GROUP)

snapshot_assets: list[AssetsDefinition] = [sync_snapshots]
