"""The sync's driver without Dagster: real sandbox over loopback, real DuckDB file, real landing.

What each table did comes back as one event; a failure of one endpoint fails its table only, while
a refused key ends the sync before any table lands.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from pathlib import Path

import duckdb
import psutil
import pytest

from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient
from resources.api.errors import AuthenticationError, ServerError
from sandbox.testing import SandboxHandle
from sync.catalog import DAILY, SNAPSHOTS
from sync.discovery import Discovery
from sync.driver import (
    DailyRequest,
    SyncFailed,
    TableFailed,
    TableLanded,
    raise_failures,
    sync_daily,
    sync_snapshots,
)
from sync.planning import Cell
from tests.fixtures_sandbox import SANDBOX_TODAY

LOG = logging.getLogger("tests.driver")
DAY = SANDBOX_TODAY - dt.timedelta(days=3)
CELLS: set[Cell] = {(DAY, "chatgpt"), (DAY, "perplexity")}


class _Api:
    """The driver's view of the service: clients sharing one budget, and its stop switch."""

    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = url, key
        # a failing endpoint is given up on after a few seconds of retries, not the default minutes
        self.budget = RequestBudget(8, request_floor=10_000, requests_per_call=20, retry_deadline_seconds=3.0)

    def get_client(self) -> VisibilityClient:
        return VisibilityClient(self.url, self.key, budget=self.budget, retry_deadline_seconds=3.0)

    def cancel(self) -> None:
        self.budget.cancel()


def _config(path: Path) -> dict[str, object]:
    return {
        "url": f"duckdb:///{path}",
        "schema_name": "visibility",
        "lock_timeout_seconds": 30.0,
        "duckdb_landing_memory_limit": "1GB",
    }


def _rows(path: Path, table: str) -> int:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(f"select count(*) from visibility.{table}").fetchone()[0]


def _daily(sandbox: SandboxHandle, path: Path, key: str = "workspace") -> list[TableLanded | TableFailed]:
    request = DailyRequest(run_id="driver-test", cells=set(CELLS), only=(), discovery=Discovery())
    api = _Api(sandbox.url, sandbox.keys[key])
    return list(sync_daily(DAILY, request, api, _config(path), LOG))


def test_every_daily_table_lands_its_cells_and_says_so(sandbox: SandboxHandle, tmp_path: Path) -> None:
    events = _daily(sandbox, tmp_path / "w.duckdb")
    assert [e.table for e in events] == [t.spec.name for t in DAILY]
    assert all(isinstance(e, TableLanded) for e in events), events
    for event in events:
        assert isinstance(event, TableLanded)
        assert event.cells == frozenset(CELLS)
        assert event.metadata["rows_landed"] == _rows(tmp_path / "w.duckdb", event.table)
        assert event.metadata["requests_total"] >= 1
    assert sum(e.metadata["rows_landed"] for e in events if isinstance(e, TableLanded)) > 0
    raise_failures(events)  # nothing failed: nothing raised


def test_one_failing_endpoint_fails_its_table_and_the_others_still_land(
    sandbox_factory, tmp_path: Path
) -> None:
    sandbox = sandbox_factory()
    sandbox.configure(fail_endpoints=["GET /v1/brands/{id}/answers"])
    events = _daily(sandbox, tmp_path / "w.duckdb")
    failed = {e.table: e.error for e in events if isinstance(e, TableFailed)}
    assert list(failed) == ["answers"]
    assert isinstance(failed["answers"], ServerError)
    assert failed["answers"].request_id  # the service's X-Request-Id travels with the error
    landed = [e.table for e in events if isinstance(e, TableLanded)]
    assert landed == [t.spec.name for t in DAILY if t.spec.name != "answers"]
    with pytest.raises(ServerError):  # one failure: raised as itself, for its exit code
        raise_failures(events)


def test_a_refused_key_ends_the_sync_before_any_table_lands(sandbox: SandboxHandle, tmp_path: Path) -> None:
    request = DailyRequest(run_id="driver-test", cells=set(CELLS), only=(), discovery=Discovery())
    api = _Api(sandbox.url, "vk_live_" + (uuid.uuid4().hex * 2)[:40])  # a key the service never issued
    with pytest.raises(AuthenticationError):
        list(sync_daily(DAILY, request, api, _config(tmp_path / "w.duckdb"), LOG))
    assert not (tmp_path / "w.duckdb").exists() or _no_tables(tmp_path / "w.duckdb")


def _no_tables(path: Path) -> bool:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("select count(*) from information_schema.tables").fetchone()[0] == 0


def test_snapshots_land_each_table_in_an_open_session_and_fail_alone(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    from resources.warehouse.urls import warehouse_for

    path = tmp_path / "w.duckdb"
    api = _Api(sandbox.url, sandbox.keys["workspace"])
    events = list(
        sync_snapshots(
            SNAPSHOTS, "driver-test", (), {}, Discovery(), api, lambda: warehouse_for(_config(path)), LOG
        )
    )
    assert [e.table for e in events] == [t.spec.name for t in SNAPSHOTS]
    for event in events:
        assert isinstance(event, TableLanded), event
        assert event.warehouse is not None
        assert event.metadata["dagster/row_count"] == _rows(path, event.table)


def test_several_failures_are_raised_together_naming_each_table() -> None:
    events = [TableFailed("a", ValueError("x")), TableFailed("b", KeyError("y"))]
    with pytest.raises(SyncFailed, match="sync failed for a, b"):
        raise_failures(events)


def test_several_failures_exit_with_the_code_of_the_gravest() -> None:
    """Five tables rate-limited past the deadline exit 4, as one does (they exited 1)."""
    from resources.api.errors import RateLimitError
    from resources.failures import FailureKind, failure_kind

    late = RateLimitError("gave up", endpoint="GET /v1/brands", status=429)
    events = [TableFailed("a", ValueError("x")), TableFailed("b", late), TableFailed("c", KeyError("y"))]
    with pytest.raises(SyncFailed, match="sync failed for a, b, c") as caught:
        raise_failures(events)
    assert failure_kind(caught.value) is FailureKind.TRANSIENT
    assert caught.value.__cause__ is late


def test_the_daily_tables_land_in_the_syncs_own_process(sandbox: SandboxHandle, tmp_path: Path) -> None:
    request = DailyRequest(run_id="driver-test", cells=set(CELLS), only=(), discovery=Discovery())
    children = set(psutil.Process().children(recursive=True))
    events, started = [], []
    api = _Api(sandbox.url, sandbox.keys["workspace"])
    for event in sync_daily(DAILY, request, api, _config(tmp_path / "w.duckdb"), LOG):
        events.append(event)
        started.append(set(psutil.Process().children(recursive=True)) - children)
    assert all(isinstance(e, TableLanded) for e in events), events
    assert started == [set()] * len(DAILY)  # no process of its own
