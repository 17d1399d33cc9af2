"""The Arrow table a write actually loads: the plan's columns, all-null columns typed, no NUL
character in any text, one row per key.

U+0000 cannot be stored in Postgres text, so every engine lands it as :data:`NUL_REPLACEMENT`: the
same rows read the same everywhere and the loss stays visible. Scopes are cleaned alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from resources.warehouse.contract import PartitionScope, SnapshotScope
from resources.warehouse.schema_evolution import LoadPlan
from resources.warehouse.types import arrow_type

NUL = "\x00"
NUL_REPLACEMENT = "\ufffd"

# --- NUL characters ------------------------------------------------------------------------------


def clean_text(value: str) -> str:
    """``value`` with every NUL replaced by :data:`NUL_REPLACEMENT`."""
    return value.replace(NUL, NUL_REPLACEMENT) if NUL in value else value


def may_hold_nul(array: pa.Array) -> bool:
    """Whether a string array's bytes hold a zero byte: one pass over its data buffer, no copy
    (UTF-8 encodes only U+0000 as a zero byte; a slice's buffer may cover more than the slice,
    which only costs the exact replacement a needless run)."""
    buffers = array.buffers()
    data = buffers[2] if len(buffers) > 2 else None
    return data is not None and data.size > 0 and int(np.frombuffer(data, dtype=np.uint8).min()) == 0


def _clean_array(array: pa.Array) -> pa.Array:
    """Strings, and the string items of lists, without NUL; other arrays as they are."""
    t = array.type
    if pa.types.is_string(t):
        return pc.replace_substring(array, NUL, NUL_REPLACEMENT) if may_hold_nul(array) else array
    if pa.types.is_list(t) and pa.types.is_string(t.value_type):
        if not may_hold_nul(array.values):  # the whole child array: a cheap, safe over-estimate
            return array
        # rare: rebuilt through Python, which handles slices and null lists without special cases
        cleaned = [
            None if v is None else [x if x is None else clean_text(x) for x in v] for v in array.to_pylist()
        ]
        return pa.array(cleaned, type=t)
    return array


def clean_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column without NUL characters; the column itself when it holds none (the common case, one
    scan of its string bytes)."""
    chunks = [_clean_array(c) for c in column.chunks]
    if all(new is old for new, old in zip(chunks, column.chunks, strict=True)):
        return column
    return pa.chunked_array(chunks, type=column.type)


def _clean_values(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(clean_text(v) if isinstance(v, str) else v for v in values)


def clean_scope(scope: PartitionScope) -> PartitionScope:
    """The scope as the rows land: brand ids and engines with NUL replaced like the rows' values."""
    return dataclasses.replace(
        scope, brand_ids=_clean_values(scope.brand_ids), engines=_clean_values(scope.engines)
    )


def clean_snapshot_scope(scope: SnapshotScope | None) -> SnapshotScope | None:
    return None if scope is None else dataclasses.replace(scope, values=_clean_values(scope.values))


# --- rows as loaded ------------------------------------------------------------------------------


def encode_rows(rows: pa.Table, plan: LoadPlan) -> pa.Table:
    """The table to load; zero-copy but for ``null``-typed columns and text holding a NUL."""
    arrays: list[pa.ChunkedArray | pa.Array] = []
    for name, target in zip(plan.load_columns, plan.load_types, strict=True):
        col = rows[name]
        if pa.types.is_null(col.type):
            arrays.append(pa.nulls(len(col), type=arrow_type(target)))
        else:
            arrays.append(clean_column(col))
    return pa.table(arrays, names=list(plan.load_columns))


def _release_if_large(n: int) -> None:
    """Hand the hash table's memory back to the OS, else Arrow's allocator keeps it cached while the
    engine allocates for the load.
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
