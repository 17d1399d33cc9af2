"""Benchmark: landing one million mention rows through the warehouse writers.

    .venv/bin/python bench/bench_warehouse.py [--rows 1000000] [--repeat 3] [--postgres-url URL]

Targets, each against a bare load into an identical table timed in the same run (best of
``--repeat``, connection open and close included): DuckDB ``replace_partitions`` within 1.5x of
``INSERT INTO t SELECT * FROM arrow_table``; Postgres within 2x of Arrow -> CSV -> ``COPY``; the
RSS increase while landing (sampled every 5 ms, each engine in a fresh child process) at most
twice the Arrow table's size. Without ``--postgres-url`` (or ``VISIBILITY_TEST_POSTGRES_URL``) an
embedded server is started. Figures go under ``## Warehouse`` of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import processes as P  # noqa: E402
from bench.processes import TreeSampler, in_child  # noqa: E402
from resources.warehouse.contract import Column, PartitionScope, TableSpec  # noqa: E402

ENGINES = ("chatgpt", "claude", "perplexity", "gemini", "google_ai_overviews", "google_ai_mode", "copilot")
START = dt.date(2026, 1, 1)
DAYS = 30
BRANDS = tuple(f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(10))

SPEC = TableSpec(
    name="prompt_mentions",
    description="Benchmark copy of prompt_mentions.",
    columns=(
        Column("id", pa.string(), "Mention id.", nullable=False),
        Column("response_id", pa.string(), "Answer id."),
        Column("brand_name", pa.string(), "Brand named."),
        Column("position", pa.float64(), "Position."),
        Column("sentiment", pa.float64(), "Sentiment."),
        Column("prompt_id", pa.string(), "Prompt id."),
        Column("engine", pa.string(), "Engine.", nullable=False),
        Column("checked_on", pa.date32(), "Day."),
        Column("brand_id", pa.string(), "Brand.", nullable=False),
    ),
    key=("id",),
    kind="partitioned",
    date_column="checked_on",
)
SCOPE = PartitionScope(BRANDS, START, START + dt.timedelta(days=DAYS), ENGINES)


def _uuids(rng: np.random.Generator, n: int) -> pa.Array:
    hexes = pa.array(np.char.mod("%032x", rng.integers(0, 2**63, n, dtype=np.int64)).astype(object))
    parts = [pc.utf8_slice_codeunits(hexes, a, b) for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))]
    return pc.binary_join_element_wise(*parts, "-")


def mention_rows(n: int, seed: int = 1) -> pa.Table:
    """``n`` mention-like rows spread over BRANDS x DAYS x ENGINES, unique ids."""
    rng = np.random.default_rng(seed)
    ids = pc.binary_join_element_wise(
        _uuids(rng, n), pa.array(np.char.mod("%07d", np.arange(n)).astype(object)), ""
    )
    names = pa.array([f"Brand {i}" for i in range(50)])
    day0 = (START - dt.date(1970, 1, 1)).days
    table = pa.table(
        {
            "id": ids,
            "response_id": _uuids(rng, n),
            "brand_name": pc.take(names, pa.array(rng.integers(0, 50, n))),
            "position": pa.array(rng.integers(1, 10, n).astype(np.float64)),
            "sentiment": pa.array(rng.random(n)),
            "prompt_id": _uuids(rng, n),
            "engine": pc.take(pa.array(ENGINES), pa.array(rng.integers(0, len(ENGINES), n))),
            "checked_on": pa.array((day0 + rng.integers(0, DAYS, n)).astype(np.int32)).cast(pa.date32()),
            "brand_id": pc.take(pa.array(BRANDS), pa.array(rng.integers(0, len(BRANDS), n))),
        }
    )
    return table.cast(SPEC.arrow_schema).combine_chunks()


# --- measurement ----------------------------------------------------------------------------------


def best_of(repeat: int, setup: Callable[[], Any], run: Callable[[Any], None]) -> float:
    times = []
    for _ in range(repeat):
        state = setup()
        t0 = time.perf_counter()
        run(state)
        times.append(time.perf_counter() - t0)
    return min(times)


# --- the two engines ------------------------------------------------------------------------------


def columns_sql(engine: str) -> str:
    """The column definitions the writer gives SPEC's data columns, for the bare baseline's table."""
    from resources.warehouse import types
    from resources.warehouse.sql import quote_identifier as q

    to_sql = getattr(types, f"{engine}_type")
    return ", ".join(
        f"{q(c.name)} {to_sql(types.sql_type_or_default(c.type))}"
        + (" NOT NULL" if c.name in SPEC.key else "")
        for c in SPEC.columns
    )


def bare_load(url: str, schema: str, rows: pa.Table) -> None:
    """Into a table of the same columns: DuckDB ``INSERT INTO t SELECT * FROM arrow_table``;
    Postgres Arrow -> CSV -> ``COPY`` (with the primary key the writer's table has)."""
    if url.startswith("duckdb"):
        import duckdb

        con = duckdb.connect(url.removeprefix("duckdb:///"))
        con.execute(f"CREATE TABLE t ({columns_sql('duckdb')})").fetchall()
        con.register("arrow_table", rows)
        con.execute("INSERT INTO t SELECT * FROM arrow_table").fetchall()
        con.close()
        return
    import psycopg

    names = ", ".join(f'"{c}"' for c in rows.column_names)
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
        cur.execute(f'CREATE TABLE "{schema}".t ({columns_sql("postgres")}, PRIMARY KEY ("id"))')  # type: ignore[arg-type]
        options = pa_csv.WriteOptions(include_header=False)
        with cur.copy(f'COPY "{schema}".t ({names}) FROM STDIN (FORMAT csv)') as copy:  # type: ignore[arg-type]
            for batch in rows.to_batches(max_chunksize=65_536):
                buf = io.BytesIO()
                pa_csv.write_csv(batch, buf, options)
                copy.write(buf.getbuffer())


def land(target: tuple[str, str], rows: pa.Table, run_id: str = "bench-run") -> None:
    from resources.warehouse.urls import warehouse_from_url

    with warehouse_from_url(*target) as warehouse:
        warehouse.replace_partitions(SPEC, rows, SCOPE, run_id)


def fresh_targets(url: str | None, folder: Path) -> Iterator[tuple[str, str]]:
    """New, empty (warehouse URL, schema) pairs: DuckDB files in ``folder``, else Postgres schemas."""
    for i in itertools.count():
        if url is None:
            yield f"duckdb:///{folder / f'db{i}.duckdb'}", "visibility"
            continue
        import psycopg

        schema = f"bench_{os.getpid()}_{i}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]
        yield url, schema


def bench_engine(engine: str, n: int, repeat: int, url: str | None, out: dict[str, Any]) -> None:
    """Best of ``repeat``: the bare load, a landing into a new table, a re-run replacing every row."""
    from resources.warehouse.urls import warehouse_from_url

    rows = mention_rows(n)
    tmp = Path(tempfile.mkdtemp(prefix="bench-wh-"))
    targets = fresh_targets(url, tmp)

    def landed() -> tuple[str, str]:
        target = next(targets)
        land(target, rows)
        return target

    try:
        out[f"{engine}_bare_s"] = best_of(repeat, lambda: next(targets), lambda t: bare_load(*t, rows))
        out[f"{engine}_land_s"] = best_of(repeat, lambda: next(targets), lambda t: land(t, rows))
        out[f"{engine}_replace_s"] = best_of(repeat, landed, lambda t: land(t, rows))  # every row
        with warehouse_from_url(*landed()) as warehouse:
            counted = warehouse.query(f"SELECT count(*) AS n FROM {warehouse.table_ref('prompt_mentions')}")
        out[f"{engine}_rows"] = counted.column(0)[0].as_py()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def memory(engine: str, n: int, which: str, url: str | None, out: dict[str, Any]) -> None:
    """Peak RSS increase of one landing (``which``: ``land``, ``bare``, or ``rerun``: replacing the
    same rows), in a process that has done nothing else."""
    rows = mention_rows(n)
    tmp = Path(tempfile.mkdtemp(prefix="bench-wh-"))
    target = next(fresh_targets(url, tmp))
    try:
        if which == "rerun":  # the table already holds the same rows: measure the replace only
            land(target, rows, "bench-run-0")
            pa.default_memory_pool().release_unused()
        with TreeSampler(os.getpid(), every=0.005) as rss:
            bare_load(*target, rows) if which == "bare" else land(target, rows)
        key = "postgres_rss_delta" if engine == "postgres" else f"{engine}_{which}_rss_delta"
        out[key] = rss.peak - rss.base
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if url is not None:
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{target[1]}" CASCADE')  # type: ignore[arg-type]


# --- report ---------------------------------------------------------------------------------------


def _mb(b: float) -> str:
    return f"{b / 2**20:.0f} MiB"


def render(n: int, repeat: int, arrow_bytes: int, r: dict[str, Any]) -> str:
    def verdict(ok: bool) -> str:
        return "meets" if ok else "MISSES"

    d_ratio = r["duckdb_land_s"] / r["duckdb_bare_s"]
    p_ratio = r["postgres_land_s"] / r["postgres_bare_s"]
    d_mem = r["duckdb_land_rss_delta"] / arrow_bytes
    p_mem = r["postgres_rss_delta"] / arrow_bytes
    lines = [
        "## Warehouse",
        "",
        f"`bench/bench_warehouse.py --rows {n} --repeat {repeat}` on {dt.date.today()}, "
        f"{os.cpu_count()} CPUs; best of {repeat}. {n:,} mention-like rows (9 columns: 4 uuid strings, "
        f"2 short strings, 2 doubles, 1 date; key `id`), Arrow size {_mb(arrow_bytes)}. "
        "Times include opening and closing the connection; the target tables are identical "
        "(same columns; DuckDB: no key index, as the writer creates partitioned tables; Postgres: "
        "primary key).",
        "",
        "| engine | bare load | `replace_partitions` (new table) | ratio | target | "
        "re-run of the same rows (replaces 1M) | peak RSS increase | / Arrow size |",
        "|---|---|---|---|---|---|---|---|",
        f"| DuckDB | {r['duckdb_bare_s']:.2f} s (`INSERT INTO t SELECT * FROM arrow_table`) | "
        f"{r['duckdb_land_s']:.2f} s | {d_ratio:.2f}x | <= 1.5x: {verdict(d_ratio <= 1.5)} | "
        f"{r['duckdb_replace_s']:.2f} s | {_mb(r['duckdb_land_rss_delta'])} | {d_mem:.2f}x "
        f"(<= 2x: {verdict(d_mem <= 2)}) |",
        f"| Postgres | {r['postgres_bare_s']:.2f} s (Arrow CSV -> `COPY`) | "
        f"{r['postgres_land_s']:.2f} s | {p_ratio:.2f}x | <= 2x: {verdict(p_ratio <= 2)} | "
        f"{r['postgres_replace_s']:.2f} s | {_mb(r['postgres_rss_delta'])} | {p_mem:.2f}x "
        f"(<= 2x: {verdict(p_mem <= 2)}) |",
        "",
        f"Peak RSS increase of the bare DuckDB insert, for comparison: {_mb(r['duckdb_bare_rss_delta'])} "
        f"({r['duckdb_bare_rss_delta'] / arrow_bytes:.2f}x); of a DuckDB re-run (delete + insert): "
        f"{_mb(r['duckdb_rerun_rss_delta'])} ({r['duckdb_rerun_rss_delta'] / arrow_bytes:.2f}x). Each memory "
        "figure comes from a fresh process that only built the Arrow table and then landed it once.",
        "",
        f"Rows landed: DuckDB {r['duckdb_rows']:,}, Postgres {r['postgres_rows']:,}. Postgres here is the "
        "embedded server of the tests (fsync off), so both sides of its ratio skip disk flushes. "
        "The machine is 2 cores shared with other work: absolute times vary run to run by up to 2x; "
        "each ratio compares runs of the same process minutes apart.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = P.parser(__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres-url", default=os.environ.get("VISIBILITY_TEST_POSTGRES_URL"))
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "RESULTS.md")
    args = parser.parse_args()
    # a stopped benchmark (kill, timeout) still stops the Postgres server it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    arrow_bytes = mention_rows(args.rows).nbytes
    print(f"{args.rows:,} rows, Arrow size {_mb(arrow_bytes)}")
    results = in_child(bench_engine, "duckdb", args.rows, args.repeat, None)
    for which in ("land", "bare", "rerun"):
        results.update(in_child(memory, "duckdb", args.rows, which, None))
    print("duckdb", results)
    server = None
    url = args.postgres_url
    if not url:
        from tests.fixtures_postgres import start_embedded_postgres

        server = start_embedded_postgres()
        url = server.url
    try:
        pg = in_child(bench_engine, "postgres", args.rows, args.repeat, url)
        pg.update(in_child(memory, "postgres", args.rows, "land", url))
        print("postgres", pg)
        results.update(pg)
    finally:
        if server is not None:
            server.stop()
    section = render(args.rows, args.repeat, arrow_bytes, results)
    P.publish("## Warehouse", section, not args.no_write, args.results)


if __name__ == "__main__":
    main()
