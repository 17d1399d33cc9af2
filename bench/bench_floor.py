"""Where a large sync's wall and CPU go, and the floor the stack's own parts set under them.

    .venv/bin/python bench/bench_floor.py                      # 30 days at 200 requests/s
    .venv/bin/python bench/bench_floor.py --days 10 --no-write

Three measurements, in one run, against one ``large`` sandbox on loopback (the machine is shared, so
every figure is compared with another taken in the same run):

* **Timeline of the command line** (``visibility-sync run`` over the newest ``--days`` days, as a
  process, into a fresh DuckDB file): every second, the requests the sandbox answered by endpoint, the
  CPU of the command's process (in cores), of its children and of the sandbox, and how busy the
  machine was. Seconds are grouped into phases by the endpoint most asked. A phase whose requests stay
  below the rate limit while the command's process uses about one core and the machine still has a
  core to spare is bound by the command's one interpreter lock, not by the service or the machine.
* **The fetch alone**: the command line's head start (``sync.head_start``: the same listings and
  fetches of the date x engine tables, the same budget and journal) for the same days, in a process of
  its own without Dagster and without landing: the pace one interpreter reaches with nothing else to do.
* **Floor of CPU per landed row** (this process, one thread, the same pages): what one request costs
  the HTTP stack alone (httpx, as the client is set up; and the standard library's ``http.client``),
  the bare decode (``json.loads`` + ``pa.Table.from_pylist``, the yardstick of issue 21's item 0),
  the client's call with its table (decode, validation, Arrow), and landing a row in DuckDB (a child
  process, ``sync.landing.land``). The floor of a sync's CPU per row is its transport per request
  spread over the rows a request brings in this sync, plus the bare decode, plus the landing: what
  the stack costs even if everything of ours were free.

Results go to ``bench/RESULTS.md`` under ``## Floor: where the wall and the CPU go`` (not with
``--no-write``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import http.client
import json
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_landing as L
from bench import bench_sync as S
from bench import processes as P

SECTION = "## Floor: where the wall and the CPU go"
NEWEST = P.SANDBOX_TODAY - dt.timedelta(days=1)
#: A phase is "below the rate" under this share of it, the command's process uses "about one core"
#: within these bounds, and the machine is "saturated" from this share of all its cores busy.
BELOW_RATE = 0.85
ONE_CORE = (0.8, 1.45)
SATURATED = 0.9


# ---------------------------------------------------------------------------------------------
# the timeline


@dataclass
class Second:
    at: float
    requests: dict[str, int]
    command_cores: float
    children_cores: float
    sandbox_cores: float
    machine_busy: float  # share of all cores


@dataclass
class Timeline:
    seconds: list[Second] = field(default_factory=list)


def _machine() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return sum(values) - values[3] - values[4], sum(values)


def _endpoint(name: str) -> str:
    """``GET /v1/brands/{id}/citations/urls`` -> ``brands/{id}/citations/urls``."""
    return name.split(" ", 1)[-1].removeprefix("/v1/")


class TimelineSampler:
    """Watches a command (:func:`bench.processes.run_cli`'s ``sampler``): every second until the
    command ends (or the block does), what the sandbox answered, and the CPU of the command's process,
    of its children (their last reading once they ended) and of the sandbox."""

    def __init__(self, sandbox: P.SandboxService) -> None:
        self.timeline = Timeline()
        self._sandbox = sandbox
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, pid: int) -> None:
        self._thread = threading.Thread(target=self._sample, args=(psutil.Process(pid),), daemon=True)
        self._thread.start()

    def __enter__(self) -> TimelineSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _cores(self, root: psutil.Process, children: dict[int, float]) -> tuple[float, ...] | None:
        """CPU seconds so far of the command, its children and the sandbox, the machine's busy and
        total ticks, and the time; None once the command is gone."""
        command = P.process_cpu(root)
        if command is None:
            return None
        with contextlib.suppress(psutil.Error):
            for child in root.children(recursive=True):
                reading = P.process_cpu(child)
                if reading is not None:
                    children[child.pid] = reading
        return (command, sum(children.values()), self._sandbox.cpu_seconds(), *_machine(), time.monotonic())

    def _sample(self, root: psutil.Process) -> None:
        children: dict[int, float] = {}  # pid -> its CPU when last read
        started = time.monotonic()
        last_requests: dict[str, int] = {}
        last = self._cores(root, children)
        while last is not None and not self._stop.wait(1.0):
            now = self._cores(root, children)
            if now is None:
                return
            counts = {_endpoint(k): sum(v.values()) for k, v in self._sandbox.stats().items()}
            span = now[5] - last[5]
            requests = {
                k: n - last_requests.get(k, 0) for k, n in counts.items() if n > last_requests.get(k, 0)
            }
            self.timeline.seconds.append(
                Second(
                    round(now[5] - started, 1),
                    requests,
                    (now[0] - last[0]) / span,
                    (now[1] - last[1]) / span,
                    (now[2] - last[2]) / span,
                    (now[3] - last[3]) / max(1, now[4] - last[4]),
                )
            )
            last, last_requests = now, counts


def phases(timeline: Timeline, rate: float) -> list[str]:
    """Consecutive seconds grouped by the endpoint most asked (no request: ``none``)."""
    groups: list[tuple[str, list[Second]]] = []
    for second in timeline.seconds:
        top = max(second.requests, key=second.requests.__getitem__) if second.requests else "none"
        if groups and groups[-1][0] == top:
            groups[-1][1].append(second)
        else:
            groups.append((top, [second]))
    merged: list[tuple[str, list[Second]]] = []
    for name, seconds in groups:  # a lone second of another endpoint joins the phase around it
        if merged and (len(seconds) == 1 or merged[-1][0] == name):
            merged[-1][1].extend(seconds)
        else:
            merged.append((name, list(seconds)))
    lines = [
        "| phase (endpoint most asked) | from s | seconds | requests / s | / rate | command process "
        "cores | its children cores | sandbox cores | machine busy | bound by |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, seconds in merged:
        n = len(seconds)
        per_second = sum(sum(s.requests.values()) for s in seconds) / n
        command = statistics.fmean(s.command_cores for s in seconds)
        children = statistics.fmean(s.children_cores for s in seconds)
        sandbox = statistics.fmean(s.sandbox_cores for s in seconds)
        busy = statistics.fmean(s.machine_busy for s in seconds)
        lines.append(
            f"| {name} | {seconds[0].at:.0f} | {n} | {per_second:.0f} | {per_second / rate:.2f} | "
            f"{command:.2f} | {children:.2f} | {sandbox:.2f} | {busy:.0%} | "
            f"{_bound(per_second, rate, command, busy)} |"
        )
    return lines


def _bound(per_second: float, rate: float, command: float, busy: float) -> str:
    if per_second < 1:
        return "no request: start-up, or the last landing"
    if per_second >= BELOW_RATE * rate:
        return "the rate limit"
    if busy >= SATURATED:
        return "the machine's CPU"
    if ONE_CORE[0] <= command <= ONE_CORE[1]:
        return "the command's one interpreter"
    return "other (start-up, landing, waits)"


# ---------------------------------------------------------------------------------------------
# the floor


@dataclass
class Parts:
    """CPU per request or per row of each part, medians of alternated rounds (µs)."""

    rows: int
    requests: int
    httpx_request: float
    stdlib_request: float
    bare_row: float
    ours_request: float
    landing_row: float


def _per_call_us(fn: Callable[[], int], calls: int) -> float:
    started = time.thread_time()
    fn()
    return (time.thread_time() - started) / calls * 1e6


def measure_parts(sandbox: P.SandboxService, days: int, rounds: int, landing_rows: int) -> Parts:
    from resources.api.access import ApiAccess
    from resources.api.client import VisibilityClient
    from sync import transforms

    # the client's call reads every page of an answers walk: the sample keeps single-page requests
    requests = [r for r in S.sample_requests(sandbox, days, pages=72) if r.table != "answers"]
    headers = {"Authorization": f"Bearer {sandbox.key}", "Accept": "application/json"}
    split = urlsplit(sandbox.url)
    paths = [f"{r.path}?{urlencode(r.params)}" for r in requests]
    bodies: list[bytes] = []
    # with the budget a sync's clients share, as the resource gives it
    budget = ApiAccess(api_url=sandbox.url, api_key=sandbox.key).get_budget()
    client = VisibilityClient(sandbox.url, sandbox.key, budget=budget)
    # the client's own httpx client (its headers, timeouts, pool, no cookie jar), without the layers
    # the client puts around it (budget, decode, validation)
    transport: httpx.Client = client._transport.http
    stdlib = http.client.HTTPConnection(split.hostname, split.port, timeout=60)

    def with_httpx() -> int:
        bodies.clear()
        for path in paths:
            response = transport.get(path)
            response.raise_for_status()
            bodies.append(response.content)
        return len(paths)

    def with_stdlib() -> int:
        for path in paths:
            stdlib.request("GET", path, headers=headers)
            stdlib.getresponse().read()
        return len(paths)

    def ours() -> int:
        for r in requests:
            if r.table == "cited_pages":
                engine = r.params["engine"]
                answer = client.citation_urls(
                    r.brand, engine=engine, start=NEWEST, end=P.SANDBOX_TODAY, limit=r.params["limit"]
                )
                transforms.cited_pages_table(
                    answer.rows,
                    brand_id=r.brand,
                    day=NEWEST,
                    engine=engine,
                    total_count=answer.total_count,
                    total_citations=answer.total_citations,
                    capped=answer.capped,
                )
            else:
                start = dt.date.fromisoformat(r.params["from"])
                rows = client.list_prompt_mentions(r.path.split("/")[3], start=start, end=P.SANDBOX_TODAY)
                transforms.mentions_table(list(rows), r.brand)
        return len(requests)

    with_httpx(), with_stdlib(), ours()  # warm: connections, the sandbox's pages, msgspec's types
    figures: dict[str, list[float]] = {"httpx": [], "stdlib": [], "ours": [], "bare": []}
    for turn in range(rounds):  # alternated: the machine's speed moves between rounds
        order = [("httpx", with_httpx), ("stdlib", with_stdlib), ("ours", ours)]
        for name, fn in order if turn % 2 == 0 else order[::-1]:
            figures[name].append(_per_call_us(fn, len(paths)))
        figures["bare"].append(S.bare_decode_us_per_row(bodies, repeat=1)[0])
    client.close()
    stdlib.close()
    rows = sum(len(json.loads(b)["data"]) for b in bodies)
    landed = P.in_child(_land_cpu, landing_rows)
    return Parts(
        rows=rows,
        requests=len(paths),
        httpx_request=statistics.median(figures["httpx"]),
        stdlib_request=statistics.median(figures["stdlib"]),
        bare_row=statistics.median(figures["bare"]),
        ours_request=statistics.median(figures["ours"]),
        landing_row=landed["cpu"] / landed["rows"] * 1e6,
    )


def _land_cpu(rows: int, out: Any) -> None:
    """CPU of landing ``rows`` mention rows (10 days) into a fresh DuckDB file, in this process."""
    import tempfile

    from resources.warehouse.duckdb import DuckDBWarehouse
    from sync.landing import land
    from sync.tables import PROMPT_MENTIONS

    outcome = L.build_outcome(rows, 10)
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as work:
        before = resource.getrusage(resource.RUSAGE_SELF)
        with DuckDBWarehouse(str(Path(work) / "floor.duckdb"), "visibility") as warehouse:
            written = sum(r.rows_written for r in land(warehouse, PROMPT_MENTIONS, outcome, "bench-floor"))
        after = resource.getrusage(resource.RUSAGE_SELF)
    outcome.spool.remove()
    out.update({"cpu": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, "rows": written})


# ---------------------------------------------------------------------------------------------
# the fetch alone


def fetch_alone(start: dt.date, end: dt.date) -> None:
    """The head start's fetches over ``[start, end)``, every engine, in this process (run as a child
    by :func:`measure_fetch_alone`, with the command line's environment); prints its wall."""
    import tempfile

    from pipelines.cli import first_run_selection
    from resources.api.endpoints import ENGINES_WITH_ALL
    from settings import load_settings
    from sync.catalog import DAILY
    from sync.discovery import SYNC_TAG
    from sync.head_start import HeadStart, SyncSession
    from sync.prefetch import StopSignal
    from sync.progress import NO_PROGRESS
    from sync.without_pandas import keep_pandas_out

    keep_pandas_out("the fetch alone")
    settings = load_settings()
    api = settings.api_access()
    with tempfile.TemporaryDirectory(prefix="bench-floor-journal-") as journal:
        span = (ENGINES_WITH_ALL[0], ENGINES_WITH_ALL[-1])
        tags = {SYNC_TAG: "bench-floor"}
        selection = first_run_selection(start, end, span, tags, Path(journal), settings)
        started = time.monotonic()
        fetches = HeadStart(DAILY, selection, api, SyncSession().discovery, NO_PROGRESS)
        with contextlib.closing(fetches.start()) as ahead:
            never = StopSignal(threading.Event())
            outcomes = [ahead.take(t.spec.name, ahead.selection, None, never) for t in DAILY]
            wall = time.monotonic() - started
            rows = sum(o.spool.rows for o in outcomes if o is not None)
            for outcome in outcomes:
                if outcome is not None:
                    outcome.spool.remove()
    print(json.dumps({"wall": wall, "rows": rows}))


def measure_fetch_alone(sandbox: P.SandboxService, dates: list[dt.date], work: Path) -> dict[str, float]:
    """:func:`fetch_alone` as a process against ``sandbox`` (the command line's environment): its
    wall, CPU and requests."""
    sandbox.reset_stats()
    before = P.children_cpu()
    end = max(dates) + dt.timedelta(days=1)
    command = [sys.executable, __file__, "--fetch-alone", min(dates).isoformat(), end.isoformat()]
    db = work / "unused.duckdb"
    child = P.run_cli([], url=sandbox.url, key=sandbox.key, db=db, log_dir=work, command=command)
    if child.exit_code != 0:
        raise RuntimeError(f"the fetch alone failed ({child.exit_code}): {child.output[-2000:]}")
    printed = json.loads(child.output.strip().splitlines()[-1])
    return {
        "wall": printed["wall"],
        "rows": printed["rows"],
        "cpu": P.children_cpu() - before,
        "requests": P.served(sandbox.stats()),
    }


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = P.parser(__doc__ or "")
    parser.add_argument("--days", type=int, default=30, help="days of the timed sync (the newest)")
    parser.add_argument("--rate", type=float, default=200.0, help="the sandbox's rate limit, requests/s")
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds of the per-request parts")
    parser.add_argument("--landing-rows", type=int, default=300_000, help="rows of the landing measured")
    parser.add_argument("--fetch-alone", nargs=2, metavar=("START", "END"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fetch_alone:  # the child of measure_fetch_alone
        fetch_alone(*(dt.date.fromisoformat(d) for d in args.fetch_alone))
        return 0
    P.install_signal_handlers()
    work = P.work_folder("bench-floor-")
    with P.sandbox_service(size="large", rate=args.rate, log_dir=work) as sandbox:
        dates = [NEWEST - dt.timedelta(days=i) for i in range(args.days)]
        sandbox.reset_stats()
        db = work / "floor.duckdb"
        before, service_before = P.children_cpu(), sandbox.cpu_seconds()
        with TimelineSampler(sandbox) as sampler:
            cli = P.run_cli(
                P.cli_args(dates, None),
                url=sandbox.url,
                key=sandbox.key,
                db=db,
                log_dir=work,
                sampler=sampler,
            )
        cpu, service_cpu = P.children_cpu() - before, sandbox.cpu_seconds() - service_before
        requests, wall = P.served(sandbox.stats()), cli.wall_seconds
        if cli.exit_code != 0:
            print(cli.output[-3000:])
            return 1
        landed = S.landed_rows(db)
        alone = measure_fetch_alone(sandbox, dates, work)
        # the parts are CPU per request, not pace: the rate limit must not refuse or hold them
        loose = {
            "rate_per_second": 100_000,
            "burst": 100_000,
            "max_concurrent": 16,
            "endpoint_limit": 100_000,
        }
        sandbox.configure(limits=loose)
        parts = measure_parts(sandbox, args.days, args.rounds, args.landing_rows)

    bound = requests / args.rate
    alone_bound = alone["requests"] / args.rate
    per_request_rows = landed / requests
    floor_httpx = parts.httpx_request / per_request_rows + parts.bare_row + parts.landing_row
    floor_stdlib = parts.stdlib_request / per_request_rows + parts.bare_row + parts.landing_row
    ours_row = (parts.ours_request - parts.httpx_request) * parts.requests / parts.rows
    lines = [
        SECTION,
        "",
        f"`bench/bench_floor.py --days {args.days} --rate {args.rate:g}`, code {P.code_label()}, "
        f"{P.machine()}.",
        "",
        f"**The sync**: `visibility-sync run` over {args.days} days, large workspace, sandbox at "
        f"{args.rate:g} requests/s: {landed:,} rows landed with {requests:,} requests "
        f"({per_request_rows:.0f} rows a request), wall {wall:.1f} s against a rate bound of {bound:.1f} s "
        f"(**{wall / bound:.2f}x**), the command's tree {cpu:.1f} s of CPU, the sandbox {service_cpu:.1f} s "
        f"(CPU floor of the wall on {S.CORES} cores: {(cpu + service_cpu) / S.CORES / bound:.2f}x).",
        "",
        f"**The fetch alone** (the head start's listings and fetches of the same days, in a process of its "
        f"own: no Dagster, no landing): {alone['requests']:,.0f} requests in {alone['wall']:.1f} s against "
        f"{alone_bound:.1f} s (**{alone['wall'] / alone_bound:.2f}x**), "
        f"{alone['cpu']:.1f} s of CPU ({alone['cpu'] / alone['requests'] * 1e3:.2f} ms a request).",
        "",
        "The sync's timeline, one line a phase (seconds grouped by the endpoint most asked; cores are CPU "
        "seconds a second):",
        "",
        *phases(sampler.timeline, args.rate),
        "",
        f"**The parts**, one thread, {parts.requests} requests ({parts.rows:,} rows: one day's cited "
        f"pages of two brands on five engines, mentions of 60 prompts over {args.days} days), medians "
        f"of {args.rounds} alternated rounds; landing: {args.landing_rows:,} mention rows into a fresh "
        "DuckDB file in a child process:",
        "",
        "| part | CPU |",
        "|---|---|",
        f"| one request, httpx (exchange and body, the client's settings) | {parts.httpx_request:.0f} µs |",
        f"| one request, the standard library's `http.client` | {parts.stdlib_request:.0f} µs |",
        f"| the bare decode (`json.loads` + `pa.Table.from_pylist`), a row | {parts.bare_row:.2f} µs |",
        f"| the client's call and its table (budget, decode, validation, Arrow), a request | "
        f"{parts.ours_request:.0f} µs ({ours_row:.2f} µs a row beyond httpx's exchange) |",
        f"| landing in DuckDB (`sync.landing.land`), a row | {parts.landing_row:.2f} µs |",
        "",
        f"**Floor of CPU per landed row** at this sync's {per_request_rows:.0f} rows a request, even if "
        "everything of ours cost nothing beyond the bare decode: transport / rows a request + bare "
        f"decode + landing = {parts.httpx_request:.0f} / {per_request_rows:.0f} + {parts.bare_row:.2f} + "
        f"{parts.landing_row:.2f} = {floor_httpx:.2f} µs with httpx (**{floor_httpx / parts.bare_row:.2f}x** "
        f"the bare decode), {floor_stdlib:.2f} µs with `http.client` "
        f"(**{floor_stdlib / parts.bare_row:.2f}x**); issue 21's item 0 asks for 1.5x.",
    ]
    P.publish(SECTION, "\n".join(lines), not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
