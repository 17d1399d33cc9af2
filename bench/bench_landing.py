"""Landing memory benchmark: a large partitioned table landed chunk by chunk, as a sync lands it.

    .venv/bin/python bench/bench_landing.py [--rows 1000000] [--days 60] [--budget 64MB] [--days-list 30,60]

``--rows`` mention rows over ``--days`` days x 7 engines x 20 brands spooled into a real
:class:`~sync.spool.DateSpool`, then :func:`sync.landing.land` into a fresh DuckDB file in a fresh
process, twice (first landing, then every row replaced): peak RSS and wall of each. ``--days-list``
repeats it with the same rows per day. Figures are printed only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.processes import in_child  # noqa: E402

START = dt.date(2026, 6, 1)
ENGINES = ("chatgpt", "claude", "perplexity", "gemini", "google_ai_overviews", "google_ai_mode", "copilot")
BRANDS = tuple(f"brand-{i:02d}" for i in range(20))


def _rows(n: int, days: int, seed: int) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from sync.tables import PROMPT_MENTIONS

    rng = np.random.default_rng(seed)
    ids = pa.array(np.char.mod(f"m{seed:03d}-%09d", np.arange(n)).astype(object))
    day0 = (START - dt.date(1970, 1, 1)).days
    table = pa.table(
        {
            "id": ids,
            "brand_id": pc.take(pa.array(BRANDS), pa.array(rng.integers(0, len(BRANDS), n))),
            "prompt_id": pa.array(np.char.mod("p-%08d", rng.integers(0, 5000, n)).astype(object)),
            "response_id": pa.array(np.char.mod("r-%012d", rng.integers(0, 10**12, n)).astype(object)),
            "brand_name": pa.array(np.char.mod("Brand %d", rng.integers(0, 50, n)).astype(object)),
            "position": pa.array(rng.integers(1, 10, n).astype(np.float64)),
            "sentiment": pa.array(rng.random(n)),
            "engine": pc.take(pa.array(ENGINES), pa.array(rng.integers(0, len(ENGINES), n))),
            "checked_on": pa.array((day0 + np.arange(n) * days // n).astype(np.int32)).cast(pa.date32()),
        }
    )
    return table.cast(PROMPT_MENTIONS.arrow_schema)


def build_outcome(rows: int, days: int) -> Any:
    """A FetchOutcome whose spool holds ``rows`` rows over ``days`` days (written 100k rows at a time)."""
    from resources.api.stats import RequestStats
    from sync.landing import DEFAULT_DAYS_PER_WRITE, FetchOutcome
    from sync.planning import Box, Plan, Window
    from sync.spool import DateSpool

    spool = DateSpool.create("checked_on", DEFAULT_DAYS_PER_WRITE, name="bench-landing")
    step = 100_000
    for seed, offset in enumerate(range(0, rows, step)):
        part = _rows(min(step, rows - offset), days, seed)
        # spread each part over the whole span: the spool sees rows of every day from every part
        spool.append(part)
    spool.close()
    window = Window(START, START + dt.timedelta(days=days))
    cells = frozenset((START + dt.timedelta(days=i), e) for i in range(days) for e in ENGINES)
    plan = Plan(cells=cells, calls=(), boxes=(Box(window, ENGINES),))
    return FetchOutcome(
        plan=plan,
        spool=spool,
        brand_engines={b: ENGINES for b in BRANDS},
        out_of_scope=[],
        stats=RequestStats(),
    )


def _land(path: str, outcome: Any, budget: str | None, out: Any) -> None:
    from resources.warehouse.duckdb import DuckDBWarehouse
    from sync.landing import land
    from sync.tables import PROMPT_MENTIONS

    started = time.monotonic()
    with DuckDBWarehouse(path, "visibility", memory_limit=budget) as warehouse:
        results = land(warehouse, PROMPT_MENTIONS, outcome, "bench-run")
    out.update(
        {
            "seconds": time.monotonic() - started,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rows": sum(r.rows_written for r in results),
            "deleted": sum(r.rows_deleted for r in results),
            "writes": len(results),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the longest span")
    parser.add_argument("--days-list", default="60", help="comma-separated spans; rows per day stay fixed")
    parser.add_argument("--budget", default="64MB", help="DuckDB memory_limit of the landing ('' for none)")
    args = parser.parse_args()
    spans = [int(d) for d in args.days_list.split(",")]
    per_day = args.rows / max(spans)
    for days in spans:
        rows = int(per_day * days)
        outcome = build_outcome(rows, days)
        work = Path(tempfile.mkdtemp(prefix="bench-landing-"))
        try:
            path = str(work / "visibility.duckdb")
            first = in_child(_land, path, outcome, args.budget or None)
            again = in_child(_land, path, outcome, args.budget or None)
        finally:
            outcome.spool.remove()
            shutil.rmtree(work, ignore_errors=True)
        for label, r in (("first landing", first), ("re-landing", again)):
            print(
                f"{days:3d} days {rows:>9,} rows  {label:13s}  peak RSS {r['peak_mb']:7.1f} MB  "
                f"{r['seconds']:6.1f} s  writes {r['writes']}  rows {r['rows']:,} replaced {r['deleted']:,}",
                flush=True,
            )


if __name__ == "__main__":
    main()
