"""A backfill launched as the Dagster UI launches it, run by the real daemon, syncs what
``visibility-sync run`` syncs for the same selection, for the planner's minimum of requests.

The real stack (``bench/daemon.py``): ``dagster-webserver`` and ``dagster-daemon run`` on a
temporary ``DAGSTER_HOME`` holding the project's ``dagster.yaml``, loading ``workspace.yaml``; the
backfills go in through the webserver's GraphQL exactly as the *Materialize all* dialog of the
``visibility_daily`` group sends them (``launchPartitionBackfill`` with ``assetSelection`` and
``partitionNames``); the daemon launches and runs them against a sandbox over real HTTP. The command
line runs the same selections against a second sandbox of the same seed (the same world), into its
own DuckDB file, while the stack starts.

Two selections, launched together (as two users would) so the daemon's 30-second backfill loop is
waited for once: the group over 3 days x every engine, and over 3 earlier days x two engines.
Expected: each selection is one dialog (one backfill: the group shares one partitions definition, so
its dialog offers a date range), the backfills and all their runs succeed, the five partitioned
tables hold exactly the command line's rows (every column but ``_loaded_at`` and ``_run_id``), and
the sandbox served at most 1.05 x the planner's minimum for the two selections (the pure planner's
calls over the whole of each selection, further pages counted from the rows landed, one discovery
each). ``VISIBILITY_TEST_CODE_ROOT`` runs the stack and the command line from another tree (e.g. an
export of an older commit) to compare; ``-rP`` prints the figures of a passing run.

About two minutes on two shared cores: the daemon's loop, then 5 runs (3 one-day runs and 2
one-engine runs, Dagster's split of a ``date x engine`` selection) at most 2 at a time
(``dagster.yaml``'s ``dagster/backfill`` limit), each a run process start. Before the one-partitions
-definition change (``282fda5``) it failed in about 5 minutes: two dialogs per selection (the group
offered all partitions only), 10 runs, 780 requests for a minimum of 405.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from bench import daemon as D
from sandbox.testing import SandboxHandle
from tests.fixtures_sandbox import SANDBOX_TODAY

pytestmark = pytest.mark.slow

GROUP = "visibility_daily"
NEWEST = SANDBOX_TODAY - dt.timedelta(days=1)
SELECTIONS = {
    "3 days x every engine": D.UiSelection(dates=tuple(D.days(NEWEST, 3)), group=GROUP),
    "3 days x two engines": D.UiSelection(
        dates=tuple(D.days(NEWEST - dt.timedelta(days=4), 3)), group=GROUP, engines=("chatgpt", "claude")
    ),
}
TOLERANCE = 1.05
CODE_ROOT = Path(os.environ.get("VISIBILITY_TEST_CODE_ROOT") or D.ROOT).resolve()


def _cli_syncs(sandbox: SandboxHandle, db: Path, logs: Path, errors: list[str]) -> None:
    """``visibility-sync run`` of each selection, one after the other, into one file (disjoint days)."""
    try:
        for name, selection in SELECTIONS.items():
            outcome = D.run_cli(
                D.cli_args(selection.dates, selection.engines),
                url=sandbox.url,
                key=sandbox.keys["workspace"],
                db=db,
                code_root=CODE_ROOT,
                log_dir=logs,
                timeout=300,
                fresh=False,
            )
            if outcome.exit_code != 0:
                errors.append(
                    f"{name}: visibility-sync run exited {outcome.exit_code}:\n{outcome.output[-2000:]}"
                )
    except Exception as exc:  # reported by the test, not lost in the thread
        errors.append(f"{type(exc).__name__}: {exc}")


@pytest.mark.timeout(600)
def test_ui_backfills_of_the_daily_group_sync_what_the_command_line_syncs_for_the_planners_minimum(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    ui_sandbox: SandboxHandle = sandbox_factory()
    cli_sandbox: SandboxHandle = sandbox_factory()  # same seed and day: the same world
    logs, ui_db, cli_db = tmp_path / "logs", tmp_path / "ui.duckdb", tmp_path / "cli.duckdb"
    cli_errors: list[str] = []
    cli = threading.Thread(target=_cli_syncs, args=(cli_sandbox, cli_db, logs, cli_errors), daemon=True)
    cli.start()  # while the stack starts
    env = {
        "VISIBILITY_API_URL": ui_sandbox.url,
        "VISIBILITY_API_KEY": ui_sandbox.keys["workspace"],
        "VISIBILITY_WAREHOUSE": f"duckdb:///{ui_db}",
        "VISIBILITY_START_DATE": D.START_DATE.isoformat(),
    }
    try:
        with D.dagster_stack(env, code_root=CODE_ROOT, log_dir=logs, timeout=240) as stack:
            ui_sandbox.reset_stats()
            outcomes = dict(
                zip(
                    SELECTIONS, D.run_ui_backfills(stack, list(SELECTIONS.values()), timeout=420), strict=True
                )
            )
            D.wait_idle(stack)
            stats = ui_sandbox.stats()
    finally:
        cli.join(timeout=300)
    assert not cli_errors, "\n".join(cli_errors)

    world = D.read_world(cli_sandbox.url, cli_sandbox.keys["workspace"], CODE_ROOT)
    tables = D.daily_tables(CODE_ROOT)
    minimum: dict[str, int] = {}
    for name, selection in SELECTIONS.items():
        for endpoint, n in D.planner_minimum(
            world, tables, selection.dates, outcomes[name].engines, cli_db, code_root=CODE_ROOT
        ).items():
            minimum[endpoint] = minimum.get(endpoint, 0) + n
    requests = D.served(stats)
    comparison = D.compare_tables(ui_db, cli_db, tables)

    problems: list[str] = []
    for name, outcome in outcomes.items():
        if len(outcome.backfill_ids) != 1:
            problems.append(f"{name}: not one dialog: {outcome.note}")
        if not outcome.succeeded:
            problems.append(
                f"{name}: backfill {outcome.status}, runs {outcome.run_statuses}: {outcome.failures()}"
            )
    empty = [t for t, c in comparison.items() if not c["rows_b"]]
    if empty or not D.same_rows(comparison):
        problems.append(f"rows differ from the command line's (a: UI, b: CLI): {comparison}")
    if requests > TOLERANCE * sum(minimum.values()):
        problems.append(
            f"{requests} requests for a minimum of {sum(minimum.values())} "
            f"({requests / sum(minimum.values()):.2f}x > {TOLERANCE}x)"
        )
    report = {
        "requests": requests,
        "minimum": sum(minimum.values()),
        "requests_by_endpoint": D.by_endpoint(stats),
        "minimum_by_endpoint": minimum,
        "backfills": {
            name: {
                "dialogs": len(o.backfill_ids),
                "targets": o.targets,
                "status": o.status,
                "runs": len(o.runs),
                "run_statuses": o.run_statuses,
                "run_ranges": o.run_ranges(timed=True),
                "wall_seconds": o.wall_seconds,
            }
            for name, o in outcomes.items()
        },
    }
    print(json.dumps(report, indent=1))  # the figures, shown with -rP or on failure
    assert not problems, "\n".join(problems) + "\n" + json.dumps(report, indent=1)
