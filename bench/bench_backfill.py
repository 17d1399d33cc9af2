"""Backfill benchmark: backfills launched as the Dagster UI launches them, run by the real daemon.

    .venv/bin/python bench/bench_backfill.py                 # large workspace, 3 / 10 / 30 days
    .venv/bin/python bench/bench_backfill.py --quick         # demo workspace, 3 days, a few scenarios
    .venv/bin/python bench/bench_backfill.py --scenarios mentions,small --days 3 --size demo --no-write
    .venv/bin/python bench/bench_backfill.py --pods --scenarios group --days 10  # runs as pods (root)

Scenarios (``--scenarios``, each over every ``--days``): ``mentions`` (a), ``daily`` (b: mentions
and answers), ``engines`` (c: the daily group over ``--subset-engines``), ``group`` (d: the group's
*Materialize all*), ``date`` (e: the group, the newest date), and ``small``: ``visibility-sync run``
of ``--small-days`` days of the demo workspace, and with ``--small-daemon`` the schedules' runs of
that day through the daemon. Each backfill goes through ``bench/daemon.py``'s stack, beside
``visibility-sync run`` over the same selection; requests are set against the planner's minimum.
The method is written with the figures, under ``## Backfill`` of ``bench/RESULTS.md``.

``--pods``: the production instance settings (``deploy/dagster.yaml``) with each run a pod of its own
(``tests/pods.py``: ``unshare --mount``, private tmpfs over the instance's local storage and TMPDIR);
each backfill also reports what its pods left on their disks and its runs' span (launch to the last
run's end, Dagster's pickup excluded) against the command line's wall. Figures are printed (JSON),
not written: ``## Backfill whose runs are pods`` of ``bench/RESULTS.md`` quotes them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import daemon as D
from bench import processes as P
from bench.processes import RESULTS, ROOT, code_label, machine, write_section
from tests import pods

SECTION = "## Backfill"
NEWEST = P.SANDBOX_TODAY - dt.timedelta(days=1)
DAILY_GROUP = "visibility_daily"
#: The spec's engines and the rollup, spelled out: the code under test may be another tree.
ENGINES_WITH_ALL = ("chatgpt", "claude", "perplexity", "gemini", "google_ai_overviews", "google_ai_mode")
ENGINES_WITH_ALL += ("copilot", "all")


@dataclass(frozen=True)
class Selection:
    name: str
    letter: str
    title: str
    assets: tuple[str, ...] = ()
    group: str | None = None
    subset: bool = False  # the --subset-engines instead of every engine
    one_date: bool = False


SELECTIONS = {
    s.name: s
    for s in (
        Selection("mentions", "a", "`prompt_mentions`, every engine", assets=("prompt_mentions",)),
        Selection(
            "daily", "b", "`prompt_mentions` + `answers`, every engine", assets=("prompt_mentions", "answers")
        ),
        Selection(
            "engines", "c", "the `visibility_daily` group, two engines", group=DAILY_GROUP, subset=True
        ),
        Selection("group", "d", "the `visibility_daily` group's *Materialize all*", group=DAILY_GROUP),
        Selection("date", "e", "the group, one date (every engine)", group=DAILY_GROUP, one_date=True),
    )
}
SCENARIO_NAMES = (*SELECTIONS, "small")


# ---------------------------------------------------------------------------------------------
# measurements


def request_figures(sb: P.SandboxService, minimum: dict[str, int], wall: float) -> dict[str, Any]:
    """The figures every scenario reports: requests against the planner's minimum, wall against the
    rate bound (the same keys for the command line and the UI, so RESULTS.md reads them alike)."""
    stats = sb.stats()
    requests = D.served(stats)
    bound = requests / sb.rate
    return {
        "requests": requests,
        "responses_429": P.throttled(stats),
        "minimum": sum(minimum.values()),
        "minimum_by_endpoint": minimum,
        "requests_by_endpoint": D.by_endpoint(stats),
        "requests_vs_minimum": ratio(requests, sum(minimum.values())),
        "wall_seconds": round(wall, 2),
        "rate_bound_seconds": round(bound, 2),
        "wall_vs_rate_bound": ratio(wall, bound),
        "overhead_seconds": round(wall - bound, 2),
    }


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def measure_cli(
    sb: P.SandboxService,
    world: D.World,
    dates: list[dt.date],
    engines: tuple[str, ...] | None,
    db: Path,
    args: argparse.Namespace,
    kind: str = "cli",
) -> dict[str, Any]:
    """``visibility-sync run`` over ``dates`` x ``engines`` (None: its default, every engine and all)."""
    sb.reset_stats()
    cli_args = D.cli_args(dates, engines)
    outcome = D.run_cli(cli_args, url=sb.url, key=sb.key, db=db, code_root=args.code_root, log_dir=args.logs)
    all_tables = D.daily_tables(args.code_root)
    minimum = D.planner_minimum(
        world, all_tables, dates, engines or ENGINES_WITH_ALL, db, snapshots=True, code_root=args.code_root
    )
    result = {
        "kind": kind,
        "days": len(dates),
        "engines": list(engines or ()),
        "args": " ".join(cli_args),
        "exit_code": outcome.exit_code,
        **request_figures(sb, minimum, outcome.wall_seconds),
        "db": str(db),
    }
    if outcome.exit_code != 0:
        result["output_tail"] = outcome.output[-1500:]
    print(json.dumps(result), flush=True)
    return result


def measure_ui(
    stack: D.DagsterStack,
    sb: P.SandboxService,
    world: D.World,
    selection: Selection,
    dates: list[dt.date],
    engines: tuple[str, ...] | None,
    cli: dict[str, Any] | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One selection launched from the UI's dialog(s), run by the daemon, polled to the end."""
    ui_db = args.out / "ui.duckdb"
    for path in (ui_db, Path(f"{ui_db}.wal")):
        path.unlink(missing_ok=True)
    D.wait_idle(stack)
    sb.reset_stats()
    picked = D.UiSelection(tuple(dates), selection.assets, selection.group, engines or None)
    outcome = D.run_ui_backfills(stack, [picked], args.timeout)[0]
    D.wait_idle(stack)
    tables = [t for t in outcome.tables if t in D.daily_tables(args.code_root)]
    landed = Path(cli["db"]) if cli and Path(cli["db"]).exists() else ui_db
    minimum = D.planner_minimum(world, tables, dates, outcome.engines, landed, code_root=args.code_root)
    span = outcome.runs_span
    result: dict[str, Any] = {
        "first_date": dates[0].isoformat(),
        "engines": outcome.engines,
        "tables": tables,
        "dialogs": len(outcome.backfill_ids),
        "targets": outcome.targets,
        "jobs": outcome.jobs,
        "note": outcome.note,
        "partitions": outcome.partitions,
        "backfill_status": outcome.status,
        "succeeded": outcome.succeeded,
        "runs": len(outcome.runs),
        "run_statuses": outcome.run_statuses,
        "run_ranges": outcome.run_ranges(timed=True),
        "run_failures": outcome.failures(),
        **request_figures(sb, minimum, outcome.wall_seconds),
        "runs_span_seconds": round(span[1] - span[0], 2) if span else None,
        "pickup_seconds": round(span[0] - outcome.launched_at, 2) if span else None,
        "tail_seconds": round(outcome.ended_at - span[1], 2) if span else None,
    }
    if cli and span:
        result["runs_span_vs_cli_wall"] = ratio(span[1] - span[0], cli["wall_seconds"])
    if args.pods:
        left = pods.pods_left(stack.home / "pods")
        mine = {run["runId"] for run in outcome.runs}
        result["pods_reported"] = len(mine & set(left))
        result["pods_left_files"] = sum(len(files) for run_id, files in left.items() if run_id in mine)
    if cli and ui_db.exists() and Path(cli["db"]).exists():
        comparison = D.compare_tables(ui_db, Path(cli["db"]), tables)
        result["rows"] = sum(c["rows_a"] for c in comparison.values())
        result["rows_equal_cli"] = D.same_rows(comparison)
        if not result["rows_equal_cli"]:
            result["rows_comparison"] = comparison
    return result


def backfill_scenarios(args: argparse.Namespace, selected: list[Selection]) -> dict[str, Any]:
    """The CLI runs first (nothing else running), then the stack and the UI backfills."""
    plan: list[tuple[Selection, list[dt.date], tuple[str, ...] | None]] = []
    for selection in selected:
        for n in [1] if selection.one_date else args.days:
            plan.append((selection, D.days(NEWEST, n), args.subset_engines if selection.subset else None))
    results: dict[str, Any] = {"ui": [], "cli": {}, "stack": {}}
    with P.sandbox_service(size=args.size, rate=args.rate, code_root=args.code_root, log_dir=args.logs) as sb:
        world = D.read_world(sb.url, sb.key, args.code_root)
        cli_by_key = results["cli"]
        for _, dates, engines in plan:
            key = f"{len(dates)}d-{'-'.join(engines) if engines else 'all'}"
            if key not in cli_by_key and not args.no_cli:
                cli_by_key[key] = measure_cli(sb, world, dates, engines, args.out / f"cli-{key}.duckdb", args)
        with D.dagster_stack(
            P.cli_env(sb.url, sb.key, args.out / "ui.duckdb", args.code_root),
            code_root=args.code_root,
            log_dir=args.logs,
            instance_yaml=pods.pod_instance_yaml if args.pods else None,
        ) as stack:
            results["stack"] = dict(stack.started_seconds)
            for selection, dates, engines in plan:
                key = f"{len(dates)}d-{'-'.join(engines) if engines else 'all'}"
                about = {"kind": "ui", "scenario": selection.name, "letter": selection.letter}
                about.update(title=selection.title, days=len(dates), cli_key=key)
                try:
                    result = measure_ui(
                        stack, sb, world, selection, dates, engines, cli_by_key.get(key), args
                    )
                except Exception as exc:  # the next scenario still runs; the failure is reported
                    traceback.print_exc()
                    result = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                results["ui"].append({**about, **result})
                print(json.dumps(results["ui"][-1]), flush=True)
    return results


def small_syncs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``visibility-sync run`` of a few days (demo workspace), and optionally the schedules' runs."""
    out: list[dict[str, Any]] = []
    with P.sandbox_service(size="demo", rate=args.rate, code_root=args.code_root, log_dir=args.logs) as sb:
        world = D.read_world(sb.url, sb.key, args.code_root)
        for n in args.small_days:
            db = args.out / f"small-{n}d.duckdb"
            out.append(measure_cli(sb, world, D.days(NEWEST, n), None, db, args, kind="small"))
        for n in args.small_days if args.small_daemon else ():
            db = args.out / f"small-daemon-{n}d.duckdb"
            env = P.cli_env(sb.url, sb.key, db, args.code_root, VISIBILITY_LOOKBACK_DAYS=str(n - 1))
            with D.dagster_stack(env, code_root=args.code_root, log_dir=args.logs) as stack:
                at = dt.datetime.combine(P.SANDBOX_TODAY, dt.time(3, 0), tzinfo=dt.UTC)
                params = D.schedule_runs(stack, at)
                sb.reset_stats()
                launched = time.time()
                runs = D.wait_runs(stack, D.launch_runs(stack, params), timeout=args.timeout)
                minimum = next(r for r in out if r["kind"] == "small" and r["days"] == n)[
                    "minimum_by_endpoint"
                ]
                result = {
                    "kind": "small-daemon",
                    "days": n,
                    "runs": len(runs),
                    "jobs": sorted(r["jobName"] for r in runs),
                    "run_statuses": sorted(r["status"] for r in runs),
                    **request_figures(sb, minimum, max(r["endTime"] for r in runs) - launched),
                    "pickup_seconds": round(min(r["startTime"] for r in runs) - launched, 2),
                }
            print(json.dumps(result), flush=True)
            out.append(result)
    return out


# ---------------------------------------------------------------------------------------------
# RESULTS.md


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ui_row(r: dict[str, Any], cli: dict[str, Any] | None) -> str:
    if "error" in r:
        return f"| {r['days']} | failed: {r['error']} |" + " |" * 7
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(r["run_statuses"].items()))
    dialogs = f"{r['dialogs']} ({', '.join(r['targets'])})"
    cells = [
        str(r["days"]),
        dialogs,
        f"{r['runs']} ({statuses})",
        r["backfill_status"],
        f"{r['requests']:,} / {r['minimum']:,} = **{_x(r['requests_vs_minimum'])}**",
        f"{r['wall_seconds']} s / {r['rate_bound_seconds']} s = **{_x(r['wall_vs_rate_bound'])}**",
        f"{r['pickup_seconds']} / {r['runs_span_seconds']} / {r['tail_seconds']}",
        {True: "yes", False: "**no**"}.get(r.get("rows_equal_cli"), "-"),
    ]
    if cli:
        cells += [
            f"{cli['requests']:,} / {cli['minimum']:,} = {_x(cli['requests_vs_minimum'])}",
            f"{cli['wall_seconds']} s / {cli['rate_bound_seconds']} s = {_x(cli['wall_vs_rate_bound'])}"
            + ("" if cli["exit_code"] == 0 else f" (exit {cli['exit_code']})"),
        ]
    else:
        cells += ["-", "-"]
    return "| " + " | ".join(cells) + " |"


def write_results(args: argparse.Namespace, backfills: dict[str, Any], small: list[dict[str, Any]]) -> None:
    lines = [
        SECTION,
        "",
        f"`bench/bench_backfill.py{args.shown}`, "
        f"{machine()}, code: {args.code_label}. Sandbox `{args.size}` workspace in its own process, "
        f"rate limit {args.rate:g} requests/s, no faults; dates end on {NEWEST} (the sandbox's newest day).",
        "",
        "Method. Each backfill goes through the real stack (`bench/daemon.py`): `dagster-webserver` and "
        "`dagster-daemon run` as `dagster dev` starts them, on a fresh `DAGSTER_HOME` with the project's "
        "`dagster.yaml` and `workspace.yaml`. It is launched with the GraphQL the UI's *Materialize* dialog "
        "sends (`launchPartitionBackfill`: `assetSelection` and `partitionNames`, `date|engine` keys, plus "
        "a `selector` when the assets' first common job is a user job, or `allPartitions` where the dialog "
        "offers no range; built by the rules of `LaunchAssetExecutionButton` / "
        "`LaunchAssetChoosePartitionsDialog` of the installed UI; one dialog per partitions definition "
        "where one cannot take a date range, as a user would do). The daemon runs it; "
        "`partitionBackfillOrError` is polled to the end, the runs read by their `dagster/backfill` tag. "
        "The sandbox counts the requests (every status, 429s and retries included). The planner's "
        "minimum: the pure planner's calls for the whole selection, the further pages of paged calls "
        "(from the rows landed), one discovery. Wall: from the mutation to the backfill seen finished "
        "(polled each second); runs span: first run start to last run end, with the daemon's pickup "
        "before it and the tail after it (the backfill daemon loops every 30 s). Beside each, "
        "`visibility-sync run` over the same dates and engines into a fresh DuckDB file (it syncs the "
        "snapshots and every partitioned table: its minimum is that of every table plus the snapshot "
        "listings, each once); `rows = CLI`: the backfill's tables hold exactly the command line's rows "
        "(every column but `_loaded_at` and `_run_id`).",
        "",
        "Targets: requests <= 1.05 x the planner's minimum; wall <= 1.2 x requests / rate limit.",
        "",
        "Reading the figures. Dagster splits a backfill of a `date x engine` selection into one run per "
        "key range of the selection's smaller dimension (`get_partition_key_ranges` of the "
        "multi-partitions subset, asset and job backfills alike): 3 days x 7 engines is 3 runs of one "
        "day each, 10 days x 7 engines 7 runs of one engine each; a dialog per partitions definition "
        "doubles that. Each run plans and fetches its own range unless the runs of a backfill share "
        "their fetch. Runs of backfills wait on `dagster.yaml`'s `dagster/backfill` limit (2 at a "
        "time) and each pays a run process start; the backfill daemon picks a backfill up and closes "
        "it on its 30-second loop, which is most of the wall time of a small backfill.",
        "",
    ]
    by_scenario: dict[str, list[dict[str, Any]]] = {}
    for r in backfills.get("ui", []):
        by_scenario.setdefault(r["scenario"], []).append(r)
    header = (
        "| days | dialogs (target) | runs (status) | backfill | requests / minimum "
        "| wall / (requests / rate) | s to first run / runs / after last run | rows = CLI "
        "| CLI requests / minimum | CLI wall / (requests / rate) |"
    )
    for rows in by_scenario.values():
        first = rows[0]
        lines += [f"### ({first['letter']}) {first['title']}", "", header, "|" + "---|" * 10]
        for r in rows:
            lines.append(_ui_row(r, backfills.get("cli", {}).get(r.get("cli_key", ""))))
        lines.append("")
        for r in (r for r in rows if "error" not in r):
            days = f"{r['days']} day{'s' * (r['days'] > 1)}"
            detail = [f"- {days}: runs (s since the launch) {', '.join(r['run_ranges'])}", r.get("note")]
            detail.append(r.get("run_failures") and f"run failures: {'; '.join(r['run_failures'])}")
            detail.append(r.get("responses_429") and f"{r['responses_429']} answered 429")
            lines.append("; ".join(filter(None, detail)) + ".")
        lines.append("")
    if backfills.get("stack"):
        lines += [
            "Stack start-up: webserver and code location ready after "
            f"{backfills['stack'].get('webserver')} s, daemon healthy after "
            f"{backfills['stack'].get('daemon')} s.",
            "",
        ]
    if small:
        lines += [
            "### Small syncs (demo workspace)",
            "",
            "`visibility-sync run` of the newest N days, every engine, as a process (Python start-up, "
            "imports, Dagster's ephemeral instance and runs included); fixed overhead = wall - requests "
            "/ rate. `daemon`: the schedules' runs of that day (the *Test schedule* dialog's dry run and "
            "*Launch all*, `launchMultipleRuns`) on a stack started with `VISIBILITY_LOOKBACK_DAYS` = N - 1, "
            "wall from the launch to the last run's end; `pickup` is the part of it before the run "
            "started (the run queue, the run worker's process start and its load of the code location).",
            "",
            "| days | layout | runs | requests / minimum | requests / rate s | wall s | fixed overhead s "
            "| of which pickup s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in small:
            layout = "daemon" if r["kind"] == "small-daemon" else "command line"
            runs = r.get("runs", "-")
            exit_note = "" if r.get("exit_code", 0) == 0 else f" (exit {r['exit_code']})"
            lines.append(
                f"| {r['days']} | {layout} | {runs} | {r['requests']:,} / {r['minimum']:,} = "
                f"{_x(r['requests_vs_minimum'])} | {r['rate_bound_seconds']} "
                f"| {r['wall_seconds']}{exit_note} | {r['overhead_seconds']} "
                f"| {r.get('pickup_seconds', '-')} |"
            )
        lines.append("")
    write_section(SECTION, "\n".join(lines))


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = P.parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="demo size, 3 days, a few scenarios, no write")
    parser.add_argument("--size", choices=("demo", "large"), default=None, help="sandbox workspace (large)")
    parser.add_argument("--days", type=_ints, default=None, help="day counts, e.g. 3,10,30")
    parser.add_argument("--scenarios", help=f"comma separated among {', '.join(SCENARIO_NAMES)}")
    parser.add_argument(
        "--subset-engines", default="chatgpt,claude", help="engines of the `engines` scenario"
    )
    parser.add_argument("--small-days", type=_ints, default=[1, 2, 4])
    parser.add_argument(
        "--small-daemon",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="small syncs through the daemon too (default: yes, but not with --quick)",
    )
    parser.add_argument("--rate", type=float, default=50.0, help="sandbox rate limit, requests/s")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per backfill")
    parser.add_argument("--code-root", type=Path, default=ROOT, help="code tree under test")
    parser.add_argument("--code-label", default=None, help="how RESULTS.md names the code under test")
    parser.add_argument("--no-cli", action="store_true", help="skip the command line's runs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "backfill")
    parser.add_argument("--write", action="store_true", help="write RESULTS.md even with --quick")
    parser.add_argument("--pods", action="store_true", help="each run a pod of its own (root); no write")
    args = parser.parse_args(argv)
    # the command line without the options that only say where things are
    args.shown = re.sub(r" --(code-label|out|code-root)[= ]\S+", "", "".join(f" {a}" for a in argv))
    args.size = args.size or ("demo" if args.quick else "large")
    if args.small_daemon is None:
        args.small_daemon = not args.quick
    args.days = args.days or ([3] if args.quick else [3, 10, 30])
    default = "mentions,engines,group,date,small" if args.quick else ",".join(SCENARIO_NAMES)
    args.scenarios = [s.strip() for s in (args.scenarios or default).split(",") if s.strip()]
    unknown = sorted(set(args.scenarios) - set(SCENARIO_NAMES))
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose among {', '.join(SCENARIO_NAMES)}")
    args.subset_engines = tuple(e.strip() for e in args.subset_engines.split(",") if e.strip())
    args.code_root = args.code_root.resolve()
    args.code_label = args.code_label or code_label(args.code_root)
    args.write_results = not args.no_write and not args.pods and (args.write or not args.quick)
    args.logs = args.out / "logs"
    return args


def main(argv: list[str]) -> int:
    P.install_signal_handlers()
    args = parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    selected = [SELECTIONS[name] for name in args.scenarios if name in SELECTIONS]
    backfills: dict[str, Any] = {}
    small: list[dict[str, Any]] = []
    try:
        if selected:
            backfills = backfill_scenarios(args, selected)
        if "small" in args.scenarios:
            small = small_syncs(args)
    finally:
        P.Service.stop_all()
    if args.write_results:
        write_results(args, backfills, small)
        print(f"figures: {RESULTS}")
    failed = [r for r in backfills.get("ui", []) if "error" in r or not r.get("succeeded")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
