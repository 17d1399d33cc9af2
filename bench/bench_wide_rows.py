"""Peak RSS of landing mention rows with and without 1,500 unknown integer fields each.

``python bench/bench_wide_rows.py --rows 5000`` runs each case in a fresh process: the rows are
transformed page by page (100 a page), each page checked against the new-columns bound as a fetch
checks it (``sync.transforms.check_new_columns``), and landed in a fresh DuckDB file. Cases: the rows
without unknown fields; with 1,500, at the default bound (refused at the first page); with 1,000 and
the bound raised to its most, 1,000 (what landing them costs). It prints each case's outcome, columns
landed and peak RSS, and the ratio to the case without unknown fields.
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from resources.api.config import DEFAULT_MAX_NEW_COLUMNS, MAX_MAX_NEW_COLUMNS
from resources.warehouse.contract import PartitionScope
from resources.warehouse.duckdb import DuckDBWarehouse
from sync import tables, transforms

DAY = dt.date(2026, 11, 1)
FIELDS = 1500
PAGE = 100


def mention(i: int, fields: int) -> dict[str, object]:
    known = {"id": f"m{i}", "response_id": f"r{i}", "brand_name": "Acme", "position": 1, "sentiment": 0.5}
    place = {"prompt_id": "p1", "engine": "chatgpt", "checked_on": DAY.isoformat()}
    return {**known, **place, **{f"f{k:04d}": i + k for k in range(fields)}}


def one_case(rows: int, fields: int, bound: int) -> str:
    """Transform, check and land the rows in this process; its outcome and peak RSS."""
    spec = tables.PROMPT_MENTIONS
    parts, seen = [], set()
    try:
        for start in range(0, rows, PAGE):
            page = transforms.mentions_table([mention(i, fields) for i in range(start, start + PAGE)], "b1")
            seen.update(page.column_names)
            transforms.check_new_columns(spec, seen, bound)
            parts.append(page)
    except transforms.TooManyFieldsError:
        outcome, columns = "refused", 0
    else:
        table = transforms.concat(spec, parts)
        del parts
        path = Path(tempfile.mkdtemp()) / "wide.duckdb"
        with DuckDBWarehouse(path, "vis") as warehouse:
            warehouse.ensure_table(spec)
            scope = PartitionScope(("b1",), DAY, DAY + dt.timedelta(days=1), ("chatgpt",))
            warehouse.replace_partitions(spec, table, scope, "bench")
        landed = DuckDBWarehouse(path, "vis", read_only=True).query(
            "SELECT * FROM vis.prompt_mentions LIMIT 1"
        )
        outcome, columns = "landed", landed.num_columns
    return f"{outcome} {columns} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--case", nargs=2, type=int, help=argparse.SUPPRESS)  # fields, bound: a child
    args = parser.parse_args()
    if args.case:
        print(one_case(args.rows, *args.case))
        return
    cases = {
        "no unknown fields": (0, DEFAULT_MAX_NEW_COLUMNS),
        f"{FIELDS} unknown fields, bound {DEFAULT_MAX_NEW_COLUMNS}": (FIELDS, DEFAULT_MAX_NEW_COLUMNS),
        f"{MAX_MAX_NEW_COLUMNS} unknown fields, bound {MAX_MAX_NEW_COLUMNS}": (
            MAX_MAX_NEW_COLUMNS,
            MAX_MAX_NEW_COLUMNS,
        ),
    }
    base = None
    for name, (fields, bound) in cases.items():
        command = [sys.executable, __file__, "--rows", str(args.rows), "--case", str(fields), str(bound)]
        outcome, columns, peak = subprocess.run(
            command, check=True, capture_output=True, text=True
        ).stdout.split()
        base = base or int(peak)
        print(f"{name}: {outcome}, {columns} columns, peak RSS {peak} MiB ({int(peak) / base:.2f}x)")


if __name__ == "__main__":
    main()
