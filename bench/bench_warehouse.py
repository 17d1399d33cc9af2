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
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
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


# --- DuckDB ---------------------------------------------------------------------------------------


def columns_sql(engine: str) -> str:
    """The column definitions the writer gives SPEC's data columns, for the bare baseline's table."""
    from resources.warehouse import types
    from resources.warehouse.quoting import quote_identifier as q

    to_sql = getattr(types, f"{engine}_type")
    return ", ".join(
        f"{q(c.name)} {to_sql(types.sql_type_or_default(c.type))}"
        + (" NOT NULL" if c.name in SPEC.key else "")
        for c in SPEC.columns
    )


def duckdb_bare(path: Path, rows: pa.Table) -> None:
    """The bare load: a table of the same columns, ``INSERT INTO t SELECT * FROM arrow_table``."""
    import duckdb

    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t ({columns_sql('duckdb')})").fetchall()
    con.register("arrow_table", rows)
    con.execute("INSERT INTO t SELECT * FROM arrow_table").fetchall()
    con.close()


def bench_duckdb(n: int, repeat: int, out: dict[str, Any]) -> None:
    import duckdb

    from resources.warehouse.duckdb import DuckDBWarehouse

    rows = mention_rows(n)
    tmp = Path(tempfile.mkdtemp(prefix="bench-wh-"))
    try:
        counter = iter(range(10_000))

        def fresh() -> Path:
            return tmp / f"db{next(counter)}.duckdb"

        def bare(path: Path) -> None:
            duckdb_bare(path, rows)

        def land(path: Path) -> None:
            DuckDBWarehouse(path, "visibility").replace_partitions(SPEC, rows, SCOPE, "bench-run")

        def rerun_setup() -> Path:
            path = fresh()
            land(path)
            return path

        out["duckdb_bare_s"] = best_of(repeat, fresh, bare)
        out["duckdb_land_s"] = best_of(repeat, fresh, land)
        out["duckdb_replace_s"] = best_of(repeat, rerun_setup, land)  # replaces every row
        path = fresh()
        land(path)
        check = duckdb.connect(str(path), read_only=True)
        found = check.execute('SELECT count(*) FROM "visibility"."prompt_mentions"').fetchall()
        out["duckdb_rows"] = found[0][0]
        check.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def memory_duckdb(n: int, which: str, out: dict[str, Any]) -> None:
    """Peak RSS increase of one landing, in a process that has done nothing else."""
    from resources.warehouse.duckdb import DuckDBWarehouse

    rows = mention_rows(n)
    tmp = Path(tempfile.mkdtemp(prefix="bench-wh-"))
    path = tmp / "mem.duckdb"
    try:
        if which == "rerun":  # the table already holds the same rows: measure the replace only
            DuckDBWarehouse(path, "visibility").replace_partitions(SPEC, rows, SCOPE, "bench-run-0")
            pa.default_memory_pool().release_unused()
        with TreeSampler(os.getpid(), every=0.005) as rss:
            if which == "bare":
                duckdb_bare(path, rows)
            else:
                DuckDBWarehouse(path, "visibility").replace_partitions(SPEC, rows, SCOPE, "bench-run")
        out[f"duckdb_{which}_rss_delta"] = rss.peak - rss.base
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- Postgres -------------------------------------------------------------------------------------


def bench_postgres(n: int, repeat: int, url: str, out: dict[str, Any]) -> None:
    import psycopg

    from resources.warehouse.postgres import PostgresWarehouse
    from resources.warehouse.quoting import quote_identifier as q

    rows = mention_rows(n)
    counter = iter(range(10_000))
    cols = columns_sql("postgres")
    names = ", ".join(q(c) for c in rows.column_names)

    def fresh() -> str:
        schema = f"bench_{os.getpid()}_{next(counter)}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {q(schema)} CASCADE")  # type: ignore[arg-type]
        return schema

    def bare(schema: str) -> None:
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE SCHEMA {q(schema)}")  # type: ignore[arg-type]
            cur.execute(f'CREATE TABLE {q(schema)}.t ({cols}, PRIMARY KEY ("id"))')  # type: ignore[arg-type]
            options = pa_csv.WriteOptions(include_header=False)
            with cur.copy(f"COPY {q(schema)}.t ({names}) FROM STDIN (FORMAT csv)") as copy:  # type: ignore[arg-type]
                for batch in rows.to_batches(max_chunksize=65_536):
                    buf = io.BytesIO()
                    pa_csv.write_csv(batch, buf, options)
                    copy.write(buf.getbuffer())

    def land(schema: str) -> None:
        with PostgresWarehouse(url, schema) as wh:
            wh.replace_partitions(SPEC, rows, SCOPE, "bench-run")

    def rerun_setup() -> str:
        schema = fresh()
        land(schema)
        return schema

    out["postgres_bare_s"] = best_of(repeat, fresh, bare)
    out["postgres_land_s"] = best_of(repeat, fresh, land)
    out["postgres_replace_s"] = best_of(repeat, rerun_setup, land)
    schema = fresh()
    land(schema)
    with psycopg.connect(url) as conn:
        out["postgres_rows"] = conn.execute(
            f"SELECT count(*) FROM {q(schema)}.prompt_mentions"  # type: ignore[arg-type]
        ).fetchone()[0]  # type: ignore[index]


def memory_postgres(n: int, url: str, out: dict[str, Any]) -> None:
    """Peak RSS increase of one landing, in a process that has done nothing else."""
    import psycopg

    from resources.warehouse.postgres import PostgresWarehouse

    rows = mention_rows(n)
    schema = f"bench_mem_{os.getpid()}"
    with TreeSampler(os.getpid(), every=0.005) as rss, PostgresWarehouse(url, schema) as wh:
        wh.replace_partitions(SPEC, rows, SCOPE, "bench-run")
    out["postgres_rss_delta"] = rss.peak - rss.base
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]


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
    results = in_child(bench_duckdb, args.rows, args.repeat)
    results.update(in_child(memory_duckdb, args.rows, "land"))
    results.update(in_child(memory_duckdb, args.rows, "bare"))
    results.update(in_child(memory_duckdb, args.rows, "rerun"))
    print("duckdb", results)
    server = None
    url = args.postgres_url
    if not url:
        from tests.fixtures_postgres import start_embedded_postgres

        server = start_embedded_postgres()
        url = server.url
    try:
        pg = in_child(bench_postgres, args.rows, args.repeat, url)
        pg.update(in_child(memory_postgres, args.rows, url))
        print("postgres", pg)
        results.update(pg)
    finally:
        if server is not None:
            server.stop()
    section = render(args.rows, args.repeat, arrow_bytes, results)
    P.publish("## Warehouse", section, not args.no_write, args.results)


if __name__ == "__main__":
    main()
