"""Small syncs from the command line beside a small dlt ``rest_api`` peer, alternated, same sandbox.

    .venv/bin/pip install -e '.[bench]'          # dlt, for the peer only
    .venv/bin/python bench/bench_small.py         # 1 and 2 days of the demo workspace, 3 pairs each

Each pair runs ``visibility-sync run`` over the newest N days (every table) and ``bench/dlt_peer.py``
(the nearest set dlt's ``rest_api`` lands in a few lines: the five snapshot tables, prompt mentions
and answers), one after the other, the order alternating from pair to pair; both are processes
into a fresh DuckDB file, against one sandbox (``demo`` workspace, its own process, rate limit
``--rate``). Per run: wall, the CPU of the whole process tree (``RUSAGE_CHILDREN``: every
descendant is waited for), the peak of the tree's summed RSS, and the requests the sandbox answered.
Reported: medians, and ours / dlt's for each figure (the bound measured in the same run), plus
the wall per request (ours lands more tables, so it sends more requests).
Results go to ``bench/RESULTS.md`` under ``## Small syncs beside dlt`` (not with ``--no-write``).
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import processes as P

ROOT = P.ROOT
SECTION = "## Small syncs beside dlt"
NEWEST = P.SANDBOX_TODAY - dt.timedelta(days=1)


@dataclass
class Run:
    who: str
    days: int
    exit_code: int
    wall: float
    cpu: float
    peak_mb: float
    requests: int


def measure(sandbox: P.SandboxService, who: str, days: int, work: Path) -> Run:
    db = work / f"{who}-{days}-{time.time_ns()}.duckdb"
    if who == "ours":
        dates = [NEWEST - dt.timedelta(days=i) for i in range(days)]
        cmd = [sys.executable, "-m", "pipelines.cli", *P.cli_args(dates, None)]
        env = P.cli_env(sandbox.url, sandbox.key, db)
    else:
        cmd = [
            sys.executable,
            str(ROOT / "bench" / "dlt_peer.py"),
            "--url",
            sandbox.url,
            "--key",
            sandbox.key,
        ]
        cmd += ["--db", str(db), "--days", str(days)]
        env = P.code_env(ROOT, DLT_TELEMETRY_DISABLED="1", RUNTIME__DLTHUB_TELEMETRY="false")
    sandbox.reset_stats()
    before = P.children_cpu()
    sampler = P.TreeSampler()
    with sampler:
        started = time.monotonic()
        service = P.Service(who, cmd, env, ROOT, work / f"{who}-{days}.log")
        sampler.watch(service.pid)
        try:
            code = service.proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            code = -1
        wall = time.monotonic() - started
        service.stop(grace=5)
    cpu = P.children_cpu() - before
    if code != 0:
        print(f"{who} {days} days failed ({code}):\n{service.tail()}", flush=True)
    return Run(
        who,
        days,
        code,
        round(wall, 2),
        round(cpu, 2),
        round(sampler.peak / 2**20, 1),
        P.served(sandbox.stats()),
    )


def render(runs: list[Run], days_list: list[int], pairs: int, rate: float) -> list[str]:
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
        ours = [r for r in runs if r.who == "ours" and r.days == days and r.exit_code == 0]
        peer = [r for r in runs if r.who == "dlt" and r.days == days and r.exit_code == 0]
        if not ours or not peer:
            lines.append(f"| {days} | (a run failed: ours {len(ours)}, dlt {len(peer)} succeeded) | | | |")
            continue
        for label, get in (
            ("wall s", lambda r: r.wall),
            ("tree CPU s", lambda r: r.cpu),
            ("peak tree RSS MB", lambda r: r.peak_mb),
            ("requests", lambda r: r.requests),
            ("wall ms / request", lambda r: 1000 * r.wall / max(1, r.requests)),
        ):
            a = statistics.median(get(r) for r in ours)
            b = statistics.median(get(r) for r in peer)
            lines.append(f"| {days} | {label} | {a:,.2f} | {b:,.2f} | **{a / b:.2f}x** |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", default="1,2")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    P.install_signal_handlers()
    days_list = [int(d) for d in args.days.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-small-"))
    atexit.register(shutil.rmtree, work, True)  # its databases and logs go with the benchmark
    runs: list[Run] = []
    with P.sandbox_service(size="demo", rate=args.rate, log_dir=work) as sandbox:
        for days in days_list:
            for pair in range(args.pairs):
                order = ("ours", "dlt") if pair % 2 == 0 else ("dlt", "ours")
                for who in order:
                    run = measure(sandbox, who, days, work)
                    print(run, flush=True)
                    runs.append(run)
    text = "\n".join(render(runs, days_list, args.pairs, args.rate))
    print(text)
    if not args.no_write:
        P.write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
