"""A table added in one place: one catalog entry (its spec, endpoint, planner by shape, fetch and
transform) is all a new read endpoint needs to become a landed, checked table.

The table here exists only in this test: ``answer_positions``, a projection of the answer list
(``GET /v1/brands/{id}/answers``) that the sandbox serves. It is declared below and nowhere else;
the test adds its entry to the catalog, builds the Dagster definitions with the factory the
shipped tables use, materializes it with real Dagster against the real sandbox into a real DuckDB
file, and compares the landed rows with what the sandbox serves for those cells.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from dagster import AssetCheckKey, AssetKey, DagsterInstance, Definitions, materialize

from assets.builders import build_partitioned_assets
from assets.checks import checks_of
from assets.daily import daily_assets
from assets.partitions import DAILY_PARTITIONS
from assets.snapshots import snapshot_assets
from pipelines.dbt_sources import render as render_dbt_sources
from pipelines.schedules import range_tags
from resources.api.client import VisibilityClient
from resources.api.endpoints import MAX_LIMIT_ANSWERS, Endpoint
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.contract import Column, TableSpec
from resources.warehouse.resource import WarehouseResource
from sandbox.testing import SandboxHandle
from sync import catalog, tables, transforms
from sync.dictionary import render as render_dictionary
from sync.facts import paged_rows, pages_of
from sync.fetching import PartitionedTable
from sync.planning import paged_per_brand
from sync.progress import NO_PROGRESS

# --- the whole declaration of the new table: its entry and its transform ---------------------------

#: The read endpoint, as this table reads it: the answer list, validated for the fields it lands.
ANSWER_LIST = Endpoint(
    "GET",
    "/v1/brands/{id}/answers",
    {"id": "string", "engine": "string", "checked_on": "string"},
    rows=True,
    typed={"prompt_id": "string", "brand_position": "integer"},
    engine_rows=True,
)
FIELDS = ("id", "prompt_id", "engine", "checked_on", "brand_position")
ANSWER_POSITIONS_SPEC = TableSpec(
    name="answer_positions",
    description="Where each answer named the brand (a projection of GET /v1/brands/{id}/answers). "
    "Partitioned by checked_on and engine. Declared by a test only.",
    columns=(
        Column("id", tables.STRING, "Answer id (uuid).", nullable=False),
        Column("brand_id", tables.STRING, "Brand (uuid) the row was fetched for.", nullable=False),
        Column("prompt_id", tables.STRING, "Prompt (uuid) the answer responds to."),
        Column("engine", tables.STRING, "Answer engine.", nullable=False),
        Column("checked_on", tables.DATE, "Day the prompt was run on the engine.", nullable=False),
        Column("brand_position", tables.INT, "Position of the brand in the answer; null when not named."),
    ),
    key=("id",),
    kind="partitioned",
    date_column="checked_on",
)


def answer_positions_table(rows: Iterable[Mapping[str, Any]], brand_id: str) -> pa.Table:
    """The transform: the declared fields of each answer, and the brand it was fetched for."""
    projected = [{name: row.get(name) for name in FIELDS} for row in rows]
    return transforms.rows_to_table(ANSWER_POSITIONS_SPEC, projected, {"brand_id": brand_id})


ANSWER_POSITIONS = PartitionedTable(
    spec=ANSWER_POSITIONS_SPEC,
    endpoints=(ANSWER_LIST,),
    planner=paged_per_brand(ANSWER_LIST),
    fetch_one=paged_rows(pages_of(ANSWER_LIST, limit=MAX_LIMIT_ANSWERS), answer_positions_table),
    with_rollup=False,
    upstream="brands",
)

# --------------------------------------------------------------------------------------------------

NAME = ANSWER_POSITIONS_SPEC.name
KEY = AssetKey(NAME)
DAYS = (dt.date(2026, 10, 20), dt.date(2026, 10, 21))
ENGINES = ("chatgpt", "claude")
SCHEMA = "visibility"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@pytest.fixture
def in_catalog(monkeypatch: pytest.MonkeyPatch) -> PartitionedTable:
    """The entry added to the catalog, as a line in ``sync/catalog.py`` would add it."""
    monkeypatch.setitem(catalog.BY_NAME, NAME, ANSWER_POSITIONS)
    return ANSWER_POSITIONS


def test_everything_else_is_derived_from_the_entry(in_catalog: PartitionedTable) -> None:
    assert catalog.ALL_TABLES[NAME] is ANSWER_POSITIONS_SPEC
    assert catalog.group_of(NAME) == catalog.DAILY_GROUP
    assert catalog.source_endpoint(NAME) == ANSWER_LIST.key
    assert [c.name for c in checks_of([NAME])] == ["keys_unique"]
    assert f"name: {NAME}" in render_dbt_sources(list(catalog.ALL_TABLES.values()))
    assert f"### `{NAME}`" in render_dictionary(list(catalog.ALL_TABLES.values()))
    cells = {(day, engine) for day in DAYS for engine in ENGINES}
    plan = ANSWER_POSITIONS.planner(cells, [], ANSWER_POSITIONS.engine_order)
    assert plan.cells == frozenset(cells) and not plan.calls  # no brand: nothing to ask


def test_a_plain_row_endpoint_needs_no_transform_of_its_own() -> None:
    """``transforms.brand_rows(spec, fields)`` is this table's transform, with no code."""
    rows = [
        {"id": "a1", "prompt_id": "p1", "engine": "claude", "checked_on": "2026-10-20", "brand_position": 2},
        {"id": "a2", "prompt_id": "p1", "engine": "claude", "checked_on": "2026-10-20", "mention_count": 3},
    ]
    generic = transforms.brand_rows(ANSWER_POSITIONS_SPEC, FIELDS)(rows, "b1")
    assert generic.equals(answer_positions_table(rows, "b1"))
    assert generic.column_names == [c.name for c in ANSWER_POSITIONS_SPEC.columns]


def test_without_its_entry_the_table_is_nowhere() -> None:
    assert NAME not in catalog.ALL_TABLES
    assert checks_of([NAME]) == []


def served_rows(sandbox: SandboxHandle) -> set[tuple[Any, ...]]:
    """What the sandbox serves for the run's cells, read with the client's own answer listing."""
    rows: set[tuple[Any, ...]] = set()
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        for brand in client.list_brands():
            for engine in ENGINES:
                if engine not in brand["engines"]:
                    continue
                for row in client.list_answers(
                    brand["id"], engine=engine, start=DAYS[0], end=DAYS[-1] + dt.timedelta(days=1)
                ):
                    rows.add(
                        (
                            row["id"],
                            brand["id"],
                            row.get("prompt_id"),
                            row["engine"],
                            dt.date.fromisoformat(row["checked_on"][:10]),
                            row.get("brand_position"),
                        )
                    )
    return rows


def test_the_test_only_table_lands_what_the_sandbox_serves_and_is_checked(
    in_catalog: PartitionedTable, sandbox: SandboxHandle, tmp_path: Path
) -> None:
    step = build_partitioned_assets(
        "sync_answer_positions",
        (in_catalog,),
        partitions_def=DAILY_PARTITIONS,
        group_name=catalog.group_of(NAME),
        description="The test-only table.",
    )
    db = tmp_path / "wh.duckdb"
    resources = {
        "api": VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"]),
        "warehouse": WarehouseResource(url=f"duckdb:///{db}", schema_name=SCHEMA),
        "progress": NO_PROGRESS,
    }
    defs = Definitions(assets=[*snapshot_assets, *daily_assets, step], resources=resources)
    graph = defs.resolve_asset_graph()
    assert graph.get(KEY).group_name == catalog.DAILY_GROUP
    assert AssetCheckKey(KEY, "keys_unique") in graph.asset_check_keys

    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [step],
            selection=[KEY],
            instance=instance,
            resources=resources,
            tags=range_tags(DAYS[0], DAYS[-1], ENGINES),
            run_config=QUIET,
        )
        assert result.success
        materialized = instance.get_materialized_partitions(KEY)

    expected = served_rows(sandbox)
    assert expected, "the sandbox serves answers on those days"
    with duckdb.connect(str(db), read_only=True) as con:
        landed = set(
            con.execute(
                f"SELECT id, brand_id, prompt_id, engine, checked_on, brand_position FROM {SCHEMA}.{NAME}"
            ).fetchall()
        )
    assert landed == expected
    assert materialized == {f"{day.isoformat()}|{engine}" for day in DAYS for engine in ENGINES}

    evaluations = {(e.asset_key, e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert evaluations == {(KEY, "keys_unique"): True}
