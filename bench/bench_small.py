"""Small syncs from the command line beside a small dlt ``rest_api`` peer, alternated, same sandbox.

    .venv/bin/pip install -e '.[bench]'          # dlt, for the peer only
    .venv/bin/python bench/bench_small.py         # 1 and 2 days of the demo workspace, 3 pairs each
    .venv/bin/python bench/bench_small.py --variant nogc=/tmp/tree   # and another code tree in each pair

Each pair runs ``visibility-sync run`` over the newest N days and ``bench/dlt_peer.py`` (the same ten
tables through dlt's ``rest_api``, with the same calls), alternating which goes first, each a process
into a fresh DuckDB file against one ``demo`` sandbox: wall, the whole tree's CPU and peak RSS,
requests. Reported: medians and ours / dlt's, then each table's rows (dlt's child tables, its nested
lists, beside them) and requests by endpoint, under ``## Small syncs beside dlt`` of RESULTS.md.
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import processes as P
from sync.catalog import BY_NAME

ROOT = P.ROOT
SECTION = "## Small syncs beside dlt"
NEWEST = P.SANDBOX_TODAY - dt.timedelta(days=1)
#: Where each side lands: the warehouse's default schema, and the peer's dataset.
SCHEMA = {"ours": "visibility", "dlt": "dlt_peer"}
#: The tables ``visibility-sync run`` lands, in the catalog's order, and the endpoint each reads.
TABLES = list(BY_NAME)
TABLE_OF = {endpoint.key: name for name, entry in BY_NAME.items() for endpoint in entry.endpoints}


@dataclass
class Landed:
    """One measured run, the rows it landed by table (``(rows, rows of its child tables)``) and the
    requests the sandbox answered by endpoint and status."""

    run: P.TreeRun
    rows: dict[str, tuple[int, int]]
    requests: dict[str, dict[str, int]]
    pair: int = 0


def landed_rows(db: Path, schema: str) -> dict[str, tuple[int, int]]:
    """Rows per landed table; dlt's child tables (``parent__list``) counted under their root table."""
    rows: dict[str, tuple[int, int]] = {}
    with duckdb.connect(str(db), read_only=True) as con:
        names = con.execute(
            "select table_name from information_schema.tables where table_schema = ? "
            "and table_type = 'BASE TABLE' and table_name not like '\\_dlt%' escape '\\'",
            [schema],
        ).fetchall()
        for (name,) in names:
            root = name.split("__")[0]
            if schema == SCHEMA["ours"] and root not in BY_NAME:
                continue  # the downstream tables the command line builds from the landed ones
            (count,) = con.execute(f'select count(*) from "{schema}"."{name}"').fetchone() or (0,)
            own, children = rows.get(root, (0, 0))
            rows[root] = (own + count, children) if root == name else (own, children + count)
    return rows


#: ``--variant LABEL=TREE``: other code trees of ours (e.g. a ``git archive`` without one measure),
#: measured in every pair beside ours and dlt's
VARIANTS: dict[str, Path] = {}


def measure(sandbox: P.SandboxService, who: str, days: int, work: Path) -> Landed:
    db = work / f"{who}-{days}-{time.time_ns()}.duckdb"
    args = P.cli_args([NEWEST - dt.timedelta(days=i) for i in range(days)], None)
    command, env, code_root = None, {}, VARIANTS.get(who, ROOT)
    if who == "dlt":
        command = [sys.executable, str(ROOT / "bench" / "dlt_peer.py"), "--url", sandbox.url, "--key"]
        command += [sandbox.key, "--db", str(db), "--days", str(days)]
        env = {"DLT_TELEMETRY_DISABLED": "1", "RUNTIME__DLTHUB_TELEMETRY": "false"}
    run = P.measured_cli(
        sandbox, args, db, log_dir=work, command=command, extra_env=env, timeout=600, code_root=code_root
    )
    requests = sandbox.stats()  # not reset until the next run
    if run.exit_code != 0:
        print(f"{who} {days} days failed ({run.exit_code}):\n{run.output[-3000:]}", flush=True)
    run.label = f"{who} {days}"
    schema = SCHEMA.get(who, SCHEMA["ours"])
    return Landed(run, landed_rows(db, schema) if run.exit_code == 0 else {}, requests)


def one_value(values: list[int]) -> str:
    """A figure every run of a side gave alike, or the range it took."""
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def table_rows(side: list[Landed], name: str, part: int) -> str:
    return one_value([m.rows.get(name, (0, 0))[part] for m in side])


def table_requests(side: list[Landed], name: str) -> str:
    """Requests to the endpoints of table ``name``, and how many of them were answered 429."""
    mine = [{e: s for e, s in m.requests.items() if TABLE_OF.get(e) == name} for m in side]
    throttled = one_value([P.throttled(m) for m in mine])
    return one_value([P.served(m) for m in mine]) + ("" if throttled == "0" else f" ({throttled} 429)")


def landed_table(days: int, ours: list[Landed], peer: list[Landed]) -> list[str]:
    """Rows and requests of each table, the same in every run of a side unless it was retried."""
    lines = [
        "",
        f"{days} day{'s' if days > 1 else ''}, every run of each side: rows landed and requests answered per "
        "table (dlt's child tables, its nested lists, in brackets; requests include those answered 429)",
        "",
        "| table | ours rows | dlt rows (+ child tables) | ours requests | dlt requests |",
        "|---|---|---|---|---|",
    ]
    for name in TABLES + sorted({t for m in peer for t in m.rows} - set(TABLES)):
        children = table_rows(peer, name, 1)
        dlt_rows = table_rows(peer, name, 0) + ("" if children == "0" else f" (+ {children})")
        lines.append(
            f"| {name} | {table_rows(ours, name, 0)} | {dlt_rows} "
            f"| {table_requests(ours, name)} | {table_requests(peer, name)} |"
        )
    return lines


def render(landed: list[Landed], days_list: list[int], pairs: int, rate: float) -> list[str]:
    runs = [m.run for m in landed]
    pair_of = {id(m.run): m.pair for m in landed}
    lines = [
        SECTION,
        "",
        f"`bench/bench_small.py --days {','.join(map(str, days_list))} --pairs {pairs}`, "
        f"{P.machine()}; sandbox `demo` workspace, rate limit "
        f"{rate:g} requests/s. Medians of {pairs} alternated pairs; ratio = ours / dlt's, of the "
        "medians and of each pair (in the order run).",
        "",
        "| days | figure | ours | dlt `rest_api` | ours / dlt | each pair |",
        "|---|---|---|---|---|---|",
    ]
    for days, who in ((d, w) for d in days_list for w in ["ours", *VARIANTS]):
        ours = [r for r in runs if r.label == f"{who} {days}" and r.exit_code == 0]
        peer = [r for r in runs if r.label == f"dlt {days}" and r.exit_code == 0]
        if not ours or not peer:
            lines.append(f"| {days} | (a run failed: {who} {len(ours)}, dlt {len(peer)} succeeded) | | | |")
            continue
        side = "" if who == "ours" else f" ({who}: {VARIANTS[who]})"
        for label, get in (
            (f"wall s{side}", lambda r: r.wall),
            (f"tree CPU s{side}", lambda r: r.cpu),
            (f"peak tree RSS MB{side}", lambda r: r.peak_rss_mb),
            (f"requests{side}", lambda r: r.requests),
            (f"wall ms / request{side}", lambda r: 1000 * r.wall / max(1, r.requests)),
        ):
            a = statistics.median(get(r) for r in ours)
            b = statistics.median(get(r) for r in peer)
            peer_in = {pair_of[id(d)]: d for d in peer}
            each = " / ".join(
                f"{get(o) / get(peer_in[pair_of[id(o)]]):.2f}" for o in ours if pair_of[id(o)] in peer_in
            )
            lines.append(f"| {days} | {label} | {a:,.2f} | {b:,.2f} | **{a / b:.2f}x** | {each} |")
    for days in days_list:
        ours = [m for m in landed if m.run.label == f"ours {days}" and m.run.exit_code == 0]
        peer = [m for m in landed if m.run.label == f"dlt {days}" and m.run.exit_code == 0]
        if ours and peer:
            lines += landed_table(days, ours, peer)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = P.parser(__doc__)
    parser.add_argument("--days", default="1,2")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL=TREE")
    args = parser.parse_args(argv)
    VARIANTS.update((label, Path(tree).resolve()) for label, tree in (v.split("=", 1) for v in args.variant))
    P.install_signal_handlers()
    days_list = [int(d) for d in args.days.split(",")]
    work = P.work_folder("bench-small-")
    landed: list[Landed] = []
    with P.sandbox_service(size="demo", rate=args.rate, log_dir=work) as sandbox:
        for days in days_list:
            for pair in range(args.pairs):
                sides = ["ours", "dlt", *VARIANTS]
                order = sides[pair % len(sides) :] + sides[: pair % len(sides)]
                for who in order:
                    measured = measure(sandbox, who, days, work)
                    measured.pair = pair
                    print(measured.run, flush=True)
                    landed.append(measured)
    text = "\n".join(render(landed, days_list, args.pairs, args.rate))
    P.publish(SECTION, text, not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
