"""Small syncs from the command line beside a small dlt ``rest_api`` peer, alternated, same sandbox.

    .venv/bin/pip install -e '.[bench]'          # dlt, for the peer only
    .venv/bin/python bench/bench_small.py         # 1 and 2 days of the demo workspace, 3 pairs each

Each pair runs ``visibility-sync run`` over the newest N days and ``bench/dlt_peer.py`` (the nearest
set of tables dlt's ``rest_api`` lands in a few lines), alternating which goes first, each a process
into a fresh DuckDB file against one ``demo`` sandbox: wall, the whole tree's CPU and peak RSS,
requests. Reported: medians and ours / dlt's, under ``## Small syncs beside dlt`` of RESULTS.md.
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import processes as P

ROOT = P.ROOT
SECTION = "## Small syncs beside dlt"
NEWEST = P.SANDBOX_TODAY - dt.timedelta(days=1)


def measure(sandbox: P.SandboxService, who: str, days: int, work: Path) -> P.TreeRun:
    db = work / f"{who}-{days}-{time.time_ns()}.duckdb"
    args = P.cli_args([NEWEST - dt.timedelta(days=i) for i in range(days)], None)
    command, env = None, {}
    if who == "dlt":
        command = [sys.executable, str(ROOT / "bench" / "dlt_peer.py"), "--url", sandbox.url, "--key"]
        command += [sandbox.key, "--db", str(db), "--days", str(days)]
        env = {"DLT_TELEMETRY_DISABLED": "1", "RUNTIME__DLTHUB_TELEMETRY": "false"}
    run = P.measured_cli(sandbox, args, db, log_dir=work, command=command, extra_env=env, timeout=600)
    if run.exit_code != 0:
        print(f"{who} {days} days failed ({run.exit_code}):\n{run.output[-3000:]}", flush=True)
    run.label = f"{who} {days}"
    return run


def render(runs: list[P.TreeRun], days_list: list[int], pairs: int, rate: float) -> list[str]:
    lines = [
        SECTION,
        "",
        f"`bench/bench_small.py --days {','.join(map(str, days_list))} --pairs {pairs}`, "
        f"{P.machine()}; sandbox `demo` workspace, rate limit "
        f"{rate:g} requests/s. Medians of {pairs} alternated pairs; ratio = ours / dlt's.",
        "",
        "| days | figure | ours | dlt `rest_api` | ours / dlt |",
        "|---|---|---|---|---|",
    ]
    for days in days_list:
        ours = [r for r in runs if r.label == f"ours {days}" and r.exit_code == 0]
        peer = [r for r in runs if r.label == f"dlt {days}" and r.exit_code == 0]
        if not ours or not peer:
            lines.append(f"| {days} | (a run failed: ours {len(ours)}, dlt {len(peer)} succeeded) | | | |")
            continue
        for label, get in (
            ("wall s", lambda r: r.wall),
            ("tree CPU s", lambda r: r.cpu),
            ("peak tree RSS MB", lambda r: r.peak_rss_mb),
            ("requests", lambda r: r.requests),
            ("wall ms / request", lambda r: 1000 * r.wall / max(1, r.requests)),
        ):
            a = statistics.median(get(r) for r in ours)
            b = statistics.median(get(r) for r in peer)
            lines.append(f"| {days} | {label} | {a:,.2f} | {b:,.2f} | **{a / b:.2f}x** |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = P.parser(__doc__)
    parser.add_argument("--days", default="1,2")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0)
    args = parser.parse_args(argv)
    P.install_signal_handlers()
    days_list = [int(d) for d in args.days.split(",")]
    work = P.work_folder("bench-small-")
    runs: list[P.TreeRun] = []
    with P.sandbox_service(size="demo", rate=args.rate, log_dir=work) as sandbox:
        for days in days_list:
            for pair in range(args.pairs):
                order = ("ours", "dlt") if pair % 2 == 0 else ("dlt", "ours")
                for who in order:
                    run = measure(sandbox, who, days, work)
                    print(run, flush=True)
                    runs.append(run)
    text = "\n".join(render(runs, days_list, args.pairs, args.rate))
    P.publish(SECTION, text, not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
