"""A real DuckDB warehouse file per test, and helpers to land good rows and break them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from dagster import AssetCheckKey, AssetCheckResult, AssetKey, DagsterInstance, instance_for_test

from assets.checks import CheckInputs, checks_of
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.contract import PartitionScope, TableSpec
from resources.warehouse.resource import WarehouseResource

SCHEMA = "visibility"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "warehouse.duckdb"


@pytest.fixture
def warehouse(db_path: Path) -> WarehouseResource:
    return WarehouseResource(url=f"duckdb:///{db_path}", schema_name=SCHEMA)


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterInstance]:
    with instance_for_test(temp_dir=str(tmp_path_factory.mktemp("dagster_home"))) as inst:
        yield inst


def land(warehouse: WarehouseResource, spec: TableSpec, rows: list[dict[str, Any]]) -> None:
    """Replace the rows' brand x date range x engines with ``rows``, as an asset does."""
    table = pa.Table.from_pylist(rows, schema=spec.arrow_schema)
    assert spec.date_column is not None
    days = sorted(r[spec.date_column] for r in rows)
    scope = PartitionScope(
        brand_ids=tuple(sorted({r["brand_id"] for r in rows})),
        start=days[0],
        end=days[-1] + dt.timedelta(days=1),
        engines=tuple(sorted({r["engine"] for r in rows})),
    )
    with warehouse.get_warehouse() as wh:
        wh.ensure_table(spec)
        wh.replace_partitions(spec, table, scope, "test-run")


def execute(db_path: Path, sql: str) -> None:
    """Break the landed data behind the warehouse's back (what a faulty writer or a manual edit does)."""
    with duckdb.connect(str(db_path)) as con:
        con.execute(sql)


def meta(result: AssetCheckResult, name: str) -> Any:
    return result.metadata[name].value


def days_ago(n: int) -> dt.date:
    return dt.datetime.now(dt.UTC).date() - dt.timedelta(days=n)


def evaluate(
    table: str,
    name: str,
    warehouse: WarehouseResource,
    instance: DagsterInstance | None = None,
    *,
    api: VisibilityAPIResource | None = None,
    tags: dict[str, str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> AssetCheckResult:
    """Evaluate one check of a synced table as its sync step does after the table lands."""
    key = AssetCheckKey(AssetKey(table), name)
    check = next(c for c in checks_of([table]) if c.key == key)
    with warehouse.get_warehouse() as wh:
        inputs = CheckInputs(wh, instance or DagsterInstance.ephemeral(), tags or {}, api, metadata)
        return check.run(inputs)
