"""dbt/visibility_sources.yml: what the specs render, and what a warehouse the writers built holds."""

from __future__ import annotations

from pathlib import Path

import yaml

from assets.checks import DAILY_FRESHNESS
from pipelines.dbt_sources import COMMAND, render
from resources.warehouse.duckdb import DuckDBWarehouse
from sync.catalog import ALL_TABLES

SOURCES = Path(__file__).resolve().parents[2] / "dbt" / "visibility_sources.yml"


def source_tables() -> dict[str, dict]:
    [source] = yaml.safe_load(SOURCES.read_text())["sources"]
    return {t["name"]: t for t in source["tables"]}


def test_the_dbt_sources_file_is_what_the_specs_render() -> None:
    assert SOURCES.read_text() == render(list(ALL_TABLES.values())), f"dbt sources are stale: run `{COMMAND}`"


def test_daily_tables_carry_the_dagster_freshness_policy_and_key_columns_are_not_null() -> None:
    tables = source_tables()
    warn = DAILY_FRESHNESS.warn_window.days * 24 + DAILY_FRESHNESS.warn_window.seconds // 3600
    fail = DAILY_FRESHNESS.fail_window.days * 24 + DAILY_FRESHNESS.fail_window.seconds // 3600
    for spec in ALL_TABLES.values():
        table = tables[spec.name]
        if spec.kind == "partitioned":
            assert table["loaded_at_field"] == "_loaded_at"
            assert table["freshness"] == {
                "warn_after": {"count": warn, "period": "hour"},
                "error_after": {"count": fail, "period": "hour"},
            }
        else:
            assert "freshness" not in table
        tested = {c["name"] for c in table["columns"] if "not_null" in c.get("data_tests", ())}
        assert tested == set(spec.key)
    assert (warn, fail) == (26, 30)


def test_every_source_and_column_exists_in_a_warehouse_the_writers_built(tmp_path: Path) -> None:
    with DuckDBWarehouse(tmp_path / "visibility.duckdb", "visibility") as warehouse:
        for spec in ALL_TABLES.values():
            warehouse.ensure_table(spec)
        rows = warehouse.query(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'visibility'"
        ).to_pylist()
    built: dict[str, set[str]] = {}
    for r in rows:
        built.setdefault(r["table_name"], set()).add(r["column_name"])
    described = {name: {c["name"] for c in t["columns"]} for name, t in source_tables().items()}
    assert described == built
