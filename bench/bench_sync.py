"""Whole-process-tree benchmark of ``visibility-sync run``: CPU per landed row, pace, memory, one key shared.

    .venv/bin/python bench/bench_sync.py                       # rows (1 and 10 days) + shared key
    .venv/bin/python bench/bench_sync.py --scenarios rows --days 1,4 --rate 100 --no-write
    .venv/bin/python bench/bench_sync.py --scenarios shared --shared-rate 20
    .venv/bin/python bench/bench_sync.py --scenarios shared --shared-tmp private,shared --shared-rounds 2
    .venv/bin/python bench/bench_sync.py --scenarios rows --days 30 --rounds 2 --variant nogc=/tmp/tree

Every figure is a ratio against a bound measured in the same run (the machine is shared), the
command line a process against the sandbox's ``large`` workspace, into a fresh DuckDB file:

* ``rows``: the newest 1 and N days. CPU of the whole tree (``RUSAGE_CHILDREN``), its peak summed
  RSS (sampled every 50 ms) / 400 MB, pace = wall / (requests answered / rate limit), and the
  marginal CPU per landed row (1 -> N days) against the bare decode (``json.loads`` +
  ``pa.Table.from_pylist`` of a sample of the same pages, timed in this process).
* ``shared``: four ``visibility-sync run --brand X`` at once on one key limited to ``--shared-rate``:
  the share of 429s, and the slowest wall against (successful requests / rate); each run with a
  TMPDIR of its own (``--shared-tmp private``, as pods), or one for the four (``shared``).
* ``resume``: a sync SIGKILLed at 90 % of a clean one's requests, then the same command again.

Results go to ``bench/RESULTS.md`` under ``## Sync: whole process tree`` (not with ``--no-write``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import daemon as D
from bench import processes as P

ROOT = P.ROOT
SECTION = "## Sync: whole process tree"
#: ``--scenarios resume`` alone reports here (the other sections stay as measured)
RESUME_SECTION = "## Resume: killed at 90 %, then the same command"
NEWEST = P.SANDBOX_TODAY - dt.timedelta(days=1)
RSS_BOUND_MB = 400.0
CORES = os.cpu_count() or 1


def landed_rows(db: Path) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        tables = [
            (r[0], r[1])
            for r in con.execute(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_type = 'BASE TABLE' AND NOT starts_with(table_name, '_')"
            ).fetchall()
        ]
        return sum(int(con.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchone()[0]) for s, t in tables)


CODE_ROOT = ROOT  # --code-root: another tree (e.g. ``git archive`` of a commit, for a baseline)
EXTRA_ENV: dict[str, str] = {}  # --env NAME=VALUE: settings of the command line under test


#: ``--variant LABEL=TREE``: other code trees whose rows runs alternate with ``CODE_ROOT``'s
VARIANTS: dict[str, Path] = {}


def run_tree(
    sandbox: P.SandboxService,
    label: str,
    args: list[str],
    db: Path,
    log_dir: Path,
    fresh: bool = True,
    code_root: Path | None = None,
) -> P.TreeRun:
    """One ``visibility-sync`` process, measured (:func:`P.measured_cli`), and the rows it landed."""
    run = P.measured_cli(
        sandbox, args, db, log_dir=log_dir, code_root=code_root or CODE_ROOT, extra_env=EXTRA_ENV, fresh=fresh
    )
    run.label, run.rows = label, landed_rows(db) if run.exit_code == 0 else 0
    return run


# ---------------------------------------------------------------------------------------------
# the bare decode


@dataclass(frozen=True)
class SampleRequest:
    """One page of the sample: its path and query, the table its rows land in, and its brand."""

    path: str
    params: dict[str, Any]
    table: str
    brand: str


def sample_requests(sandbox: P.SandboxService, days: int, pages: int) -> list[SampleRequest]:
    """The pages of the three tables that hold most of a sync's rows: answers (two brands' first
    pages), cited pages (one day of two brands on five engines, as the sync asks for them) and prompt
    mentions (over ``days``; the rest of the ``pages``), prompts spread over every brand."""
    start = NEWEST - dt.timedelta(days=days - 1)
    end = P.SANDBOX_TODAY
    headers = {"Authorization": f"Bearer {sandbox.key}"}
    with httpx.Client(base_url=sandbox.url, headers=headers, timeout=60) as http:
        brands = [b["id"] for b in http.get("/v1/brands", params={"limit": 999}).json()["data"]]
        prompts = [
            (p["id"], brand)
            for brand in brands
            for p in http.get(f"/v1/brands/{brand}/prompts").json()["data"]
        ]
    window = {"from": start.isoformat(), "to": end.isoformat(), "limit": 999}
    sample = [
        SampleRequest(f"/v1/brands/{brand}/answers", {**window, "limit": 100}, "answers", brand)
        for brand in brands[:2]
    ]
    one_day = {"from": NEWEST.isoformat(), "to": end.isoformat(), "limit": 2000}
    sample += [
        SampleRequest(
            f"/v1/brands/{brand}/citations/urls", {**one_day, "engine": engine}, "cited_pages", brand
        )
        for brand in brands[:2]
        for engine in ("chatgpt", "claude", "perplexity", "gemini", "copilot")
    ]
    step = max(1, len(prompts) // pages)
    sample += [
        SampleRequest(f"/v1/prompts/{prompt}/mentions", window, "prompt_mentions", brand)
        for prompt, brand in prompts[::step][: pages - len(sample)]
    ]
    return sample


def sample_pages(sandbox: P.SandboxService, days: int, pages: int) -> list[bytes]:
    """Raw bodies of :func:`sample_requests`."""
    headers = {"Authorization": f"Bearer {sandbox.key}"}
    with httpx.Client(base_url=sandbox.url, headers=headers, timeout=60) as http:
        return [_get(http, r.path, r.params) for r in sample_requests(sandbox, days, pages)]


def _get(http: httpx.Client, path: str, params: dict[str, Any]) -> bytes:
    for _ in range(50):
        response = http.get(path, params=params)
        if response.status_code != 429:
            response.raise_for_status()
            return response.content
        time.sleep(1.0)
    raise RuntimeError(f"{path}: still 429 after 50 tries")


def bare_decode_us_per_row(bodies: list[bytes], repeat: int = 3) -> tuple[float, int]:
    """CPU microseconds per row of ``json.loads`` + ``pa.Table.from_pylist`` (best of ``repeat``)."""
    rows = sum(len(json.loads(b)["data"]) for b in bodies)
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for body in bodies:
            pa.Table.from_pylist(json.loads(body)["data"])
        best = min(best, time.process_time() - started)
    return best / rows * 1e6, rows


# ---------------------------------------------------------------------------------------------
# scenarios


def scenario_rows(
    sandbox: P.SandboxService, days: list[int], rate: float, work: Path, rounds: int = 1
) -> list[str]:
    """Each of ``days`` once (``rounds`` times, with each ``VARIANTS`` tree in turn, the first of
    each round rotating)."""
    lines: list[str] = []
    bodies = sample_pages(sandbox, max(days), pages=80)
    runs: dict[int, P.TreeRun] = {}
    alternated: list[tuple[str, P.TreeRun]] = []
    bare_figures: list[float] = []
    trees = [("this tree", CODE_ROOT), *VARIANTS.items()]
    for n, (label, tree) in (
        (n, trees[(i + k) % len(trees)]) for n in days for k in range(rounds) for i in range(len(trees))
    ):
        bare, sample_rows = bare_decode_us_per_row(bodies)
        bare_figures.append(bare)
        dates = [NEWEST - dt.timedelta(days=i) for i in range(n)]
        r = run_tree(
            sandbox, f"{n} days", P.cli_args(dates, None), work / f"rows-{n}.duckdb", work, code_root=tree
        )
        if tree == CODE_ROOT:
            runs[n] = r
        alternated.append((f"{n} days, {label}", r))
        print(
            f"{n} days ({label}): exit {r.exit_code}, wall {r.wall} s, cpu {r.cpu} s, "
            f"peak {r.peak_rss_mb} MB, "
            f"rows {r.rows}, requests {r.requests} ({r.throttled} x 429), peaks {r.peaks_mb}",
            flush=True,
        )
        if r.exit_code != 0:
            print(r.output[-1500:])
    bare = sorted(bare_figures)[len(bare_figures) // 2]
    lines.append(
        f"Bare decode, same run: `json.loads` + `pa.Table.from_pylist` of {len(bodies)} pages "
        f"({sample_rows:,} rows of prompt mentions, answers and cited pages: most of a sync's rows), "
        f"best of 3, median of {len(bare_figures)} measurements taken between the runs: "
        f"**{bare:.2f} µs a row**."
    )
    lines.append("")
    lines.append(
        "| days | exit | rows landed | requests (429) | wall s | wall / (requests / rate) | tree CPU s "
        "| CPU µs / row | sandbox CPU s | CPU floor of the wall | peak tree RSS MB | RSS / 400 MB "
        "| peak of the largest process MB |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, r in runs.items():
        bound = r.requests / rate
        per_row = r.cpu / r.rows * 1e6 if r.rows else float("nan")
        floor = (r.cpu + r.service_cpu) / CORES
        lines.append(
            f"| {n} | {r.exit_code} | {r.rows:,} | {r.requests:,} ({r.throttled}) | {r.wall} | "
            f"{r.wall:.1f} / {bound:.1f} = **{r.wall / bound:.2f}x** | {r.cpu} | {per_row:.1f} | "
            f"{r.service_cpu} | {floor:.1f} / {bound:.1f} = {floor / bound:.2f}x | "
            f"{r.peak_rss_mb} | **{r.peak_rss_mb / RSS_BOUND_MB:.2f}x** | "
            f"{r.peaks_mb.get('command', 0):.0f} |"
        )
    lines.append("")
    lines.append(
        f"CPU floor of the wall: (tree CPU + sandbox CPU) / {CORES} cores, the shortest wall this "
        "machine allows for that work, against the rate bound: above 1.0x, the machine's CPU (the "
        "command's and the service's together), not the rate limit, bounds the pace."
    )
    if len(alternated) > len(days):
        lines += ["", "Alternated runs, in the order run:", ""]
        lines += [
            f"* {label}: wall {r.wall} s = {r.wall / (r.requests / rate):.3f}x the rate bound, tree CPU "
            f"{r.cpu} s, peak tree RSS {r.peak_rss_mb} MB"
            for label, r in alternated
        ]
    small = runs[days[0]]
    for n in days[1:]:
        large = runs[n]
        if large.rows <= small.rows or large.exit_code or small.exit_code:
            continue
        marginal = (large.cpu - small.cpu) / (large.rows - small.rows) * 1e6
        lines.append("")
        lines.append(
            f"Marginal CPU per landed row ({days[0]} -> {n} days): ({large.cpu} - {small.cpu}) s / "
            f"({large.rows:,} - {small.rows:,}) rows = {marginal:.2f} µs; against the bare decode: "
            f"{marginal:.2f} / {bare:.2f} = **{marginal / bare:.2f}x** (target <= 1.5x)."
        )
    return lines


def scenario_shared(
    sandbox: P.SandboxService, rate: float, days: int, work: Path, *, private_tmp: bool = True
) -> list[str]:
    """Four runs, one brand each, one key: 429 share and wall against the rate bound.

    ``private_tmp``: each run gets a TMPDIR of its own, as pods share no local disk."""
    headers = {"Authorization": f"Bearer {sandbox.key}"}
    brands = [b["id"] for b in httpx.get(f"{sandbox.url}/v1/brands", headers=headers).json()["data"]][:4]
    dates = [NEWEST - dt.timedelta(days=i) for i in range(days)]
    sandbox.configure(limits={"rate_per_second": rate, "burst": max(1, int(rate))})
    sandbox.reset_stats()
    before = P.children_cpu()

    def one(brand: str) -> P.CliOutcome:
        args = [*P.cli_args(dates, None)[:-1], "--brand", brand, "--quiet"]
        db = work / f"shared-{brand}.duckdb"
        env = dict(EXTRA_ENV)
        if private_tmp:
            tmp = work / f"tmp-{brand}-{time.time_ns()}"
            tmp.mkdir(mode=0o700)
            env["TMPDIR"] = str(tmp)
        return P.run_cli(
            args,
            url=sandbox.url,
            key=sandbox.key,
            db=db,
            log_dir=work,
            code_root=CODE_ROOT,
            extra_env=env,
            sampler=sampler,
        )

    started = time.monotonic()
    with P.TreeSampler() as sampler, ThreadPoolExecutor(len(brands)) as pool:
        results = dict(zip(brands, pool.map(one, brands), strict=True))
    wall = time.monotonic() - started
    cpu = P.children_cpu() - before
    stats = sandbox.stats()
    total, refused = max(1, P.served(stats)), P.throttled(stats)
    bound = (total - refused) / rate
    codes = sorted({r.exit_code for r in results.values()})
    for brand, r in results.items():
        if r.exit_code != 0:
            print(brand, r.output[-1500:])
    return [
        f"Four `visibility-sync run --brand X` at once (one brand each, {days} day(s), every table), "
        f"one key, {'a TMPDIR each' if private_tmp else 'one TMPDIR'}, "
        f"sandbox rate limit {rate:g} requests/s (burst {int(rate)}): exit codes {codes}; "
        f"{total:,} requests, {refused:,} answered 429 = **{refused / total:.1%}** (target <= 3 %); "
        f"wall {wall:.1f} s / ({total - refused:,} successful requests / {rate:g}/s = {bound:.1f} s) = "
        f"**{wall / bound:.2f}x** (target <= 1.15x); tree CPU {cpu:.1f} s; peak RSS of the four trees "
        f"{sampler.peak / 2**20:.0f} MB."
    ]


#: Listings every sync makes before it plans: a resumed run asks them again (not calls it can skip).
LISTINGS = ("GET /v1/brands", "/prompts", "/tracked-competitors", "/topics", "/generations", "/competitors")


def listing_requests(stats: dict[str, dict[str, int]]) -> int:
    return sum(sum(v.values()) for endpoint, v in stats.items() if endpoint.endswith(LISTINGS))


def scenario_resume(
    sandbox: P.SandboxService, days: int, rate: float, work: Path, kill_at: float = 0.9
) -> list[str]:
    """A clean sync; the same sync killed (SIGKILL of its process group) once it made ``kill_at`` of
    the clean one's requests; the same command again (same TMPDIR, same DuckDB file)."""
    tmp = work / "resume-tmp"
    tmp.mkdir(exist_ok=True)
    EXTRA_ENV["TMPDIR"] = str(tmp)
    args = P.cli_args([NEWEST - dt.timedelta(days=i) for i in range(days)], None)
    clean = run_tree(sandbox, "clean", args, work / "resume-clean.duckdb", work)
    clean_listings = listing_requests(sandbox.stats())
    db = work / "resume-killed.duckdb"
    due = lambda: P.served(sandbox.stats()) >= kill_at * clean.requests  # noqa: E731
    killed = P.measured_cli(
        sandbox, args, db, log_dir=work, code_root=CODE_ROOT, extra_env=EXTRA_ENV, kill_when=due
    )
    killed_after, killed_requests = killed.wall, killed.requests
    kept_mb = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) / 2**20
    rerun = run_tree(sandbox, "re-run", args, db, work, fresh=False)
    rerun_listings = listing_requests(sandbox.stats())
    # rows equal in every table, every column but those a run sets anew
    comparison = (
        D.compare_tables(work / "resume-clean.duckdb", db, drop=D.RUN_COLUMNS) if rerun.exit_code == 0 else {}
    )
    differ = [f"{t}: {c}" for t, c in comparison.items() if not D.same_rows({t: c})]
    equal = bool(comparison) and not differ
    detail = "; ".join(differ) or (f"{len(comparison)} tables" if comparison else "failed")
    left = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
    EXTRA_ENV.pop("TMPDIR")
    ratio = rerun.requests / clean.requests
    calls = (rerun.requests - rerun_listings) / max(1, clean.requests - clean_listings)
    print(f"resume: clean {clean}, killed at {killed_requests} after {killed_after:.1f} s, rerun {rerun}")
    return [
        f"Large workspace, newest {days} days, every table, rate limit {rate:g} requests/s. A clean "
        f"`visibility-sync run` (exit {clean.exit_code}): {clean.requests:,} requests "
        f"({clean_listings} of them listings), {clean.rows:,} rows, {clean.wall} s. The same command "
        f"into a fresh DuckDB file, SIGKILLed (its process group) at {killed_requests:,} requests "
        f"({killed_requests / clean.requests:.0%} of the clean run's, {killed_after:.1f} s in); "
        f"journal kept under TMPDIR: {kept_mb:.1f} MB. The same command again (exit {rerun.exit_code}): "
        f"**{rerun.requests:,} / {clean.requests:,} = {ratio:.1%}** of the clean run's requests "
        f"(target <= 15 %); without the listings every sync makes ({rerun_listings} and "
        f"{clean_listings}): {calls:.1%}; wall {rerun.wall} s / {clean.wall} s = "
        f"{rerun.wall / clean.wall:.2f}x; tree CPU {rerun.cpu} s / {clean.cpu} s. Rows equal to the clean "
        f"run's: **{'yes' if equal else 'NO'}** "
        f"({detail}); files left under TMPDIR after the re-run: {len(left)}.",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = P.parser(__doc__)
    parser.add_argument("--scenarios", default="rows,shared")
    parser.add_argument("--days", default="1,10", help="days of the rows scenario (first: the base)")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--shared-rate", type=float, default=20.0)
    parser.add_argument("--shared-days", type=int, default=3)
    parser.add_argument(
        "--shared-tmp",
        default="private",
        help="comma list of private (a TMPDIR per run, as pods) and shared (one TMPDIR): run in turn",
    )
    parser.add_argument("--shared-rounds", type=int, default=1, help="repeat the --shared-tmp list")
    parser.add_argument("--resume-days", type=int, default=10)
    parser.add_argument("--code-root", type=Path, default=ROOT, help="the tree whose CLI runs")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL=TREE")
    parser.add_argument("--rounds", type=int, default=1, help="rows: each day count this often per tree")
    parser.add_argument(
        "--shared-baseline", type=Path, help="a tree (git archive of a commit) whose four runs go first"
    )
    args = parser.parse_args(argv)
    global CODE_ROOT
    CODE_ROOT = args.code_root.resolve()
    EXTRA_ENV.update(item.split("=", 1) for item in args.env)
    VARIANTS.update((label, Path(tree).resolve()) for label, tree in (v.split("=", 1) for v in args.variant))
    P.install_signal_handlers()
    scenarios = args.scenarios.split(",")
    work = P.work_folder("bench-sync-")
    section = RESUME_SECTION if scenarios == ["resume"] else SECTION
    header = [
        section,
        "",
        f"`bench/bench_sync.py --scenarios {args.scenarios} --days {args.days} "
        f"--resume-days {args.resume_days} --rate {args.rate:g}`, "
        f"{P.machine('at the start')}, code {P.code_label()}"
        f"{'' if CODE_ROOT == ROOT else f' (command line from {CODE_ROOT})'}. Sandbox `large` "
        "workspace in its own process; dates end on 2026-10-31.",
        "",
    ]
    lines: list[str] = []
    with P.sandbox_service(size="large", rate=args.rate, log_dir=work) as sandbox:
        if "rows" in scenarios:
            days = [int(d) for d in args.days.split(",")]
            lines += [f"### CPU per landed row, pace, memory (rate limit {args.rate:g} requests/s)", ""]
            lines += scenario_rows(sandbox, days, args.rate, work, args.rounds)
            lines.append("")
        if "shared" in scenarios:
            lines += ["### One key, four runs", ""]
            if args.shared_baseline is not None:
                current, CODE_ROOT = CODE_ROOT, args.shared_baseline.resolve()
                lines.append(f"Before (the command line of `{args.shared_baseline}`, same sandbox and run):")
                lines += scenario_shared(sandbox, args.shared_rate, args.shared_days, work)
                lines += ["", "Now:"]
                CODE_ROOT = current
            for mode in args.shared_tmp.split(",") * args.shared_rounds:
                lines += scenario_shared(
                    sandbox, args.shared_rate, args.shared_days, work, private_tmp=mode == "private"
                )
                print(lines[-1], flush=True)
                lines.append("")
        if "resume" in scenarios:
            if section != RESUME_SECTION:
                lines += ["### Resume: killed at 90 %, then the same command", ""]
            lines += scenario_resume(sandbox, args.resume_days, args.rate, work)
            lines.append("")
    text = "\n".join(header + lines)
    P.publish(section, text, not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
