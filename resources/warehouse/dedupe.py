"""Rows deduplicated by key: the last row of a key wins (pages can repeat a row when data shifts)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _release_if_large(n: int) -> None:
    """Hand the hash table's memory back to the OS before the engine allocates for the load.

    Arrow's allocator keeps freed memory cached; without this a million-row write would hold the
    dedupe's memory and the engine's at the same time.
    """
    if n >= 100_000:
        pa.default_memory_pool().release_unused()


def dedupe_by_key(rows: pa.Table, key: Sequence[str]) -> tuple[pa.Table, int]:
    """Keep the last row of each key, in the original order; return the table and rows dropped."""
    n = rows.num_rows
    if n < 2:
        return rows, 0
    # the common case has no duplicates: counting distinct keys is cheaper than finding and taking
    # each key's last row (bench/RESULTS.md, *Warehouse*)
    distinct = rows.select(list(key)).group_by(list(key), use_threads=False).aggregate([]).num_rows
    if distinct == n:
        _release_if_large(n)
        return rows, 0
    keyed = rows.select(list(key)).append_column("__row", pa.array(np.arange(n, dtype=np.int64)))
    last = keyed.group_by(list(key), use_threads=False).aggregate([("__row", "max")])
    keep = pc.sort_indices(last["__row_max"])
    out = rows.take(pc.take(last["__row_max"], keep)), n - last.num_rows
    _release_if_large(n)
    return out
