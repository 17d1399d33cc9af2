"""A backfill whose runs are pods: each run shares no disk with the others, as on Kubernetes.

The real stack (``dagster-webserver`` + ``dagster-daemon run``, ``bench/daemon.py``) on the production
instance settings (``deploy/dagster.yaml``) with its run, event and schedule storage shared (SQLite in
a shared folder) and every run started by ``tests/pods.py`` in a mount namespace of its own, with
private tmpfs over the instance's local storage and TMPDIR. Backfills launched as the UI launches
them, against a sandbox; the command line over the same days against a second sandbox of the same
world. Checked: rows identical to the command line's, requests within 1.1x the planner's minimum for
the whole selection, nothing left in any pod's private folders, and a pod killed (SIGKILL) while it
fetches for the backfill leaves the other runs able to finish once run monitoring fails its run, one
of them landing the killed run's cells too.
Minutes on two cores (``slow``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from bench import daemon as D
from resources.warehouse.duckdb import DuckDBWarehouse
from resources.warehouse.handoffs import TABLE as HANDOFFS
from sandbox.testing import SandboxHandle
from tests import pods
from tests.fixtures_sandbox import loose_limits
from tests.pipelines.test_launch_matrix import (
    DAILY_TABLES,
    block,
    cells,
    cli_in_background,
    compare_cells,
    keys,
    stack_env,
)

pytestmark = pytest.mark.slow
REFUSED = pods.unshare_refused()


def launch(stack: D.DagsterStack, target: str, job: str | None, cell_set: set[tuple[str, str]]) -> str:
    assets = [D._key(n) for n in D.asset_nodes(stack, group="visibility_daily")]
    params = D._params(stack, target, job, D.asset_nodes(stack, assets), keys(cell_set))
    return D.launch_backfill(stack, D.UiLaunch(target, job, assets, params))


def backfill_targets(home: Path, backfill_id: str) -> dict[str, set[Any]] | None:
    """What a run of the backfill reads as its target (``assets/builders.py: targets_of``)."""
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    from assets.builders import targets_of
    from pipelines.definitions import defs

    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        backfill = instance.get_backfill(backfill_id)
        return targets_of(backfill, defs.get_repository_def().asset_graph, DAILY_TABLES)


def claimants(db: Path, backfill_id: str) -> list[str]:
    with DuckDBWarehouse(db, "visibility", lock_timeout_seconds=60) as wh:
        rows = wh.query(
            f"SELECT claimant_run_id FROM {wh.table_ref(HANDOFFS)} "
            "WHERE backfill_id = :b AND state = 'claimed'",
            {"b": backfill_id},
        ).to_pylist()
    return [r["claimant_run_id"] for r in rows]


@pytest.mark.skipif(REFUSED is not None, reason=f"pods need unshare --mount as root: {REFUSED}")
@pytest.mark.timeout(1500)
def test_a_backfill_whose_runs_are_pods_lands_its_selection_once_at_the_planners_requests(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    ui_sandbox: SandboxHandle = sandbox_factory()
    cli_sandbox: SandboxHandle = sandbox_factory()  # same seed and day: the same world
    logs, ui_db, cli_db = tmp_path / "logs", tmp_path / "ui.duckdb", tmp_path / "cli.duckdb"
    logs.mkdir()
    scenarios = {
        # Dagster splits a range longer than its engines per engine, a short one per day
        "asset backfill, split per engine": (
            "pureWithAnchorAsset",
            None,
            cells(block(0, 3), ("chatgpt", "claude")),
        ),
        "job backfill, split per day": (
            "job",
            "visibility_daily",
            cells(block(3, 2), ("chatgpt", "claude", "perplexity")),
        ),
    }
    killed_cells = cells(block(5, 3), ("chatgpt", "gemini"))
    every_cell = set().union(*(c for _, _, c in scenarios.values()), killed_cells)
    span = sorted({dt.date.fromisoformat(d) for d, _ in every_cell})

    cli, cli_errors = cli_in_background(cli_sandbox, span, cli_db, logs)
    env = stack_env(ui_sandbox, ui_db, retry_deadline_seconds=30)
    world = D.read_world(ui_sandbox.url, ui_sandbox.keys["workspace"])
    problems: list[str] = []
    requests: dict[str, tuple[int, int]] = {}
    with D.dagster_stack(env, log_dir=logs, timeout=300, instance_yaml=pods.pod_instance_yaml) as stack:
        pods_dir = stack.home / "pods"
        cli.join(timeout=900)
        assert not cli_errors, "\n".join(cli_errors)
        all_runs: list[dict[str, Any]] = []
        for name, (target, job, cell_set) in scenarios.items():
            ui_sandbox.reset_stats()
            backfill_id = launch(stack, target, job, cell_set)
            [final] = D.wait_backfills(stack, [backfill_id], 900).values()
            runs = D.backfill_runs(stack, backfill_id)
            all_runs += runs
            targets = backfill_targets(stack.home, backfill_id)
            wanted = {(dt.date.fromisoformat(d), e) for d, e in cell_set}
            if targets != dict.fromkeys(DAILY_TABLES, wanted):  # what every run fetches for
                problems.append(f"{name}: the runs read the backfill's target as {targets}")
            if final["status"] != "COMPLETED_SUCCESS" or len(runs) < 2:
                problems.append(f"{name}: {final['status']}, {len(runs)} runs")
            for run in runs:
                if run["status"] != "SUCCESS":
                    problems.append(f"{name}: run {run['runId']} {D.run_failures(stack, run['runId'])}")
            dates = sorted({dt.date.fromisoformat(d) for d, _ in cell_set})
            engines = sorted({e for _, e in cell_set})
            minimum = D.planner_minimum(world, DAILY_TABLES, dates, engines, cli_db)
            requests[name] = (D.served(ui_sandbox.stats()), sum(minimum.values()))

        # a pod killed while it fetches for the whole backfill: slow the service so it is mid-fetch
        ui_sandbox.configure(limits={"rate_per_second": 5.0, "burst": 5})
        ui_sandbox.reset_stats()
        backfill_id = launch(stack, "pureWithAnchorAsset", None, killed_cells)
        deadline, victim = time.monotonic() + 300, ""
        while not victim and time.monotonic() < deadline:
            claimed = claimants(ui_db, backfill_id) if ui_db.exists() else []
            if claimed and D.served(ui_sandbox.stats()) >= 10:
                victim = claimed[0]
            time.sleep(0.5)
        assert victim, "no run of the backfill claimed a table"
        os.killpg(int((pods_dir / f"{victim}.pid").read_text()), signal.SIGKILL)
        ui_sandbox.configure(limits=dataclasses.asdict(loose_limits()))
        D.wait_backfills(stack, [backfill_id], 900)  # failed: the killed run's partitions
        killed_runs = D.backfill_runs(stack, backfill_id)
        by_id = {r["runId"]: r for r in killed_runs}
        if by_id[victim]["status"] != "FAILURE":
            problems.append(f"the killed run ended {by_id[victim]['status']}, not FAILURE")
        for run in killed_runs:
            if run["runId"] != victim and run["status"] != "SUCCESS":
                problems.append(f"after the kill: run {run['runId']} {D.run_failures(stack, run['runId'])}")
        if claimants(ui_db, backfill_id):
            problems.append("after the kill: a table is still claimed")
        reported = {r["runId"] for r in all_runs + killed_runs} - {victim}
        # a run is finished in Dagster's storage before its pod has listed its folders and exited
        deadline = time.monotonic() + 120
        while not reported <= set(left := pods.pods_left(pods_dir)) and time.monotonic() < deadline:
            time.sleep(0.5)
        problems += [f"pod {run_id} did not report" for run_id in sorted(reported - set(left))]
        problems += [f"pod {run_id} left {files[:5]}" for run_id, files in left.items() if files]

    for name, (served, minimum) in requests.items():
        if served > 1.1 * minimum:
            problems.append(f"{name}: {served} requests against the planner's {minimum}")
    for table in DAILY_TABLES:
        c = compare_cells(ui_db, cli_db, table, every_cell)
        if c["only_ui"] or c["only_cli"] or not c["ui"]:
            problems.append(f"{table}: rows differ from the command line's: {c}")
        outside = compare_cells(ui_db, cli_db, table, every_cell, outside=True)["outside"]
        if outside:
            problems.append(f"{table}: {outside} rows outside the backfills' cells")
    assert not problems, "\n".join(problems) + f"\nrequests (served, planner): {requests}"
