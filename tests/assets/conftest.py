"""Helpers of the asset tests: real Dagster runs against the sandbox into real DuckDB files."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dagster import AssetKey, AssetsDefinition, DagsterInstance, ExecuteInProcessResult, materialize

from assets.builders import daily_assets, snapshot_assets
from pipelines.resources import session_per_run
from pipelines.schedules import range_tags
from resources.api.endpoints import ENGINES
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.resource import WarehouseResource
from sandbox.testing import SandboxHandle
from sync.progress import NO_PROGRESS
from tests.sync.conftest import SCHEMA

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def days(start: dt.date, n: int) -> list[dt.date]:
    return [start + dt.timedelta(days=i) for i in range(n)]


class Sync:
    """Materializes assets against one sandbox and key into one DuckDB file."""

    def __init__(self, sandbox: SandboxHandle, db: Path, instance: DagsterInstance, role: str = "workspace"):
        self.sandbox, self.db, self.instance = sandbox, db, instance
        self.role = role

    def resources(self, role: str | None = None) -> dict[str, Any]:
        return {
            "api": VisibilityAPIResource(
                api_url=self.sandbox.url, api_key=self.sandbox.keys[role or self.role]
            ),
            "warehouse": WarehouseResource(url=f"duckdb:///{self.db}", schema_name=SCHEMA),
            "progress": NO_PROGRESS,
            "sync_session": session_per_run(),
        }

    def run(
        self,
        assets: Sequence[AssetsDefinition | str],
        first: dt.date | None = None,
        last: dt.date | None = None,
        engines: tuple[str, ...] = ENGINES,
        *,
        partition_key: str | None = None,
        role: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> ExecuteInProcessResult:
        run_tags = dict(tags or {})
        if first is not None and last is not None:
            run_tags.update(range_tags(first, last, engines))
        defs, selection = selecting(assets)
        result = materialize(
            defs,
            selection=selection,
            instance=self.instance,
            resources=self.resources(role),
            partition_key=partition_key,
            tags=run_tags,
            run_config=QUIET,
        )
        assert result.success
        return result

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with duckdb.connect(str(self.db), read_only=True) as con:
            con.execute(f"SET schema = '{SCHEMA}'")
            return con.execute(sql, list(params)).fetchall()


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    """In-memory storage: a run's events are stored as a daemon's would be, without sqlite's fsyncs."""
    with DagsterInstance.ephemeral() as inst:
        yield inst


def selecting(assets: Sequence[AssetsDefinition | str]) -> tuple[list[AssetsDefinition], list[AssetKey]]:
    """``materialize``'s assets and selection: a name picks that table out of its sync step."""
    defs = [a for a in assets if isinstance(a, AssetsDefinition)]
    names = [a for a in assets if isinstance(a, str)]
    if names:
        defs = [*defs, *(a for a in (*daily_assets, *snapshot_assets) if a not in defs)]
    selection = [AssetKey(n) for n in names] + [k for a in assets if not isinstance(a, str) for k in a.keys]
    return defs, selection


@pytest.fixture
def sync(sandbox: SandboxHandle, tmp_path: Path, instance: DagsterInstance) -> Sync:
    return Sync(sandbox, tmp_path / "wh.duckdb", instance)


def metadata(result: ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """Metadata of the asset's (first) materialization, values unwrapped."""
    mats = [
        e.event_specific_data.materialization
        for e in result.get_asset_materialization_events()
        if e.asset_key == AssetKey(asset)
    ]
    assert mats, f"{asset} did not materialize"
    return {k: getattr(v, "value", v) for k, v in mats[0].metadata.items()}


#: The facts tables and the trends tables, selected by name.
FACTS = ("prompt_mentions", "answers")
TRENDS = ("competitor_trends", "citation_trends", "cited_pages")
