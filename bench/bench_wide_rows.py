"""Peak RSS and columns of landing mention rows that carry 1,500 unknown integer fields each.

``python bench/bench_wide_rows.py --rows 5000`` transforms the rows page by page (100 a page), lands
them in a fresh DuckDB file and prints the landed table's columns and the process's peak RSS, with
the unknown fields bounded (``sync.transforms.MAX_EXTRA_COLUMNS``) and, with ``--unbounded``,
every unknown field a column of its own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import tempfile
from pathlib import Path

import sync.transforms as transforms
from resources.warehouse.contract import PartitionScope
from resources.warehouse.duckdb import DuckDBWarehouse
from sync import tables

DAY = dt.date(2026, 11, 1)
FIELDS = 1500
PAGE = 100


def mention(i: int) -> dict[str, object]:
    known = {"id": f"m{i}", "response_id": f"r{i}", "brand_name": "Acme", "position": 1, "sentiment": 0.5}
    place = {"prompt_id": "p1", "engine": "chatgpt", "checked_on": DAY.isoformat()}
    return {**known, **place, **{f"f{k:04d}": i + k for k in range(FIELDS)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--unbounded", action="store_true")
    args = parser.parse_args()
    if args.unbounded:
        transforms.MAX_EXTRA_COLUMNS = 10**9
    spec = tables.PROMPT_MENTIONS
    parts = [
        transforms.mentions_table([mention(i) for i in range(start, start + PAGE)], "b1")
        for start in range(0, args.rows, PAGE)
    ]
    table = transforms.concat(spec, parts)
    del parts
    path = Path(tempfile.mkdtemp()) / "wide.duckdb"
    with DuckDBWarehouse(path, "vis") as warehouse:
        warehouse.ensure_table(spec)
        scope = PartitionScope(("b1",), DAY, DAY + dt.timedelta(days=1), ("chatgpt",))
        warehouse.replace_partitions(spec, table, scope, "bench")
    columns = DuckDBWarehouse.open_read_only(path, "vis").query("SELECT * FROM vis.prompt_mentions LIMIT 1")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    mode = "unbounded" if args.unbounded else "bounded"
    print(f"{mode}: {args.rows} rows, {columns.num_columns} columns landed, peak RSS {peak} MiB")


if __name__ == "__main__":
    main()
