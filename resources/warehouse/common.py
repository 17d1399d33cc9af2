"""Engine-independent write logic: validation, scope checks, schema evolution, load encoding.

The steps of every write, which :class:`~resources.warehouse.base.Warehouse` runs in this order (its
template methods); engines only translate the plan to SQL in their hooks:

1. :func:`validate_spec`, :func:`validate_rows`, :func:`check_rows_in_scope`: refuse bad input before
   any I/O.
2. :func:`plan_load`: compare the incoming Arrow schema with the table's existing columns and decide
   what to create or add; an incompatible type change raises
   :class:`~resources.warehouse.base.SchemaMismatchError` before anything is written.
3. :func:`encode_rows`: the Arrow table actually loaded (plan's columns, nested values as JSON text,
   NUL characters replaced: :data:`NUL_REPLACEMENT`).
4. :func:`dedupe_by_key`: the last row of a key wins (pages can repeat a row when data shifts).

A landing of many writes (:meth:`~resources.warehouse.base.Warehouse.replace_partitions_together`)
runs the same steps per write, through :func:`partition_writes`. Rows are deduplicated once encoded,
so two keys that differ only by a NUL (which lands as :data:`NUL_REPLACEMENT`) are one key.

``_loaded_at`` and ``_run_id`` (and the snapshot columns) are never materialised in Arrow: engines
write them as one SQL parameter per statement, which keeps a million-row load free of extra columns.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from resources.warehouse.base import (
    FIRST_SEEN_AT,
    IS_CURRENT,
    LAST_SEEN_AT,
    LOADED_AT,
    RUN_ID,
    Column,
    PartitionScope,
    PartitionWrite,
    SchemaMismatchError,
    SnapshotScope,
    TableSpec,
)
from resources.warehouse.types import (
    Kind,
    SqlType,
    arrow_type,
    is_compatible,
    needs_json_encoding,
    sql_type,
    sql_type_or_default,
)

#: Added to every table.
LOAD_COLUMNS: tuple[Column, ...] = (
    Column(LOADED_AT, pa.timestamp("us", tz="UTC"), "When this row was last written (UTC)."),
    Column(RUN_ID, pa.string(), "The Dagster run that last wrote this row."),
)
#: Added to snapshot tables.
SNAPSHOT_COLUMNS: tuple[Column, ...] = (
    Column(IS_CURRENT, pa.bool_(), "False once the row is gone from the API; the row is kept as history."),
    Column(FIRST_SEEN_AT, pa.timestamp("us", tz="UTC"), "When a sync first saw this row (UTC)."),
    Column(LAST_SEEN_AT, pa.timestamp("us", tz="UTC"), "When a sync last saw this row in the API (UTC)."),
)
EVOLVED_COLUMN_DESCRIPTION = "Not in the table spec: a field the API started sending (added automatically)."


def system_columns(spec: TableSpec) -> tuple[Column, ...]:
    return LOAD_COLUMNS + (SNAPSHOT_COLUMNS if spec.kind == "snapshot" else ())


def current_view_name(spec: TableSpec) -> str:
    return f"{spec.name}_current"


def current_view_description(spec: TableSpec) -> str:
    return f"Rows of {spec.name} still present in the API (is_current). {spec.description}"


def column_descriptions(spec: TableSpec, table_columns: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Each column of the table (in table order) and the comment the writer gives it: the spec's, the
    writer's own columns', or the one of a column the API added. A ``_current`` view carries the same."""
    known = {c.name: c.description for c in (*spec.columns, *system_columns(spec))}
    return tuple((name, known.get(name, EVOLVED_COLUMN_DESCRIPTION)) for name in table_columns)


@dataclass(frozen=True)
class ViewShape:
    """A view as the catalog shows it: its comment, and its columns' names and comments in order."""

    comment: str | None
    columns: tuple[tuple[str, str | None], ...]


#: What a view needs: nothing, new comments only, or to be (re)created (then commented).
ViewWork = Literal["create", "comment"] | None


def view_work(existing: ViewShape | None, description: str, columns: Sequence[tuple[str, str]]) -> ViewWork:
    """``create`` when the view is missing or its columns differ from ``columns`` (names, in order);
    ``comment`` when only its comment or a column's differs; None when it is as wanted."""
    if existing is None or [n for n, _ in existing.columns] != [n for n, _ in columns]:
        return "create"
    if existing.comment != description or [c for _, c in existing.columns] != [c for _, c in columns]:
        return "comment"
    return None


# --- quoting (DuckDB and Postgres share the SQL standard rules) ----------------------------------


def quote_identifier(name: str) -> str:
    """A double-quoted identifier; any name (quotes, unicode, keywords) becomes exactly that name."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid SQL identifier {name!r}")
    return '"' + name.replace('"', '""') + '"'


def added_column_default(spec: TableSpec, column: str) -> str | None:
    """The value rows landed before ``column`` existed take when a writer adds it (a key column
    added to a table: the rows must hold one), as a SQL literal; None leaves them NULL."""
    for c in spec.columns:
        if c.name == column and c.default is not None:
            return quote_literal(c.default)
    return None


def quote_literal(text: str) -> str:
    """A standard SQL string literal, for DDL that takes no parameters (COMMENT ON)."""
    if "\x00" in text:
        raise ValueError("a SQL literal cannot contain NUL")
    return "'" + text.replace("'", "''") + "'"


# --- validation ----------------------------------------------------------------------------------


def _check_names(names: Sequence[str], what: str) -> None:
    seen: dict[str, str] = {}
    for n in names:
        if not isinstance(n, str) or not n or "\x00" in n:
            raise ValueError(f"{what}: invalid column name {n!r}")
        folded = n.casefold()
        if folded in seen:
            # DuckDB and BigQuery fold case even for quoted names
            raise ValueError(f"{what}: columns {seen[folded]!r} and {n!r} differ only by case")
        seen[folded] = n


def validate_spec(spec: TableSpec) -> None:
    """Refuse a spec the writers cannot honour; raised before any I/O."""
    if not spec.name or "\x00" in spec.name:
        raise ValueError(f"invalid table name {spec.name!r}")
    names = [c.name for c in spec.columns]
    _check_names(names, f"table {spec.name}")
    reserved = {c.name.casefold() for c in LOAD_COLUMNS + SNAPSHOT_COLUMNS}
    clash = [n for n in names if n.casefold() in reserved]
    if clash:
        raise ValueError(f"table {spec.name}: columns {clash} are reserved for the writer")
    if not spec.key:
        raise ValueError(f"table {spec.name}: a key is required")
    for k in spec.key:
        if k not in names:
            raise ValueError(f"table {spec.name}: key column {k!r} is not a column")
    if spec.kind == "partitioned":
        for label, col in (
            ("date_column", spec.date_column),
            ("brand_column", spec.brand_column),
            ("engine_column", spec.engine_column),
        ):
            if col is None or col not in names:
                raise ValueError(f"table {spec.name}: {label} {col!r} is not a column")
        date_type = spec.column(spec.date_column).type  # type: ignore[arg-type]
        if not pa.types.is_date(date_type):
            raise ValueError(
                f"table {spec.name}: date_column {spec.date_column!r} must be a date, not {date_type}"
            )
    elif spec.kind != "snapshot":
        raise ValueError(f"table {spec.name}: unknown kind {spec.kind!r}")


def validate_rows(spec: TableSpec, rows: pa.Table) -> None:
    """Rows must carry the key (non-null) and no writer-owned columns; raised before any I/O."""
    names = rows.column_names
    _check_names(names, f"rows for {spec.name}")
    reserved = {c.name.casefold() for c in system_columns(spec)}
    clash = [n for n in names if n.casefold() in reserved]
    if clash:
        raise ValueError(
            f"rows for {spec.name}: columns {clash} are written by the warehouse, not the caller"
        )
    for k in spec.key:
        if k not in names:
            raise ValueError(f"rows for {spec.name}: key column {k!r} is missing")
        if rows[k].null_count:
            raise ValueError(f"rows for {spec.name}: key column {k!r} has {rows[k].null_count} null(s)")
    for f in rows.schema:
        sql_type(f.type)  # raises UnsupportedTypeError early


def _first_outside(column: pa.ChunkedArray, inside: pa.ChunkedArray) -> Any:
    mask = pc.invert(pc.fill_null(inside, False))
    return pc.filter(column, mask)[0].as_py()


def check_rows_in_scope(spec: TableSpec, rows: pa.Table, scope: PartitionScope) -> None:
    """Every row must lie in ``scope``: a row outside it could never be replaced by a re-run."""
    if spec.kind != "partitioned":
        raise ValueError(f"table {spec.name} is a snapshot table: use upsert_snapshot")
    if scope.start >= scope.end:
        raise ValueError(f"empty partition scope: start {scope.start} must be before end {scope.end}")
    if not scope.brand_ids or not scope.engines:
        raise ValueError("a partition scope needs at least one brand id and one engine")
    assert spec.date_column is not None
    for col in (spec.brand_column, spec.engine_column, spec.date_column):
        if col not in rows.column_names:
            raise ValueError(f"rows for {spec.name}: scope column {col!r} is missing")
    if rows.num_rows == 0:
        return
    checks: list[tuple[str, pa.ChunkedArray]] = []
    brand = rows[spec.brand_column]
    checks.append((spec.brand_column, pc.is_in(brand, value_set=pa.array(scope.brand_ids, type=brand.type))))
    engine = rows[spec.engine_column]
    checks.append((spec.engine_column, pc.is_in(engine, value_set=pa.array(scope.engines, type=engine.type))))
    day = pc.cast(rows[spec.date_column], pa.date32())
    in_range = pc.and_(
        pc.greater_equal(day, pa.scalar(scope.start, pa.date32())),
        pc.less(day, pa.scalar(scope.end, pa.date32())),
    )
    checks.append((spec.date_column, in_range))
    for col, inside in checks:
        outside = rows.num_rows - pc.sum(pc.fill_null(inside, False).cast(pa.int64())).as_py()
        if outside:
            example = _first_outside(rows[col], inside)
            raise ValueError(
                f"{outside} row(s) for {spec.name} fall outside the partition scope: e.g. "
                f"{col}={example!r} (scope: brands {list(scope.brand_ids)}, "
                f"[{scope.start}, {scope.end}), engines {list(scope.engines)}); nothing was written"
            )


def retires(scope: SnapshotScope | None) -> bool:
    """Whether a snapshot write retires anything (a column scope with no values retires nothing)."""
    return scope is not None and (scope.column is None or bool(scope.values))


def check_snapshot_scope(spec: TableSpec, scope: SnapshotScope | None, table_columns: Sequence[str]) -> None:
    if spec.kind != "snapshot":
        raise ValueError(f"table {spec.name} is a partitioned table: use replace_partitions")
    if scope is not None and scope.column is not None and scope.column not in table_columns:
        raise ValueError(f"snapshot scope column {scope.column!r} is not a column of {spec.name}")


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


# --- schema evolution ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExistingColumn:
    """A column as the engine reports it: its name, type name, logical type (None if foreign), comment."""

    name: str
    engine_type: str
    type: SqlType | None
    comment: str | None = None


@dataclass(frozen=True)
class NewColumn:
    name: str
    type: SqlType
    description: str


@dataclass(frozen=True)
class LoadPlan:
    """What one write does to the table's shape, decided before anything is written."""

    table: str
    #: the table does not exist yet: create it with ``columns`` (then the system columns)
    create: bool
    #: data columns to create (``create``) or to add with ALTER TABLE (existing table)
    columns: tuple[NewColumn, ...]
    #: columns of the rows, in the rows' order: the columns loaded
    load_columns: tuple[str, ...]
    #: data columns of the table the rows lack: left NULL by this write
    null_columns: tuple[str, ...]
    #: COMMENTs to (re)write: (column or None for the table, text)
    comments: tuple[tuple[str | None, str], ...]
    #: every column of the table after this write, in table order
    table_columns: tuple[str, ...]
    #: the column type each of ``load_columns`` lands in
    load_types: tuple[SqlType, ...] = ()

    @property
    def columns_added(self) -> list[str]:
        return [] if self.create else [c.name for c in self.columns]


def plan_load(
    spec: TableSpec,
    rows_schema: pa.Schema,
    existing: Sequence[ExistingColumn] | None,
    *,
    table_label: str,
    type_name: Callable[[SqlType], str],
    table_comment: str | None = None,
) -> LoadPlan:
    """Decide creation, added columns and comments; raise SchemaMismatchError on an incompatible change.

    ``existing=None`` means the table does not exist. ``type_name`` renders types in the engine's
    words for the error message; ``table_label`` is the schema-qualified name the error shows.
    """
    system = system_columns(spec)
    system_names = {c.name for c in system}
    incoming = {f.name: f.type for f in rows_schema}
    spec_names = {c.name for c in spec.columns}

    def check(column: str, target: SqlType, target_name: str) -> None:
        t = incoming.get(column)
        if t is None:
            return
        new = sql_type(t)
        if not is_compatible(target, new):
            new_name = type_name(new) if new is not None else "NULL"
            raise SchemaMismatchError(
                f"incompatible type change in table {table_label}, column {column!r}: "
                f"existing type {target_name}, new type {new_name} (Arrow {t}); nothing was written",
                table=table_label,
                column=column,
                old_type=target_name,
                new_type=new_name,
            )

    def new_column(name: str) -> NewColumn:
        if name in spec_names:
            col = spec.column(name)
            return NewColumn(name, sql_type_or_default(col.type), col.description)
        return NewColumn(name, sql_type_or_default(incoming[name]), EVOLVED_COLUMN_DESCRIPTION)

    wanted = [c.name for c in spec.columns] + [n for n in rows_schema.names if n not in spec_names]

    if existing is None:
        columns = tuple(new_column(n) for n in wanted)
        for c in columns:
            check(c.name, c.type, type_name(c.type))
        comments: list[tuple[str | None, str]] = [(None, table_comment or spec.description)]
        comments += [(c.name, c.description) for c in columns]
        comments += [(c.name, c.description) for c in system]
        table_columns = tuple(c.name for c in columns) + tuple(c.name for c in system)
        types = {c.name: c.type for c in columns}
        return LoadPlan(
            table=spec.name,
            create=True,
            columns=columns,
            load_columns=tuple(rows_schema.names),
            null_columns=(),
            comments=tuple(comments),
            table_columns=table_columns,
            load_types=tuple(types[n] for n in rows_schema.names),
        )

    by_name = {c.name: c for c in existing}
    for name, col in by_name.items():
        if name in incoming:
            if col.type is None:
                raise SchemaMismatchError(
                    f"table {table_label}, column {name!r} has type {col.engine_type}, which the writer "
                    f"does not manage; new type {type_name(sql_type_or_default(incoming[name]))}; "
                    "nothing was written",
                    table=table_label,
                    column=name,
                    old_type=col.engine_type,
                    new_type=type_name(sql_type_or_default(incoming[name])),
                )
            check(name, col.type, col.engine_type)
    missing_system = [c.name for c in system if c.name not in by_name]
    if missing_system:
        raise SchemaMismatchError(
            f"table {table_label} exists but lacks the writer's columns {missing_system}; "
            "it was not created by this connector; nothing was written",
            table=table_label,
        )
    added = tuple(new_column(n) for n in wanted if n not in by_name)
    for c in added:
        check(c.name, c.type, type_name(c.type))
    comments = []
    if table_comment is not None:
        comments.append((None, table_comment))
    descriptions = {c.name: c.description for c in spec.columns} | {c.name: c.description for c in system}
    for col in existing:
        want = descriptions.get(col.name)
        if want is not None and col.comment != want:
            comments.append((col.name, want))
    comments += [(c.name, c.description) for c in added]
    table_columns = tuple(c.name for c in existing) + tuple(c.name for c in added)
    null_columns = tuple(n for n in table_columns if n not in incoming and n not in system_names)
    types = {c.name: c.type for c in added} | {c.name: c.type for c in existing if c.type is not None}
    return LoadPlan(
        table=spec.name,
        create=False,
        columns=added,
        load_columns=tuple(rows_schema.names),
        null_columns=null_columns,
        comments=tuple(comments),
        table_columns=table_columns,
        load_types=tuple(types[n] for n in rows_schema.names),
    )


# --- NUL characters ------------------------------------------------------------------------------

#: U+0000 cannot be stored in Postgres text, and ``\u0000`` not in its jsonb. Every engine lands it
#: as U+FFFD (the Unicode replacement character) instead, so the same rows read the same everywhere
#: and the loss stays visible (docs/OPERATIONS.md, "Text with NUL characters").
NUL = "\x00"
NUL_REPLACEMENT = "\ufffd"
_JSON_NUL_ESCAPE = "\\u0000"


def clean_text(value: str) -> str:
    """``value`` with every NUL replaced by :data:`NUL_REPLACEMENT`."""
    return value.replace(NUL, NUL_REPLACEMENT) if NUL in value else value


def _may_hold_nul(array: pa.Array) -> bool:
    """Whether a string array's bytes hold a zero byte: one pass over its data buffer, no copy
    (UTF-8 encodes only U+0000 as a zero byte; a slice's buffer may cover more than the slice,
    which only costs the exact replacement a needless run)."""
    buffers = array.buffers()
    data = buffers[2] if len(buffers) > 2 else None
    return data is not None and data.size > 0 and int(np.frombuffer(data, dtype=np.uint8).min()) == 0


def _clean_strings(array: pa.Array) -> pa.Array:
    if not _may_hold_nul(array):
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
        if not _may_hold_nul(array.values):  # the whole child array: a cheap, safe over-estimate
            return array
        # rare: rebuilt through Python, which handles slices and null lists without special cases
        cleaned = [
            None if v is None else [x if x is None else clean_text(x) for x in v] for v in array.to_pylist()
        ]
        return pa.array(cleaned, type=t)
    return array


def _clean_json_text(array: pa.Array) -> pa.Array:
    """JSON text with neither a raw NUL nor a ``\\u0000`` escape (which Postgres' jsonb refuses):
    only values holding one are parsed and written again."""
    if not (_may_hold_nul(array) or pc.any(pc.match_substring(array, _JSON_NUL_ESCAPE)).as_py()):
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


def clean_column(column: pa.ChunkedArray, *, json_text: bool = False) -> pa.ChunkedArray:
    """A column without NUL characters (:data:`NUL_REPLACEMENT` instead); the column itself when it
    holds none, which is the common case and costs one scan of its string bytes."""
    clean = _clean_json_text if json_text else _clean_array
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


# --- encoding ------------------------------------------------------------------------------------


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
            col = clean_column(col, json_text=json_text)
        arrays.append(col)
    return pa.table(arrays, names=list(plan.load_columns))


@dataclass(frozen=True)
class WriteStamp:
    """The values of the writer-owned columns for one write: one timestamp for every row."""

    run_id: str
    loaded_at: dt.datetime

    @classmethod
    def now(cls, run_id: str) -> WriteStamp:
        """A stamp strictly later than every earlier stamp of this process (engines may use it to
        tell the rows of this write from older ones)."""
        global _last_stamp
        check_run_id(run_id)
        with _stamp_lock:
            now = dt.datetime.now(dt.UTC)
            if _last_stamp is not None and now <= _last_stamp:
                now = _last_stamp + dt.timedelta(microseconds=1)
            _last_stamp = now
        return cls(run_id, now)


_stamp_lock = threading.Lock()
_last_stamp: dt.datetime | None = None


def check_run_id(run_id: str) -> None:
    if not isinstance(run_id, str) or not run_id or NUL in run_id:
        raise ValueError("run_id must be a non-empty string without NUL")


def check_snapshot_write(
    spec: TableSpec, rows: pa.Table, scope: SnapshotScope | None, run_id: str
) -> WriteStamp:
    """Every check of a snapshot upsert that needs no I/O; returns the write's stamp."""
    validate_spec(spec)
    validate_rows(spec, rows)
    check_snapshot_scope(spec, scope, [c.name for c in spec.columns] + rows.column_names)
    return WriteStamp.now(run_id)


@dataclasses.dataclass(frozen=True)
class CheckedWrite:
    """One write of a landing, checked: its rows, and its scope as the rows land (NUL-free)."""

    rows: pa.Table
    scope: PartitionScope


def _checked(spec: TableSpec, rows: pa.Table, scope: PartitionScope) -> CheckedWrite:
    validate_rows(spec, rows)
    check_rows_in_scope(spec, rows, scope)
    return CheckedWrite(rows, clean_scope(scope))


def partition_writes(
    spec: TableSpec, writes: Iterable[PartitionWrite], run_id: str
) -> Iterator[CheckedWrite]:
    """The writes of one landing, each checked without I/O: its rows, and that they lie in its scope.

    The spec, the run id and the first write are checked when this is called, so an engine that
    calls it before opening anything refuses a bad single write before any I/O; the other writes
    are checked as the engine asks for them (one chunk in memory at a time). Engines stamp each
    write themselves (:meth:`WriteStamp.now`) when they write it, under their lock if they take one.
    """
    validate_spec(spec)
    check_run_id(run_id)
    source = iter(writes)
    first = next(source, None)
    checked = None if first is None else _checked(spec, *first)
    del first
    return _the_rest(spec, checked, source)


def _the_rest(
    spec: TableSpec, first: CheckedWrite | None, source: Iterator[PartitionWrite]
) -> Iterator[CheckedWrite]:
    if first is None:
        return
    yield first
    del first  # before the next chunk is read
    for write in source:
        rows, scope = write
        del write
        yield _checked(spec, rows, scope)
        del rows, scope


def is_one_shot(writes: Iterable[PartitionWrite]) -> bool:
    """Whether ``writes`` can be iterated only once (a generator): a retry cannot start it over."""
    return iter(writes) is writes
