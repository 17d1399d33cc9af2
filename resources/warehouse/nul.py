"""NUL characters out of text: every engine lands U+0000 as :data:`NUL_REPLACEMENT`.

Rows are cleaned as they are encoded (:func:`~resources.warehouse.encoding.encode_rows`), and the
scopes of their writes alike, so two keys that differ only by a NUL are one key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from resources.warehouse.contract import PartitionScope, SnapshotScope

#: U+0000 cannot be stored in Postgres text, and ``\u0000`` not in its jsonb. Every engine lands it
#: as U+FFFD (the Unicode replacement character) instead, so the same rows read the same everywhere
#: and the loss stays visible (docs/OPERATIONS.md, "Text with NUL characters").
NUL = "\x00"
NUL_REPLACEMENT = "\ufffd"


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


def _clean_strings(array: pa.Array) -> pa.Array:
    if not may_hold_nul(array):
        return array
    return pc.replace_substring(array, NUL, NUL_REPLACEMENT)


def _clean_array(array: pa.Array) -> pa.Array:
    """Strings, and the string items of lists, without NUL; other arrays as they are."""
    t = array.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _clean_strings(array)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and (
        pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
    ):
        if not may_hold_nul(array.values):  # the whole child array: a cheap, safe over-estimate
            return array
        # rare: rebuilt through Python, which handles slices and null lists without special cases
        cleaned = [
            None if v is None else [x if x is None else clean_text(x) for x in v] for v in array.to_pylist()
        ]
        return pa.array(cleaned, type=t)
    return array


def clean_column(
    column: pa.ChunkedArray, clean: Callable[[pa.Array], pa.Array] = _clean_array
) -> pa.ChunkedArray:
    """A column without NUL characters (:data:`NUL_REPLACEMENT` instead); the column itself when it
    holds none, which is the common case and costs one scan of its string bytes. ``clean`` cleans
    one chunk (JSON text has its own: :mod:`resources.warehouse.encoding`)."""
    chunks = [clean(c) for c in column.chunks]
    if all(new is old for new, old in zip(chunks, column.chunks, strict=True)):
        return column
    return pa.chunked_array(chunks, type=column.type)


def clean_scope(scope: PartitionScope) -> PartitionScope:
    """The scope as the rows land: brand ids and engines with NUL replaced like the rows' values."""
    brands = tuple(clean_text(b) if isinstance(b, str) else b for b in scope.brand_ids)
    engines = tuple(clean_text(e) if isinstance(e, str) else e for e in scope.engines)
    if brands == scope.brand_ids and engines == scope.engines:
        return scope
    return dataclasses.replace(scope, brand_ids=brands, engines=engines)


def clean_snapshot_scope(scope: SnapshotScope | None) -> SnapshotScope | None:
    if scope is None or not any(isinstance(v, str) and NUL in v for v in scope.values):
        return scope
    values = tuple(clean_text(v) if isinstance(v, str) else v for v in scope.values)
    return dataclasses.replace(scope, values=values)
