"""Users' own assets downstream of the landed tables receive exactly their partitions' rows as DataFrames.

Real Dagster runs of user assets next to the code location's own table assets (``sync_definitions``),
on a real DuckDB file (Dagster's DuckDB IO manager), a real Postgres schema and the BigQuery emulator
(the connector's loader); the rows are landed by the connector's own writers first.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import duckdb
import pandas as pd
import pytest
from dagster import (
    AssetIn,
    AssetKey,
    BackfillPolicy,
    DagsterInstance,
    Definitions,
    MultiPartitionKey,
    MultiToSingleDimensionPartitionMapping,
    SpecificPartitionsPartitionMapping,
    asset,
    define_asset_job,
)
from dagster_duckdb import DuckDBResource
from dagster_duckdb_pandas import DuckDBPandasIOManager

from assets.dagster_tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from assets.partitions import DAILY_PARTITIONS, DATE_DIM, PARTITION_SETTINGS, daily_partitions
from pipelines.downstream import LANDED_TABLES_IO_MANAGER, for_downstream
from pipelines.syncs import all_assets, sync_definitions
from resources.warehouse.base import Warehouse
from resources.warehouse.contract import PartitionScope
from resources.warehouse.io_manager import LandedTablesIOManager, rows_in_cells
from resources.warehouse.resource import WarehouseResource
from resources.warehouse.urls import warehouse_from_url
from settings import load_settings
from sync import tables
from sync.catalog import ALL_TABLES, DAILY
from sync.transforms import rows_to_table
from tests.fixtures_bigquery import EMULATOR_PROJECT

BRAND = "00000000-0000-4000-8000-000000000001"
YESTERDAY = dt.date.today() - dt.timedelta(days=1)
DAYS = [YESTERDAY - dt.timedelta(days=n) for n in (4, 3, 2, 1)]
MENTION_ENGINES = ("chatgpt", "claude")
TREND_ENGINES = ("chatgpt", "all")


def mention_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": f"m-{day}-{engine}-{i}",
            "brand_id": BRAND,
            "prompt_id": f"p-{i}",
            "brand_name": "Acme",
            "position": float(i + 1),
            "engine": engine,
            "checked_on": day,
        }
        for day in DAYS
        for engine in MENTION_ENGINES
        for i in range(3)
    ]


def trend_rows() -> list[dict[str, Any]]:
    return [
        {
            "brand_id": BRAND,
            "engine": engine,
            "granularity": "day",
            "competitor_id": None if name == "Acme" else "c-1",
            "brand_name": name,
            "is_your_brand": name == "Acme",
            "date": day,
            "period_start": day,
            "mention_count": 3,
            "share_of_voice": 50.0,
        }
        for day in DAYS
        for engine in TREND_ENGINES
        for name in ("Acme", "Rival")
    ]


def land(warehouse: Warehouse) -> None:
    scope = PartitionScope((BRAND,), DAYS[0], DAYS[-1] + dt.timedelta(days=1), ())
    with warehouse:
        for spec, rows, engines in (
            (tables.PROMPT_MENTIONS, mention_rows(), MENTION_ENGINES),
            (tables.COMPETITOR_TRENDS, trend_rows(), TREND_ENGINES),
        ):
            warehouse.ensure_table(spec)
            warehouse.replace_partitions(
                spec,
                rows_to_table(spec, rows),
                PartitionScope(scope.brand_ids, scope.start, scope.end, engines),
                "r1",
            )


def cell_key(day: dt.date, engine: str) -> MultiPartitionKey:
    return MultiPartitionKey({"date": day.isoformat(), "engine": engine})


received: dict[str, pd.DataFrame] = {}


@asset(partitions_def=DAILY_PARTITIONS)
def mentions_of_one_cell(prompt_mentions: pd.DataFrame) -> None:
    received["cell"] = prompt_mentions


@asset(partitions_def=DAILY_PARTITIONS)
def rollup_trends(competitor_trends: pd.DataFrame) -> None:
    received["all"] = competitor_trends


@asset(
    partitions_def=daily_partitions(PARTITION_SETTINGS.start_date),
    ins={"prompt_mentions": AssetIn(partition_mapping=MultiToSingleDimensionPartitionMapping(DATE_DIM))},
    backfill_policy=BackfillPolicy.single_run(),
)
def mentions_of_days(prompt_mentions: pd.DataFrame) -> None:
    """A range of days (one run) over every engine: all the days' date x engine partitions."""
    received["days"] = prompt_mentions


USER_ASSETS = (mentions_of_one_cell, rollup_trends, mentions_of_days)


def user_definitions(settings_env: dict[str, str], resources: dict[str, Any], *assets: Any) -> Definitions:
    """The code location's definitions plus the user's assets (a job each) and resources."""
    location = sync_definitions(load_settings(settings_env))
    return Definitions(
        assets=[*(location.assets or ()), *assets],
        jobs=[define_asset_job(f"user_{a.key.path[-1]}", selection=[a.key]) for a in assets],
        resources={**(location.resources or {}), **resources},
    )


def run_user_assets(settings_env: dict[str, str], resources: dict[str, Any] | None = None) -> None:
    """Each user asset in a run of its own: one date x engine, the `all` rollup, a range of days."""
    received.clear()
    defs = user_definitions(settings_env, resources or {}, *USER_ASSETS)
    with DagsterInstance.ephemeral() as instance:
        runs = (
            ("user_mentions_of_one_cell", {"partition_key": cell_key(DAYS[1], "claude")}),
            ("user_rollup_trends", {"partition_key": cell_key(DAYS[2], "all")}),
            (
                "user_mentions_of_days",
                {
                    "tags": {
                        ASSET_PARTITION_RANGE_START_TAG: DAYS[1].isoformat(),
                        ASSET_PARTITION_RANGE_END_TAG: DAYS[2].isoformat(),
                    }
                },
            ),
        )
        for job, options in runs:
            result = defs.resolve_job_def(job).execute_in_process(instance=instance, **options)
            assert result.success, job


def assert_each_received_exactly_its_partitions() -> None:
    cell = received["cell"]
    assert isinstance(cell, pd.DataFrame)
    assert sorted(cell["id"]) == sorted(
        r["id"] for r in mention_rows() if r["checked_on"] == DAYS[1] and r["engine"] == "claude"
    )
    assert set(cell.columns) >= {c.name for c in tables.PROMPT_MENTIONS.columns}
    assert pd.api.types.is_datetime64_any_dtype(cell["checked_on"])  # not Python dates (dtype object)

    rollup = received["all"]
    assert sorted(
        zip(rollup["brand_name"], rollup["engine"], pd.to_datetime(rollup["date"]).dt.date, strict=True)
    ) == [
        ("Acme", "all", DAYS[2]),
        ("Rival", "all", DAYS[2]),
    ]

    days = received["days"]
    assert sorted(days["id"]) == sorted(r["id"] for r in mention_rows() if r["checked_on"] in DAYS[1:3])
    assert set(days["engine"]) == set(MENTION_ENGINES)


def test_user_assets_read_their_partitions_of_a_duckdb_warehouse(tmp_path: Any) -> None:
    # the default layout: a schema named like the file, which a schema-only name would make ambiguous
    url = f"duckdb:///{tmp_path}/visibility.duckdb"
    land(warehouse_from_url(url, "visibility"))
    run_user_assets({"VISIBILITY_WAREHOUSE": url, "VISIBILITY_SCHEMA": "visibility"})
    assert_each_received_exactly_its_partitions()


@asset(io_manager_key="analytics_io_manager")
def mentions_per_engine(duckdb: DuckDBResource) -> pd.DataFrame:
    """A user's own SQL on the warehouse file, stored as a table of the user's own schema."""
    with duckdb.get_connection() as con:
        return con.execute(
            "SELECT engine, COUNT(*) AS mentions FROM visibility.visibility.prompt_mentions GROUP BY engine"
        ).fetchdf()


def test_user_sql_runs_through_the_duckdb_resource_and_lands_with_dagsters_duckdb_io_manager(
    tmp_path: Any,
) -> None:
    db = tmp_path / "visibility.duckdb"
    url = f"duckdb:///{db}"
    land(warehouse_from_url(url, "visibility"))
    analytics = DuckDBPandasIOManager(database=str(db), schema="analytics")
    defs = user_definitions(
        {"VISIBILITY_WAREHOUSE": url}, {"analytics_io_manager": analytics}, mentions_per_engine
    )
    with DagsterInstance.ephemeral() as instance:
        assert defs.resolve_job_def("user_mentions_per_engine").execute_in_process(instance=instance).success
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT engine, mentions FROM visibility.analytics.mentions_per_engine").fetchall()
    assert sorted(rows) == [(e, len(DAYS) * 3) for e in MENTION_ENGINES]


@pytest.mark.postgres
def test_user_assets_read_their_partitions_of_a_postgres_schema(postgres_url: str, pg_schema: str) -> None:
    land(warehouse_from_url(postgres_url, pg_schema))
    run_user_assets({"VISIBILITY_WAREHOUSE": postgres_url, "VISIBILITY_SCHEMA": pg_schema})
    assert_each_received_exactly_its_partitions()


class EmulatorTablesIOManager(LandedTablesIOManager):
    """The connector's loader on the emulator: its endpoint, anonymous credentials (tests only)."""

    endpoint: str

    def open_warehouse(self) -> Warehouse:
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import bigquery

        from resources.warehouse.bigquery import BigQueryWarehouse
        from resources.warehouse.urls import bigquery_target

        project, dataset = bigquery_target(self.warehouse.url)
        client = bigquery.Client(
            project=project,
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=self.endpoint),
        )
        return BigQueryWarehouse(project, dataset, client=client)


@pytest.fixture
def emulator_dataset(bigquery_emulator: str) -> Iterator[tuple[str, str]]:
    """A dataset of its own on the emulator (the tables have their real names), dropped afterwards."""
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import bigquery

    client = bigquery.Client(
        project=EMULATOR_PROJECT,
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=bigquery_emulator),
    )
    dataset = f"downstream_{uuid.uuid4().hex[:8]}"
    client.create_dataset(f"{EMULATOR_PROJECT}.{dataset}")
    try:
        yield bigquery_emulator, dataset
    finally:
        client.delete_dataset(f"{EMULATOR_PROJECT}.{dataset}", delete_contents=True, not_found_ok=True)
        client.close()


def test_user_assets_read_their_partitions_of_a_bigquery_dataset(emulator_dataset: tuple[str, str]) -> None:
    endpoint, dataset = emulator_dataset
    url = f"bigquery://{EMULATOR_PROJECT}/{dataset}"
    loader = EmulatorTablesIOManager(warehouse=WarehouseResource(url=url), endpoint=endpoint)
    land(loader.open_warehouse())
    run_user_assets({"VISIBILITY_WAREHOUSE": url}, {LANDED_TABLES_IO_MANAGER: loader})
    assert_each_received_exactly_its_partitions()


def test_daily_assets_name_their_table_in_full_and_their_partition_columns() -> None:
    settings = load_settings(
        {"VISIBILITY_WAREHOUSE": "duckdb:///data/shop.duckdb", "VISIBILITY_SCHEMA": "vis"}
    )
    specs = {s.key: s for a in for_downstream(all_assets, settings) for s in a.specs}
    for table in (entry.spec.name for entry in DAILY):
        spec, table_spec = specs[AssetKey(table)], ALL_TABLES[table]
        assert spec.metadata["dagster/table_name"] == f"shop.vis.{table}"
        assert spec.metadata["partition_expr"] == {"date": table_spec.date_column, "engine": "engine"}
        assert spec.metadata["dagster/io_manager_key"] == LANDED_TABLES_IO_MANAGER
    assert specs[AssetKey("brands")].metadata["dagster/table_name"] == "shop.vis.brands"
    assert "partition_expr" not in specs[AssetKey("brands")].metadata
    postgres = load_settings({"VISIBILITY_WAREHOUSE": "postgresql://u:secret@db:5432/analytics"})
    names = {
        s.key: s.metadata["dagster/table_name"] for a in for_downstream(all_assets, postgres) for s in a.specs
    }
    assert names[AssetKey("answers")] == "analytics.visibility.answers"
    bigquery = load_settings({"VISIBILITY_WAREHOUSE": "bigquery://proj/ds"})
    names = {
        s.key: s.metadata["dagster/table_name"] for a in for_downstream(all_assets, bigquery) for s in a.specs
    }
    assert names[AssetKey("answers")] == "proj.ds.answers"


@asset(io_manager_key=LANDED_TABLES_IO_MANAGER)
def misdirected_output() -> pd.DataFrame:
    return pd.DataFrame({"a": [1]})


def test_the_landed_tables_io_manager_refuses_to_store_a_users_output(tmp_path: Any) -> None:
    defs = user_definitions(
        {"VISIBILITY_WAREHOUSE": f"duckdb:///{tmp_path}/v.duckdb"}, {}, misdirected_output
    )
    with DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("user_misdirected_output").execute_in_process(
            instance=instance, raise_on_error=False
        )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "only reads" in str(failure.event_specific_data)


@asset
def brand_list(brands: pd.DataFrame) -> None:
    received["brands"] = brands


def test_a_snapshot_table_reaches_a_user_asset_whole(tmp_path: Any) -> None:
    from resources.warehouse.contract import SnapshotScope

    url = f"duckdb:///{tmp_path}/visibility.duckdb"
    rows = rows_to_table(tables.BRANDS, [{"id": BRAND, "name": "Acme"}, {"id": "b2", "name": "Other"}])
    with warehouse_from_url(url, "visibility") as warehouse:
        warehouse.ensure_table(tables.BRANDS)
        warehouse.upsert_snapshot(tables.BRANDS, rows, "r1", SnapshotScope())
    defs = user_definitions({"VISIBILITY_WAREHOUSE": url}, {}, brand_list)
    with DagsterInstance.ephemeral() as instance:
        assert defs.resolve_job_def("user_brand_list").execute_in_process(instance=instance).success
    assert sorted(received["brands"]["name"]) == ["Acme", "Other"]
    assert bool(received["brands"]["is_current"].all())


def test_cells_that_are_not_one_rectangle_receive_only_their_own_rows(tmp_path: Any) -> None:
    """Two engines on different days: the query reads both days x both engines, the input only the two."""
    url = f"duckdb:///{tmp_path}/visibility.duckdb"
    land(warehouse_from_url(url, "visibility"))
    cells = {(DAYS[1], "chatgpt"), (DAYS[2], "claude")}
    with warehouse_from_url(url, "visibility") as warehouse:
        sql = f"SELECT * FROM {warehouse.table_ref('prompt_mentions')} WHERE checked_on IN (:a, :b)"
        frame = warehouse.query(sql, {"a": DAYS[1], "b": DAYS[2]}).to_pandas(date_as_object=False)
    assert len(frame) == 12  # the rectangle: 2 days x 2 engines x 3 prompts
    rows = rows_in_cells(frame, {"date": "checked_on", "engine": "engine"}, cells)
    assert sorted(rows["id"]) == sorted(
        r["id"] for r in mention_rows() if (r["checked_on"], r["engine"]) in cells
    )


#: Two date x engine cells that are not one rectangle: the query reads both days x both engines.
PAIR = (cell_key(DAYS[1], "claude"), cell_key(DAYS[2], "chatgpt"))


@asset(ins={"prompt_mentions": AssetIn(partition_mapping=SpecificPartitionsPartitionMapping(list(PAIR)))})
def mentions_of_two_cells(prompt_mentions: pd.DataFrame) -> None:
    received["pair"] = prompt_mentions


def test_a_run_over_partitions_that_are_not_one_rectangle_receives_only_their_rows(tmp_path: Any) -> None:
    """A real run whose input maps to one day's claude and the next day's chatgpt: the IO manager
    reads both days x both engines (12 rows) and hands on only the two cells' 6."""
    url = f"duckdb:///{tmp_path}/visibility.duckdb"
    land(warehouse_from_url(url, "visibility"))
    received.clear()
    defs = user_definitions({"VISIBILITY_WAREHOUSE": url}, {}, mentions_of_two_cells)
    with DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("user_mentions_of_two_cells").execute_in_process(instance=instance)
    assert result.success
    cells = {(DAYS[1], "claude"), (DAYS[2], "chatgpt")}
    expected = [r["id"] for r in mention_rows() if (r["checked_on"], r["engine"]) in cells]
    assert sorted(received["pair"]["id"]) == sorted(expected) and len(expected) == 6


@asset(
    ins={
        "prompt_mentions": AssetIn(
            partition_mapping=SpecificPartitionsPartitionMapping([cell_key(DAYS[1], "perplexity")])
        )
    }
)
def mentions_of_an_empty_cell(prompt_mentions: pd.DataFrame) -> None:
    received["empty"] = prompt_mentions


def test_an_input_whose_partitions_hold_no_rows_receives_the_tables_columns(tmp_path: Any) -> None:
    url = f"duckdb:///{tmp_path}/visibility.duckdb"
    land(warehouse_from_url(url, "visibility"))  # no perplexity rows
    received.clear()
    defs = user_definitions({"VISIBILITY_WAREHOUSE": url}, {}, mentions_of_an_empty_cell)
    with DagsterInstance.ephemeral() as instance:
        assert (
            defs.resolve_job_def("user_mentions_of_an_empty_cell")
            .execute_in_process(instance=instance)
            .success
        )
    assert received["empty"].empty
    assert set(received["empty"].columns) >= {c.name for c in tables.PROMPT_MENTIONS.columns}
