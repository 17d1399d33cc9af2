"""A table added in one place: one catalog entry (its spec, endpoint, planner by shape, fetch with a
standard transform, checks) is all a new read endpoint needs to become a landed, checked, documented
table.

The table here exists only in this test: ``answer_positions``, read from an endpoint the service does
not have, ``GET /v1/brands/{id}/answer-positions`` (where each answer named the brand), which the
test adds to a sandbox it starts. The entry is declared below and nowhere else; the test adds it to
the catalog's ``DAILY``, builds the ``sync_daily`` step from the catalog as ``assets/builders.py`` does,
materializes the table with real Dagster against that sandbox into a real DuckDB file, compares the
landed rows with what the route serves, sees its checks evaluated (and its ``no_empty_partitions``
fail when the route serves a day empty), and finds it in the data dictionary and the dbt sources.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dagster import (
    AssetCheckKey,
    AssetKey,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    materialize,
)
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from assets.builders import build_daily_step, snapshot_assets
from assets.checks import checks_of
from pipelines.dbt_sources import render as render_dbt_sources
from pipelines.resources import session_per_run
from pipelines.schedules import range_tags
from resources.api.client import VisibilityClient
from resources.api.endpoints import MAX_LIMIT_ANSWERS, Endpoint
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.contract import Column, TableSpec
from resources.warehouse.resource import WarehouseResource
from sandbox.app import create_app
from sandbox.auth import authenticate
from sandbox.config import SandboxConfig
from sandbox.instance import Sandbox
from sandbox.params import parse_engine, parse_limit, parse_window
from sandbox.testing import serve_in_thread
from sync import catalog, tables, transforms
from sync.dictionary import render as render_dictionary
from sync.facts import paged_rows, pages_of
from sync.fetching import PartitionedTable, naming_source
from sync.planning import paged_per_brand
from sync.progress import NO_PROGRESS

# --- the whole declaration of the new table: one catalog entry ------------------------------------

#: The read endpoint, as this table reads it: the fields validated in each row.
ANSWER_POSITIONS_API = Endpoint(
    "GET",
    "/v1/brands/{id}/answer-positions",
    {"id": "string", "engine": "string", "checked_on": "string"},
    rows=True,
    typed={"prompt_id": "string", "brand_position": "integer"},
    engine_rows=True,
)
FIELDS = ("id", "prompt_id", "engine", "checked_on", "brand_position")
ANSWER_POSITIONS_SPEC = TableSpec(
    name="answer_positions",
    description="Where each answer named the brand (GET /v1/brands/{id}/answer-positions). "
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
ANSWER_POSITIONS = PartitionedTable(
    spec=ANSWER_POSITIONS_SPEC,
    endpoints=(ANSWER_POSITIONS_API,),
    planner=paged_per_brand(ANSWER_POSITIONS_API),
    fetch_one=paged_rows(
        pages_of(ANSWER_POSITIONS_API, limit=MAX_LIMIT_ANSWERS),
        transforms.brand_rows(ANSWER_POSITIONS_SPEC, FIELDS),  # the standard transform
    ),
    upstream="brands",
    checks=("no_empty_partitions",),
    evidence="answered_responses",  # the days the service answered: the rule the answer list uses
)

# --------------------------------------------------------------------------------------------------

NAME = ANSWER_POSITIONS_SPEC.name
KEY = AssetKey(NAME)
EVIDENCE = AssetKey("competitor_trends")  # where "answered_responses" reads the days with answers
#: two recent days: the sandbox serves days before today, and no_empty_partitions checks recent ones
DAYS = tuple(dt.datetime.now(dt.UTC).date() - dt.timedelta(days=n) for n in (3, 2))
ENGINES = ("chatgpt", "claude")
SCHEMA = "visibility"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def answer_positions_route(sb: Sandbox, withheld: set[str]) -> Route:
    """The new endpoint in the sandbox: its answers, paged as the answer list is, with only
    ``FIELDS`` of each; none of a day in ``withheld`` (an endpoint that lost a day's rows)."""

    def handler(request: Request) -> Response:
        brand = sb.brand_for(authenticate(request.headers, sb.world), request.path_params["id"])
        q = request.query_params
        window = parse_window(q, sb.config.today)
        offset = sb.cursors.offset(request.url.path, q)
        page = sb.views.answers(brand, window, parse_engine(q), offset, parse_limit(q, MAX_LIMIT_ANSWERS))
        rows = [
            {n: row.get(n) for n in FIELDS} for row in page.rows if row["checked_on"][:10] not in withheld
        ]
        return sb.page_response(request, rows, page.has_more, page.next_offset)

    return Route(ANSWER_POSITIONS_API.template, handler, methods=["GET"])


@dataclass
class PositionsSandbox:
    """A sandbox serving the new endpoint beside the service's; ``withheld``: days it serves empty."""

    url: str
    key: str
    withheld: set[str] = field(default_factory=set)


@pytest.fixture(scope="module")
def positions_sandbox() -> Iterator[PositionsSandbox]:
    app = create_app(SandboxConfig())
    sb: Sandbox = app.state.sandbox
    withheld: set[str] = set()
    app.router.routes.insert(0, answer_positions_route(sb, withheld))
    with serve_in_thread(app, "sandbox") as url:
        yield PositionsSandbox(url, sb.world.keys_by_role["workspace"], withheld)


@pytest.fixture
def in_catalog(monkeypatch: pytest.MonkeyPatch) -> PartitionedTable:
    """The entry added to the catalog, as its line in ``sync/catalog.py``'s ``DAILY`` adds it."""
    monkeypatch.setattr(catalog, "DAILY", (*catalog.DAILY, ANSWER_POSITIONS))
    monkeypatch.setitem(catalog.BY_NAME, NAME, ANSWER_POSITIONS)
    monkeypatch.setitem(catalog.ALL_TABLES, NAME, ANSWER_POSITIONS_SPEC)
    return ANSWER_POSITIONS


def test_everything_else_is_derived_from_the_entry(in_catalog: PartitionedTable) -> None:
    assert catalog.ALL_TABLES[NAME] is ANSWER_POSITIONS_SPEC
    assert [c.name for c in checks_of([NAME])] == ["keys_unique", "no_empty_partitions"]
    assert f"name: {NAME}" in render_dbt_sources(list(catalog.ALL_TABLES.values()))
    dictionary = render_dictionary(list(catalog.ALL_TABLES.values()))
    assert f"### `{NAME}`" in dictionary and "Where each answer named the brand" in dictionary
    cells = {(day, engine) for day in DAYS for engine in ENGINES}
    plan = ANSWER_POSITIONS.planner(cells, [], ANSWER_POSITIONS.engine_order)
    assert plan.cells == frozenset(cells) and not plan.calls  # no brand: nothing to ask


def test_a_transform_error_names_the_entrys_endpoint(in_catalog: PartitionedTable) -> None:
    row = {"id": "a1", "prompt_id": "p1", "engine": "claude", "checked_on": "2026-10-20"}
    with pytest.raises(transforms.TransformError) as caught, naming_source(in_catalog):
        transforms.brand_rows(ANSWER_POSITIONS_SPEC, FIELDS)([{**row, "brand_position": "first"}], "b1")
    assert caught.value.endpoint == ANSWER_POSITIONS_API.key and ANSWER_POSITIONS_API.key in str(caught.value)


def test_without_its_entry_the_table_is_nowhere() -> None:
    assert NAME not in catalog.ALL_TABLES
    assert NAME not in {entry.spec.name for entry in catalog.DAILY}
    assert checks_of([NAME]) == []


def served_rows(url: str, key: str) -> set[tuple[Any, ...]]:
    """What the key's brands have in the service's answer list for the run's cells (the new route
    serves those answers), read with the client."""
    rows: set[tuple[Any, ...]] = set()
    with VisibilityClient(url, key) as client:
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


def sync_positions(served: PositionsSandbox, db: Path) -> tuple[ExecuteInProcessResult, set[str]]:
    """Materialize the table (and its evidence) in the ``sync_daily`` step built from the catalog, as
    assets/builders.py builds it; the run's result and the table's materialized partitions."""
    step = build_daily_step(catalog.DAILY)
    resources = {
        "api": VisibilityAPIResource(api_url=served.url, api_key=served.key),
        "warehouse": WarehouseResource(url=f"duckdb:///{db}", schema_name=SCHEMA),
        "progress": NO_PROGRESS,
        "sync_session": session_per_run(),
    }
    graph = Definitions(assets=[*snapshot_assets, step], resources=resources).resolve_asset_graph()
    assert graph.get(KEY).group_name == catalog.DAILY_GROUP
    assert {AssetCheckKey(KEY, "keys_unique"), AssetCheckKey(KEY, "no_empty_partitions")} <= set(
        graph.asset_check_keys
    )
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [step],
            selection=[EVIDENCE, KEY],  # the table its no_empty_partitions check reads, then it
            instance=instance,
            resources=resources,
            tags=range_tags(DAYS[0], DAYS[-1], ENGINES),
            run_config=QUIET,
        )
        return result, set(instance.get_materialized_partitions(KEY))


def checks_of_run(result: ExecuteInProcessResult) -> dict[str, Any]:
    return {e.check_name: e for e in result.get_asset_check_evaluations() if e.asset_key == KEY}


def test_the_test_only_table_is_synced_from_its_route_and_checked(
    in_catalog: PartitionedTable, positions_sandbox: PositionsSandbox, tmp_path: Path
) -> None:
    db = tmp_path / "wh.duckdb"
    result, materialized = sync_positions(positions_sandbox, db)
    assert result.success

    expected = served_rows(positions_sandbox.url, positions_sandbox.key)
    assert expected, "the sandbox serves answers on those days"
    with duckdb.connect(str(db), read_only=True) as con:
        landed = set(
            con.execute(
                f"SELECT id, brand_id, prompt_id, engine, checked_on, brand_position FROM {SCHEMA}.{NAME}"
            ).fetchall()
        )
    assert landed == expected
    assert materialized == {f"{day.isoformat()}|{engine}" for day in DAYS for engine in ENGINES}

    evaluations = checks_of_run(result)
    assert set(evaluations) == {"keys_unique", "no_empty_partitions"}
    assert all(e.passed for e in evaluations.values())
    empty_check = evaluations["no_empty_partitions"].metadata
    assert empty_check["evidence_table"].value == "competitor_trends"
    assert empty_check["partitions_checked"].value == len(DAYS) * len(ENGINES)


def test_a_day_its_route_serves_empty_fails_its_empty_partitions_check(
    in_catalog: PartitionedTable, positions_sandbox: PositionsSandbox, tmp_path: Path
) -> None:
    positions_sandbox.withheld.add(DAYS[0].isoformat())
    try:
        result, _ = sync_positions(positions_sandbox, tmp_path / "wh.duckdb")
    finally:
        positions_sandbox.withheld.clear()
    empty_check = checks_of_run(result)["no_empty_partitions"]
    assert not empty_check.passed
    assert empty_check.metadata["empty_cells"].value > 0
    assert {cell["day"] for cell in empty_check.metadata["sample"].value} == {DAYS[0].isoformat()}
