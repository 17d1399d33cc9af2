"""The catalog's tables are the assets of the jobs of their group."""

from __future__ import annotations

from dagster import AssetKey

from pipelines.definitions import defs
from pipelines.jobs import DAILY_JOB, SNAPSHOT_JOB, SYNC_JOB
from sync import catalog


def _job_assets(name: str) -> set[str]:
    job = defs.resolve_job_def(name)
    return {key.to_user_string() for key in job.asset_layer.selected_asset_keys}


def test_every_catalog_table_is_an_asset_in_the_jobs_of_its_group() -> None:
    snapshots = {t.spec.name for t in catalog.SNAPSHOTS}
    daily = {t.spec.name for t in catalog.DAILY}
    graph = defs.resolve_asset_graph()
    for name in snapshots | daily:
        node = graph.get(AssetKey(name))
        assert node.group_name == (catalog.SNAPSHOT_GROUP if name in snapshots else catalog.DAILY_GROUP)
    assert _job_assets(SNAPSHOT_JOB) == snapshots
    assert _job_assets(DAILY_JOB) == daily
    assert _job_assets(SYNC_JOB) == snapshots | daily


def test_every_entrys_declared_checks_exist() -> None:
    from assets.checks import DECLARED_CHECKS, checks_of

    for name, entry in catalog.BY_NAME.items():
        assert set(entry.checks) <= set(DECLARED_CHECKS), name
        assert [c.name for c in checks_of([name])] == ["keys_unique", *entry.checks]


def test_an_entry_checked_for_empty_partitions_names_its_evidence() -> None:
    from resources.warehouse.queries import EXPECTED_CELLS

    checked = [e for e in catalog.DAILY if "no_empty_partitions" in e.checks]
    assert checked, "the shipped catalog checks some table for empty partitions"
    for entry in checked:
        assert entry.evidence in EXPECTED_CELLS, entry.spec.name
