"""Every way the Dagster UI launches a sync lands exactly what it asked for (docs/OPERATIONS.md,
"What each launch asks for").

One real stack (``dagster-webserver`` + ``dagster-daemon`` on the project's ``dagster.yaml`` and
``workspace.yaml``, ``bench/daemon.py``) against a sandbox; each launch goes in through the GraphQL
the UI sends, on days of its own:

* the asset page's dialog, the group's dialog, the job page of each partitioned job (the job-target
  shape, ``partitionSetName``: its runs carry the first partition's dimension tags next to their
  range), the ``all`` column alone, a non-rectangular set of cells, two overlapping backfills at once;
* the launchpad with a partition range, a schedule tick (its dry run, then "Launch all runs");
* a run that failed (one endpoint answering 500), re-executed from failure, then all steps.

Each is compared with ``visibility-sync run`` over the same days (a second sandbox of the same seed):
per table, the rows of the launch's cells are the same rows (every column but the writer's,
``EXCEPT ALL`` both ways; competitor trends' day rows: week and window rows depend on each fetch's
window), no row lands outside the cells asked for, and the materializations recorded are exactly the
cells asked for. Several minutes on two cores (``slow``).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dagster import DagsterEventType, DagsterInstance
from dagster._core.instance.ref import InstanceRef

from bench import daemon as D
from resources.api.endpoints import ENGINES_WITH_ALL
from sandbox.testing import SandboxHandle
from sync.catalog import BY_NAME, DAILY
from tests.fixtures_sandbox import SANDBOX_TODAY
from tests.pipelines.dagster_ui import launch_run, ui_run_params

pytestmark = pytest.mark.slow

ENGINES = ENGINES_WITH_ALL
DAILY_TABLES = tuple(t.spec.name for t in DAILY)
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
FAILING = "GET /v1/brands/{id}/answers"


def block(offset: int, n: int) -> list[dt.date]:
    """``n`` days ending ``offset`` days before the sandbox's newest day."""
    return D.days(SANDBOX_TODAY - dt.timedelta(days=1 + offset), n)


@dataclass
class Launch:
    """One row of the matrix: the cells and tables it asks for, and the runs it became."""

    name: str
    cells: set[tuple[str, str]]
    tables: tuple[str, ...] = DAILY_TABLES
    run_ids: list[str] = field(default_factory=list)
    backfill_ids: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def dates(self) -> list[dt.date]:
        return sorted({dt.date.fromisoformat(d) for d, _ in self.cells})


def cells(dates: list[dt.date], engines: tuple[str, ...]) -> set[tuple[str, str]]:
    return {(d.isoformat(), e) for d in dates for e in engines}


def keys(cell_set: set[tuple[str, str]]) -> list[str]:
    order = {e: i for i, e in enumerate(ENGINES)}
    return [f"{d}|{e}" for d, e in sorted(cell_set, key=lambda c: (c[0], order[c[1]]))]


def backfill(stack: D.DagsterStack, launch: Launch, target: str, job: str | None, assets: list[str]) -> None:
    nodes = D.asset_nodes(stack, assets)
    params = D._params(stack, target, job, nodes, keys(launch.cells))
    launch.backfill_ids.append(D.launch_backfill(stack, D.UiLaunch(target, job, assets, params)))


def range_run(stack: D.DagsterStack, job: str, assets: list[str], first: str, last: str) -> str:
    params = ui_run_params(stack, job, assets)
    params["executionMetadata"]["tags"] += [
        {"key": RANGE_START, "value": first},
        {"key": RANGE_END, "value": last},
    ]
    return launch_run(stack, params)


REEXECUTE = """
mutation Reexecute($params: ReexecutionParams!) {
  launchPipelineReexecution(reexecutionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""


def reexecute(stack: D.DagsterStack, run_id: str, strategy: str) -> str:
    outcome = stack.graphql(REEXECUTE, {"params": {"parentRunId": run_id, "strategy": strategy}})
    result = outcome["launchPipelineReexecution"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return str(result["run"]["runId"])


def materialized(instance: DagsterInstance, run_ids: list[str]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for run_id in run_ids:
        for record in instance.get_records_for_run(
            run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION
        ).records:
            event = record.event_log_entry.dagster_event
            if event is not None and event.partition is not None and event.asset_key is not None:
                out.add((event.asset_key.path[-1], event.partition))
    return out


def compare_cells(
    ui: Path, cli: Path, table: str, cell_set: set[tuple[str, str]], *, outside: bool = False
) -> dict[str, int]:
    """Rows of ``cell_set`` per side (``outside``: the UI's rows outside it)."""
    spec = BY_NAME[table].spec
    date, engine = spec.date_column, spec.engine_column
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{ui}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{cli}' AS b (READ_ONLY)")
        con.execute("CREATE TEMP TABLE cells (d DATE, e VARCHAR)")
        con.executemany("INSERT INTO cells VALUES (?, ?)", sorted(cell_set))
        columns = [
            c
            for (c,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = 'a' AND table_name = ? "
                "AND column_name NOT IN ('_loaded_at', '_run_id') ORDER BY column_name",
                [table],
            ).fetchall()
        ]
        shown = ", ".join(f't."{c}"' for c in columns)
        # trends' day rows: week and window rows depend on each fetch's window
        day_rows = "AND t.granularity = 'day'" if table in ("competitor_trends", "citation_trends") else ""
        inside = f"EXISTS (SELECT 1 FROM cells WHERE d = CAST(t.{date} AS DATE) AND e = t.{engine})"

        def rows(db: str, where: str) -> str:
            return f"SELECT {shown} FROM {db}.visibility.{table} AS t WHERE {where} {day_rows}"

        if outside:
            return {
                "outside": con.execute(f"SELECT COUNT(*) FROM ({rows('a', 'NOT ' + inside)})").fetchone()[0]
            }
        ui_rows = con.execute(f"SELECT COUNT(*) FROM ({rows('a', inside)})").fetchone()[0]
        only_ui = con.execute(f"SELECT COUNT(*) FROM ({rows('a', inside)} EXCEPT ALL {rows('b', inside)})")
        only_ui_rows = only_ui.fetchone()[0]
        only_cli = con.execute(f"SELECT COUNT(*) FROM ({rows('b', inside)} EXCEPT ALL {rows('a', inside)})")
        return {"ui": ui_rows, "only_ui": only_ui_rows, "only_cli": only_cli.fetchone()[0]}


def cli_in_background(
    sandbox: SandboxHandle, span: list[dt.date], db: Path, logs: Path
) -> tuple[threading.Thread, list[str]]:
    """``visibility-sync run`` over ``span`` into ``db``, started in a thread; its failures, if any."""
    errors: list[str] = []

    def sync() -> None:
        args, key = D.cli_args(span, None), sandbox.keys["workspace"]
        outcome = D.run_cli(args, url=sandbox.url, key=key, db=db, log_dir=logs, timeout=900)
        if outcome.exit_code != 0:
            errors.append(f"visibility-sync run exited {outcome.exit_code}: {outcome.output[-2000:]}")

    thread = threading.Thread(target=sync, daemon=True)
    thread.start()
    return thread, errors


def stack_env(sandbox: SandboxHandle, db: Path, *, retry_deadline_seconds: int) -> dict[str, str]:
    """The project's settings of a stack syncing ``sandbox`` into the DuckDB file ``db``."""
    return {
        "VISIBILITY_API_URL": sandbox.url,
        "VISIBILITY_API_KEY": sandbox.keys["workspace"],
        "VISIBILITY_WAREHOUSE": f"duckdb:///{db}",
        "VISIBILITY_START_DATE": D.START_DATE.isoformat(),
        "VISIBILITY_LOOKBACK_DAYS": "0",
        "VISIBILITY_RETRY_DEADLINE_SECONDS": str(retry_deadline_seconds),
    }


@pytest.mark.timeout(1500)
def test_every_ui_launch_shape_lands_exactly_the_cells_it_asks_for(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    ui_sandbox: SandboxHandle = sandbox_factory()
    cli_sandbox: SandboxHandle = sandbox_factory()  # same seed and day: the same world
    logs, ui_db, cli_db = tmp_path / "logs", tmp_path / "ui.duckdb", tmp_path / "cli.duckdb"
    logs.mkdir()

    b = {
        name: block(*at)
        for name, at in {
            "asset": (0, 2),
            "group": (2, 2),
            "sync_job": (4, 1),
            "daily_job": (5, 2),
            "all_column": (7, 2),
            "subset": (9, 2),
            "overlap": (11, 2),
            "launchpad": (13, 2),
            "schedule": (15, 1),
            "reexecute": (16, 1),
        }.items()
    }
    subset = cells(b["subset"][:1], ("chatgpt", "claude", "all")) | cells(b["subset"][1:], ("chatgpt",))
    launches = {
        "asset page": Launch("asset page", cells(b["asset"], ("chatgpt", "claude")), ("competitor_trends",)),
        "group dialog": Launch("group dialog", cells(b["group"], ENGINES)),
        "job page visibility_sync": Launch("job page visibility_sync", cells(b["sync_job"], ENGINES)),
        "job page visibility_daily": Launch(
            "job page visibility_daily", cells(b["daily_job"], ("chatgpt", "claude"))
        ),
        "all column alone": Launch("all column alone", cells(b["all_column"], ("all",))),
        "non-rectangular cells": Launch("non-rectangular cells", subset),
        "overlapping backfills": Launch("overlapping backfills", cells(b["overlap"], ENGINES)),
        "launchpad range": Launch("launchpad range", cells(b["launchpad"], ENGINES[:3])),
        "schedule tick": Launch("schedule tick", cells(b["schedule"], ENGINES)),
        "re-execution": Launch("re-execution", cells(b["reexecute"], ("chatgpt",))),
    }
    all_cells = {cell for launch in launches.values() for cell in launch.cells}
    span = sorted({dt.date.fromisoformat(d) for d, _ in all_cells})

    cli, cli_errors = cli_in_background(cli_sandbox, span, cli_db, logs)
    env = stack_env(ui_sandbox, ui_db, retry_deadline_seconds=5)
    with D.dagster_stack(env, log_dir=logs, timeout=300) as stack:
        daily_group = [D._key(n) for n in D.asset_nodes(stack, group="visibility_daily")]
        sync_assets = sorted(
            D._key(n)
            for n in D.asset_nodes(stack, group="visibility_daily")
            + D.asset_nodes(stack, group="visibility_snapshots")
        )
        # the backfills, launched at once (the daemon's loop is waited for once)
        backfill(stack, launches["asset page"], "pureWithAnchorAsset", None, ["competitor_trends"])
        backfill(stack, launches["group dialog"], "pureWithAnchorAsset", None, daily_group)
        backfill(stack, launches["job page visibility_sync"], "job", "visibility_sync", sync_assets)
        backfill(stack, launches["job page visibility_daily"], "job", "visibility_daily", daily_group)
        backfill(stack, launches["all column alone"], "job", "visibility_daily", daily_group)
        backfill(stack, launches["non-rectangular cells"], "pureWithAnchorAsset", None, daily_group)
        backfill(stack, launches["overlapping backfills"], "pureWithAnchorAsset", None, daily_group)
        overlap_cells = cells(b["overlap"], ("chatgpt",))
        nodes = D.asset_nodes(stack, ["competitor_trends"])
        params = D._params(stack, "pureWithAnchorAsset", None, nodes, keys(overlap_cells))
        launches["overlapping backfills"].backfill_ids.append(
            D.launch_backfill(stack, D.UiLaunch("pureWithAnchorAsset", None, ["competitor_trends"], params))
        )
        # the single runs
        first, last = keys(launches["launchpad range"].cells)[0], keys(launches["launchpad range"].cells)[-1]
        launches["launchpad range"].run_ids.append(
            range_run(stack, "visibility_daily", daily_group, first, last)
        )
        at = dt.datetime.combine(b["schedule"][0] + dt.timedelta(days=1), dt.time(3), tzinfo=dt.UTC)
        launches["schedule tick"].run_ids += D.launch_runs(stack, D.schedule_runs(stack, at, ["daily_sync"]))

        by_id = D.wait_backfills(stack, [i for lz in launches.values() for i in lz.backfill_ids], 1200)
        for launch in launches.values():
            for backfill_id in launch.backfill_ids:
                if by_id[backfill_id]["status"] != "COMPLETED_SUCCESS":
                    launch.problems.append(f"backfill {backfill_id}: {by_id[backfill_id]['status']}")
                launch.run_ids += [r["runId"] for r in D.backfill_runs(stack, backfill_id)]
        # the failing endpoint only once every other launch has ended (it is the sandbox's, for all)
        D.wait_runs(stack, launches["launchpad range"].run_ids + launches["schedule tick"].run_ids, 600)
        ui_sandbox.configure(fail_endpoints=[FAILING])
        [cell] = keys(launches["re-execution"].cells)
        failed = range_run(stack, "visibility_daily", daily_group, cell, cell)
        [failed_run] = D.wait_runs(stack, [failed], 300)
        ui_sandbox.configure(fail_endpoints=[])
        assert failed_run["status"] == "FAILURE", failed_run
        from_failure = reexecute(stack, failed, "FROM_FAILURE")
        D.wait_runs(stack, [from_failure], 300)
        all_steps = reexecute(stack, from_failure, "ALL_STEPS")
        launches["re-execution"].run_ids += [from_failure, all_steps]

        for launch in launches.values():
            for run in D.wait_runs(stack, launch.run_ids, 600):
                if run["status"] != "SUCCESS":
                    launch.problems.append(
                        f"run {run['runId']}: {run['status']} {D.run_failures(stack, run['runId'])}"
                    )
        D.wait_idle(stack)
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(stack.home))) as instance:
            recorded = {name: materialized(instance, launch.run_ids) for name, launch in launches.items()}
    cli.join(timeout=900)
    assert not cli_errors, "\n".join(cli_errors)

    problems: list[str] = []
    figures: dict[str, Any] = {}
    for name, launch in launches.items():
        expected = {(t, k) for t in launch.tables for k in keys(launch.cells)}
        if name == "overlapping backfills":
            expected |= {("competitor_trends", k) for k in keys(overlap_cells)}
        if recorded[name] != expected:
            problems.append(
                f"{name}: materializations differ from the cells asked for: missing "
                f"{sorted(expected - recorded[name])[:6]}, extra {sorted(recorded[name] - expected)[:6]}"
            )
        for table in launch.tables:
            c = compare_cells(ui_db, cli_db, table, launch.cells)
            figures[f"{name}/{table}"] = c
            if c["only_ui"] or c["only_cli"]:
                problems.append(f"{name}: {table} rows differ from the command line's: {c}")
        if name != "asset page" and not any(figures[f"{name}/{t}"]["ui"] for t in launch.tables):
            problems.append(f"{name}: nothing landed")
        problems += [f"{name}: {p}" for p in launch.problems]
    for table in DAILY_TABLES:
        outside = compare_cells(ui_db, cli_db, table, all_cells, outside=True)["outside"]
        if outside:
            problems.append(f"{table}: {outside} rows outside every launch's cells")
    if os.environ.get("VISIBILITY_TEST_VERBOSE"):
        print(figures)
    assert not problems, "\n".join(problems)
