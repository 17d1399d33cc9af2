"""A first run in the UI with no warning to look up: DAGSTER_HOME is where `dagster dev` starts and
the project's dagster.yaml is (it warns about a dagster.yaml that is not DAGSTER_HOME's), and no
"upstream assets not materialized" prompt left unexplained when the daily group is backfilled (its
upstream is lineage only)."""

from __future__ import annotations

from dagster import AssetKey

from pipelines.definitions import defs
from sync import catalog
from tests.doc_blocks import ROOT, doc_block


def test_the_readmes_dagster_home_is_the_root_that_holds_the_instance_settings() -> None:
    """`dagster dev` warns about a dagster.yaml in its working folder unless that folder is
    DAGSTER_HOME: the README's DAGSTER_HOME is the root, where the project's dagster.yaml is."""
    block = doc_block("README.md", "export DAGSTER_HOME=")
    export = block.lines()[0].split("#")[0].split()
    assert export == ["export", "DAGSTER_HOME=$PWD"]
    assert (ROOT / "dagster.yaml").is_file()
    assert "dagster dev -w workspace.yaml" in block.text  # started from the root, where the check runs
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert {"/storage/", "/history/", "/schedules/"} <= set(ignored)  # the instance's storage: untracked


def test_each_daily_assets_upstream_outside_its_group_is_explained_on_the_asset() -> None:
    """Dagster's backfill dialog asks about upstream assets not materialized; the asset page says
    why that lineage does not hold a backfill back."""
    graph = defs.resolve_asset_graph()
    daily = {t.spec.name for t in catalog.DAILY}
    explained = 0
    for name in daily:
        node = graph.get(AssetKey(name))
        for parent in {key.path[-1] for key in node.parent_keys} - daily:
            assert f"Upstream `{parent}` is lineage only" in (node.description or ""), name
            explained += 1
    assert explained == len(daily)  # every daily table names the snapshot table it is listed from
