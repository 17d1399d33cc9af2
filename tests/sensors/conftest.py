"""Shared parts of the sensor tests: a persistent Dagster instance, a DuckDB warehouse seeded with the
sandbox's brands, resources pointing at a sandbox, and helpers that evaluate a tick and launch its
run requests the way the daemon does (skipping a run key that already ran)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dagster import (
    DagsterInstance,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorResult,
    build_sensor_context,
    instance_for_test,
    materialize,
)

from assets.audits import audit_reports
from pipelines.sensors.audits import AuditSensorSettings
from resources.api.client import VisibilityClient
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.contract import PartitionScope, SnapshotScope
from resources.warehouse.resource import WarehouseResource
from sandbox.testing import SandboxHandle
from sync import transforms
from sync.tables import BRANDS, CITED_PAGES

RUN_KEY_TAG = "dagster/run_key"


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterInstance]:
    """A persistent (SQLite, on disk) instance, as the daemon uses; one per module (it is slow to create).

    Tests tell their runs apart by audit id tags and run keys, which never repeat within a sandbox.
    """
    home = tmp_path_factory.mktemp("dagster_home")
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst


@pytest.fixture
def warehouse(tmp_path: Path) -> WarehouseResource:
    return WarehouseResource(url=f"duckdb:///{tmp_path / 'warehouse.duckdb'}", schema_name="visibility")


def api_resource(handle: SandboxHandle) -> VisibilityAPIResource:
    return VisibilityAPIResource(api_url=handle.url, api_key=handle.keys["workspace"])


def sandbox_brands(handle: SandboxHandle) -> list[dict[str, Any]]:
    with VisibilityClient(handle.url, handle.keys["workspace"]) as client:
        return list(client.list_brands())


def seed_brands(warehouse: WarehouseResource, brands: list[dict[str, Any]]) -> None:
    with warehouse.get_warehouse() as wh:
        wh.ensure_table(BRANDS)
        wh.upsert_snapshot(BRANDS, transforms.rows_to_table(BRANDS, brands), "seed", SnapshotScope(None))


def seed_cited_pages(warehouse: WarehouseResource, rows: list[dict[str, Any]]) -> None:
    """Land ``cited_pages`` rows (brand_id, date, engine, url, root_domain, citation_count)."""
    full = [
        {
            "rank": i + 1,
            "domain": r["root_domain"],
            "avg_position": 1.0,
            "citation_share": 0.1,
            "total_count": len(rows),
            "total_citations": 100,
            "capped": False,
            **r,
        }
        for i, r in enumerate(rows)
    ]
    table = pa.Table.from_pylist(full, schema=CITED_PAGES.arrow_schema)
    days = sorted({r["date"] for r in rows})
    scope = PartitionScope(
        brand_ids=tuple(sorted({r["brand_id"] for r in rows})),
        start=days[0],
        end=days[-1] + dt.timedelta(days=1),
        engines=tuple(sorted({r["engine"] for r in rows})),
    )
    with warehouse.get_warehouse() as wh:
        wh.ensure_table(CITED_PAGES)
        wh.replace_partitions(CITED_PAGES, table, scope, "seed")


def evaluate(
    sensor: SensorDefinition, instance: DagsterInstance, cursor: str | None, resources: Mapping[str, Any]
) -> SensorResult:
    """One tick, evaluated for real by Dagster (fresh context, as after a daemon restart)."""
    context = build_sensor_context(instance=instance, cursor=cursor, resources=dict(resources))
    result = sensor(context)
    assert isinstance(result, SensorResult)
    return result


def launch(instance: DagsterInstance, request: RunRequest, warehouse: WarehouseResource) -> bool:
    """Run an audit landing request in process, as the daemon would; False when its run key already ran."""
    if request.run_key and instance.get_runs(filters=RunsFilter(tags={RUN_KEY_TAG: request.run_key})):
        return False
    result = materialize(
        [audit_reports],
        instance=instance,
        run_config=request.run_config,
        tags={**request.tags, RUN_KEY_TAG: request.run_key or ""},
        resources={"warehouse": warehouse},
    )
    assert result.success
    return True


def audit_rows(warehouse: WarehouseResource) -> list[dict[str, Any]]:
    with warehouse.get_warehouse() as wh:
        return wh.query(f"SELECT * FROM {wh.table_ref('audit_reports')} ORDER BY requested_at").to_pylist()


def count(stats: Mapping[str, Mapping[str, int]], endpoint: str) -> int:
    return sum(stats.get(endpoint, {}).values())


def utc_today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


SettingsFactory = Callable[..., AuditSensorSettings]
