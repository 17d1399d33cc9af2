"""The Arrow table a write actually loads: the plan's columns, nested values as JSON text, all-null
columns typed, and no NUL character in any text (:mod:`resources.warehouse.nul`).

``_loaded_at`` and ``_run_id`` (and the snapshot columns) are never materialised in Arrow: engines
write them as one SQL parameter per statement, which keeps a million-row load free of extra columns.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from resources.warehouse.nul import NUL, clean_column, clean_text, may_hold_nul
from resources.warehouse.schema_evolution import LoadPlan
from resources.warehouse.types import Kind, arrow_type, needs_json_encoding

_JSON_NUL_ESCAPE = "\\u0000"


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _plain(value: Any) -> Any:
    """Arrow's Python form of maps (lists of pairs) -> dicts, recursively; NUL replaced in every
    string, keys included."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {clean_text(str(k)): _plain(v) for k, v in value}
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): _plain(v) for k, v in value.items()}
    return value


def to_json_text(column: pa.ChunkedArray) -> pa.Array:
    """Nested values (structs, maps, lists of structs) -> JSON text; nulls stay null."""
    out = [
        None
        if v is None
        else json.dumps(_plain(v), default=_json_default, ensure_ascii=False, separators=(",", ":"))
        for v in column.to_pylist()
    ]
    return pa.array(out, type=pa.string())


def _clean_json_text(array: pa.Array) -> pa.Array:
    """JSON text with neither a raw NUL nor a ``\\u0000`` escape (which Postgres' jsonb refuses):
    only values holding one are parsed and written again."""
    if not (may_hold_nul(array) or pc.any(pc.match_substring(array, _JSON_NUL_ESCAPE)).as_py()):
        return array
    out: list[str | None] = []
    for value in array.to_pylist():
        if value is None or (NUL not in value and _JSON_NUL_ESCAPE not in value):
            out.append(value)
            continue
        try:
            parsed = json.loads(value)
        except ValueError:  # not JSON after all: the engine will say so; only the NUL is ours
            out.append(clean_text(value).replace(_JSON_NUL_ESCAPE, "\\ufffd"))
            continue
        out.append(json.dumps(_plain(parsed), ensure_ascii=False, separators=(",", ":")))
    return pa.array(out, type=array.type)


def encode_rows(rows: pa.Table, plan: LoadPlan) -> pa.Table:
    """The table to load: the plan's columns, nested values as JSON, all-null columns typed, and
    no NUL character in any text (:data:`NUL_REPLACEMENT` instead: text, list items, JSON).

    Zero-copy for plain columns: only JSON, ``null``-typed columns and text holding a NUL are rebuilt.
    """
    arrays: list[pa.ChunkedArray | pa.Array] = []
    for name, target in zip(plan.load_columns, plan.load_types, strict=True):
        col = rows[name]
        t = col.type
        json_text = False
        if isinstance(t, pa.BaseExtensionType):
            col = pa.chunked_array([c.storage for c in col.chunks], type=t.storage_type)
            json_text = target.kind is Kind.JSON
        elif needs_json_encoding(t):
            col = to_json_text(col)  # strings cleaned while encoding
        elif pa.types.is_null(t):
            col = pa.nulls(len(col), type=arrow_type(target))
        elif pa.types.is_dictionary(t):
            col = pc.cast(col, t.value_type)
        if isinstance(col, pa.ChunkedArray):
            col = clean_column(col, _clean_json_text) if json_text else clean_column(col)
        arrays.append(col)
    return pa.table(arrays, names=list(plan.load_columns))
