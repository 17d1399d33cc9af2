"""A first run in the UI with no warning to look up: no instance settings where `dagster dev` starts
(it warns about a dagster.yaml that is not DAGSTER_HOME's), and no "upstream assets not materialized"
prompt when the daily group is backfilled (its tables declare no upstream outside it)."""

from __future__ import annotations

from dagster import AssetKey

from pipelines.definitions import defs
from sync import catalog
from tests.doc_blocks import ROOT, doc_block


def test_the_readmes_dagster_home_holds_the_instance_settings_and_the_root_holds_none() -> None:
    block = doc_block("README.md", "export DAGSTER_HOME=")
    export = block.lines()[0].split("#")[0].split()
    assert export[:1] == ["export"] and export[1].startswith("DAGSTER_HOME=$PWD/")
    home = ROOT / export[1].removeprefix("DAGSTER_HOME=$PWD/")
    assert (home / "dagster.yaml").is_file()
    assert not (ROOT / "dagster.yaml").exists() and not (ROOT / "dagster.yml").exists()
    assert "dagster dev -w workspace.yaml" in block.text  # started from the root, where the check runs


def test_a_daily_group_backfill_has_nothing_upstream_outside_the_group() -> None:
    graph = defs.resolve_asset_graph()
    daily = {t.spec.name for t in catalog.DAILY}
    for name in daily:
        parents = {key.path[-1] for key in graph.get(AssetKey(name)).parent_keys}
        assert parents <= daily, f"{name} depends on {sorted(parents - daily)}"

