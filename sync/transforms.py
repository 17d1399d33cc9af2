"""Pure transforms: API rows and responses -> Arrow tables shaped like :mod:`sync.tables`.

Known columns get the spec's type, strictly: a value of another JSON type or out of range is a
``TransformError`` naming table and column, and nothing of the batch is written. Unknown fields land
as extra columns (nested ones as JSON text), up to ``VISIBILITY_MAX_NEW_COLUMNS``
(:func:`check_new_columns`). The rules are in docs/OPERATIONS.md and docs/TABLES.md.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from resources.api.config import MAX_NEW_COLUMNS_SETTING
from resources.api.endpoints import INT64_MAX, INT64_MIN, json_kind
from resources.api.errors import ResponseShapeError
from resources.api.redaction import excerpt, sanitize
from resources.warehouse.contract import TableSpec
from sync import tables
from sync.planning import Box, Cell, Window

Row = Mapping[str, Any]


class TransformError(ResponseShapeError, ValueError):
    """A value of the API does not fit its column's declared type; names table, column, endpoint.
    A ``ResponseShapeError`` (the CLI maps it like any invalid answer) and a ``ValueError``."""

    def __init__(self, message: str, *, table: str | None = None, column: str | None = None) -> None:
        self.table = table
        self.column = column
        super().__init__(message, field=column)

    def name_endpoint(self, endpoint: str) -> None:
        """Name the endpoint the rows came from: the fetch knows it, the transform does not."""
        if self.endpoint is None:
            self.endpoint = endpoint
            self.args = (self._render(),)


class TooManyFieldsError(TransformError):
    """A table's fetch brought more unknown fields than ``VISIBILITY_MAX_NEW_COLUMNS``: refused
    before its landing, so the table keeps its columns and the landing its memory."""


def check_new_columns(spec: TableSpec, names: Iterable[str], limit: int) -> None:
    """Raise ``TooManyFieldsError`` when ``names`` (the columns a table's fetch brought so far) hold
    more than ``limit`` that ``spec`` does not declare; names the table, the count and the setting."""
    declared = {c.name for c in spec.columns}
    unknown = sorted(set(names) - declared)
    if len(unknown) > limit:
        shown = ", ".join(sanitize(n, 40) for n in unknown[:3])
        raise TooManyFieldsError(
            f"{spec.name}: the service sent {len(unknown)} unknown fields ({shown}, ...), more than "
            f"{MAX_NEW_COLUMNS_SETTING}={limit} new columns; nothing of the table landed (raise the "
            "setting to land them as columns)",
            table=spec.name,
        )


def _wrong(value: Any, expected: str) -> TypeError:
    return TypeError(f"{json_kind(value)} {excerpt(value)} where {expected} was expected")


def _parse_timestamp(text: str) -> dt.datetime:
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return dt.datetime.fromisoformat(text)


def _to_date(value: Any) -> dt.date | None:
    if value is None or (isinstance(value, dt.date) and not isinstance(value, dt.datetime)):
        return value
    if isinstance(value, dt.datetime):
        return value.date()
    if not isinstance(value, str):
        raise _wrong(value, "a date (YYYY-MM-DD)")
    try:
        if len(value) > 10:  # a date-time where a date belongs: its own date, if it is one
            _parse_timestamp(value)
        return dt.date.fromisoformat(value[:10])
    except ValueError:
        raise ValueError(f"{excerpt(value)} is not a date (YYYY-MM-DD)") from None


def _to_timestamp(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, dt.date):
        parsed = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            parsed = _parse_timestamp(value)
        except ValueError:
            raise ValueError(f"{excerpt(value)} is not an ISO 8601 date-time") from None
    else:
        raise _wrong(value, "an ISO 8601 date-time")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def _to_int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong(value, "an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise TypeError(f"non-integral number {excerpt(value)} where an integer was expected")
        value = int(value)
    if not INT64_MIN <= value <= INT64_MAX:
        raise TypeError(f"integer {sanitize(value, 40)} is outside the 64-bit range")
    return value


def _to_float(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong(value, "a number")
    try:
        return float(value)
    except OverflowError:
        raise TypeError(f"integer {sanitize(value, 40)} is too large for a 64-bit float") from None


def _to_bool(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise _wrong(value, "a boolean")


def _to_strings(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(v is None or isinstance(v, str) for v in value):
        raise _wrong(value, "an array of strings")
    return list(value)


def _to_text(value: Any) -> str | None:
    """A declared string column: strings only (a number or an object is another type)."""
    if value is None or isinstance(value, str):
        return value
    raise _wrong(value, "a string")


def _to_string(value: Any) -> str | None:
    """An unknown field of mixed types: everything as text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


#: The strict converter of each kind of declared column; a string column's otherwise (``_to_text``).
_CONVERTERS: tuple[tuple[Callable[[pa.DataType], bool], Callable[[Any], Any]], ...] = (
    (pa.types.is_date, _to_date),
    (pa.types.is_timestamp, _to_timestamp),
    (pa.types.is_integer, _to_int),
    (pa.types.is_floating, _to_float),
    (pa.types.is_boolean, _to_bool),
    (pa.types.is_list, _to_strings),
)


def _converter(arrow_type: pa.DataType) -> Callable[[Any], Any]:
    return next((convert for is_kind, convert in _CONVERTERS if is_kind(arrow_type)), _to_text)


_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)


def _accepted_kind(kind: pa.DataType, arrow_type: pa.DataType) -> bool:
    """Whether Arrow's inferred ``kind`` holds exactly what the Python converters would accept (dates
    and date-times: strings, which Arrow's cast parses when they are plain ISO)."""
    return (
        pa.types.is_null(kind)
        or ((pa.types.is_date(arrow_type) or pa.types.is_timestamp(arrow_type)) and pa.types.is_string(kind))
        or (pa.types.is_integer(arrow_type) and pa.types.is_integer(kind))
        or (pa.types.is_floating(arrow_type) and (pa.types.is_floating(kind) or pa.types.is_integer(kind)))
        or (pa.types.is_boolean(arrow_type) and pa.types.is_boolean(kind))
        or (pa.types.is_string(arrow_type) and pa.types.is_string(kind))
        or (pa.types.is_list(arrow_type) and pa.types.is_list(kind) and pa.types.is_string(kind.value_type))
    )


def _typed(inferred: pa.Array, arrow_type: pa.DataType) -> pa.Array | None:
    """An array Arrow inferred, in ``arrow_type``, or None when the converters must decide."""
    if inferred.type == arrow_type:
        return inferred
    if not _accepted_kind(inferred.type, arrow_type):
        return None
    try:
        return inferred.cast(arrow_type)
    except _ARROW_ERRORS:
        return None


def _is_nested(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    if isinstance(value, list):
        return not all(isinstance(v, str) for v in value)
    return False


def _extra_array(values: list[Any], *, table: str, name: str) -> pa.Array:
    """Unknown field: keep its inferred type; JSON text for nested values or mixed types."""
    present = [v for v in values if v is not None]
    if not present:
        return pa.array(values, type=pa.string())
    if any(_is_nested(v) for v in present):
        return pa.array(
            [None if v is None else json.dumps(v, sort_keys=True, default=str) for v in values],
            type=pa.string(),
        )
    try:
        return pa.array(values)
    except OverflowError:
        raise TransformError(
            f"{table}.{name}: an integer of the unknown field '{name}' is outside the 64-bit range; "
            "nothing was written",
            table=table,
            column=name,
        ) from None
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_to_string(v) for v in values], type=pa.string())


def _column_error(spec: TableSpec, name: str, message: str) -> TransformError:
    return TransformError(f"{spec.name}.{name}: {message}", table=spec.name, column=name)


def _object(spec: TableSpec, name: str, value: Any) -> Mapping[str, Any]:
    """``value``, a JSON object, or the TransformError saying it is not."""
    if not isinstance(value, Mapping):
        raise TransformError(
            f"{spec.name}: `{name}` of {json_kind(value)} {excerpt(value)} where an object was expected; "
            "nothing was written",
            table=spec.name,
        )
    return value


def _converted(spec: TableSpec, column: Any, raw: list[Any]) -> pa.Array:
    """One declared column from its Python values, by the strict converters (a page Arrow could not
    pivot, a value the connector sets, a column Arrow typed otherwise)."""
    convert = _converter(column.type)
    try:
        return pa.array([convert(v) for v in raw], type=column.type)
    except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
        raise _column_error(
            spec, column.name, f"cannot read as {column.type}: {exc}; nothing was written"
        ) from None


def _pivot(rows: Sequence[Row]) -> pa.StructArray | None:
    """Every row's fields as typed columns in one pass of Arrow's C++ (types inferred), or None
    when a field mixes types (or holds an integer beyond 64 bits): then each column is read alone."""
    try:
        pivoted = pa.array(rows)
    except (*_ARROW_ERRORS, TypeError, ValueError):
        return None
    return pivoted if pa.types.is_struct(pivoted.type) else None


def _plain_extra(array: pa.Array) -> bool:
    """An unknown field Arrow inferred as a scalar, or as a list of (non-null) strings: kept as is."""
    kind = array.type
    if pa.types.is_struct(kind) or pa.types.is_map(kind) or pa.types.is_null(kind):
        return False
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.types.is_string(kind.value_type) and pc.list_flatten(array).null_count == 0
    return not pa.types.is_nested(kind)


def _repeated(one: pa.Array, length: int) -> pa.Array:
    """The value of a one-value array, ``length`` times: converted once, not once per row."""
    return pa.repeat(one[0], length)


def _given(spec: TableSpec, column: Any, value: Any, length: int) -> pa.Array:
    """A column the connector sets: an array as it is, or one value repeated (strictly typed)."""
    if isinstance(value, pa.Array | pa.ChunkedArray):
        if value.type == column.type:
            return value
        return _converted(spec, column, value.to_pylist())
    if not length:
        return _converted(spec, column, [])
    return _repeated(_converted(spec, column, [value]), length)


def rows_to_table(
    spec: TableSpec, rows: Sequence[Row], overrides: Mapping[str, Any] | None = None
) -> pa.Table:
    """Rows (API field names) -> the spec's schema plus extras.

    ``overrides``: the columns the connector sets, whatever the rows hold (``{**row, **overrides}``),
    one value for every row or an Arrow array of one per row. Arrow pivots the rows in one pass; a
    column it did not type exactly as the strict converters would is read again by them, which raise.
    """
    overrides = overrides or {}
    known = {c.name for c in spec.columns}
    pivoted = _pivot(rows) if rows else None
    present: dict[str, pa.Array] = {}
    if pivoted is not None:
        present = {field.name: pivoted.field(i) for i, field in enumerate(pivoted.type)}
    arrays: list[pa.Array] = []
    fields: list[pa.Field] = []
    for column in spec.columns:
        name = column.name
        array: pa.Array | None = None
        if name in overrides:
            array = _given(spec, column, overrides[name], len(rows))
        elif name in present:
            array = _typed(present[name], column.type)
        elif pivoted is not None:
            array = pa.nulls(len(rows), column.type)
        if array is None:
            array = _converted(spec, column, [row.get(name) for row in rows])
        if not column.nullable and array.null_count:
            raise _column_error(spec, name, "required value missing in an API row")
        arrays.append(array)
        fields.append(pa.field(name, column.type, nullable=column.nullable))
    seen = set(present) if pivoted is not None else set().union(*rows)
    for name in sorted(seen - known):
        array = present.get(name)  # None without a pivot
        if array is None or not _plain_extra(array):
            array = _extra_array([row.get(name) for row in rows], table=spec.name, name=name)
        arrays.append(array)
        fields.append(pa.field(name, array.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def concat(spec: TableSpec, parts: Iterable[pa.Table]) -> pa.Table:
    """Concatenate parts whose extra columns may differ (missing ones become null), contiguously:
    engines load a table of many small chunks with far more memory."""
    tables = [t for t in parts if t.num_rows or t.num_columns > len(spec.columns)]
    if not tables:
        return spec.arrow_schema.empty_table()
    table = pa.concat_tables(tables, promote_options="permissive")
    if len(tables) == 1:
        return table
    try:
        return table.combine_chunks()
    except pa.ArrowInvalid:  # a string column past Arrow's 2 GiB offsets: keep the pieces
        return table


# ---------------------------------------------------------------------------------------------
# the endpoints' transforms


def brand_rows(
    spec: TableSpec, fields: Sequence[str] | None = None
) -> Callable[[Sequence[Row], str], pa.Table]:
    """The transform of a plain row endpoint: each row (only ``fields`` of it, if given) with the
    ``brand_id`` it was fetched for, typed by ``spec`` (what the answers' and mentions' are)."""

    def transform(rows: Sequence[Row], brand_id: str) -> pa.Table:
        if fields is not None:
            rows = [{name: row.get(name) for name in fields} for row in rows]
        return rows_to_table(spec, rows, {"brand_id": brand_id})

    return transform


def per_brand_table(spec: TableSpec, rows_by_brand: Mapping[str, Sequence[Row]]) -> pa.Table:
    """A per-brand listing as one table: each brand's rows plus the brand they were listed for."""
    transform = brand_rows(spec)
    return concat(spec, [transform(rows, brand_id) for brand_id, rows in rows_by_brand.items()])


#: The paged row endpoints: each row plus the brand it was fetched for.
mentions_table = brand_rows(tables.PROMPT_MENTIONS)
answers_table = brand_rows(tables.ANSWERS)


def cited_pages_table(
    rows: Sequence[Row],
    *,
    brand_id: str,
    day: dt.date,
    engine: str,
    total_count: int | None,
    total_citations: int | None,
    capped: bool,
) -> pa.Table:
    """One day's ranked pages; ``rank`` is the API's order (ranked by citation count)."""
    given = {
        "brand_id": brand_id,
        "date": day,
        "engine": engine,
        "rank": pa.array(range(1, len(rows) + 1), type=pa.int64()),
        "total_count": total_count,
        "total_citations": total_citations,
        "capped": capped,
    }
    return rows_to_table(tables.CITED_PAGES, rows, overrides=given)


def citation_trend_table(
    data: Row, *, brand_id: str, engine: str, topic_id: str | None = None, window: Window | None = None
) -> pa.Table:
    """Series points of one target as ``day`` rows, and its ``summary`` (over the request window, with
    its change: not a sum of the points) as a ``window`` row owned by the window's last day. ``window``
    (the request's) dates the summary; without it the summary is not landed."""
    target = data.get("target") or {}
    common = {
        "brand_id": brand_id,
        "engine": engine,
        "target_type": target.get("type"),
        "target_value": target.get("value"),
        "is_own_domain": target.get("is_own_domain"),
        "topic_id": topic_id or tables.ALL_TOPICS,
    }
    shaped = [
        {**point, **common, "granularity": tables.DAY, "period_start": point.get("date")}
        for point in data.get("series") or ()
    ]
    summary = data.get("summary")
    if window is not None and summary is not None:
        summary = _object(tables.CITATION_TRENDS, "summary", summary)
        change = summary.get("change") if isinstance(summary.get("change"), Mapping) else {}
        shaped.append(
            {
                **{k: v for k, v in summary.items() if k != "change"},
                **common,
                "granularity": tables.WINDOW,
                "period_start": window.start,
                "date": window.end - dt.timedelta(days=1),
                "change_absolute": change.get("absolute"),
                "change_percentage": change.get("percentage"),
            }
        )
    return rows_to_table(tables.CITATION_TRENDS, shaped)


_ENTITY_FIELDS = ("brand_name", "is_your_brand", "domains", "history_from")


def _trend_date(value: Any, column: str) -> dt.date:
    """A date of a competitor trend response (a bucket start, ``from``, ``to``), or a TransformError."""
    try:
        day = _to_date(value)
    except (TypeError, ValueError) as exc:
        day, problem = None, str(exc)
    else:
        problem = "missing"
    if day is None:
        raise _column_error(tables.COMPETITOR_TRENDS, column, f"{problem}; nothing was written")
    return day


def _bucket_end(start: dt.date, granularity: str) -> dt.date:
    """The last day of a series bucket: the day itself, or the Sunday of a week starting on Monday."""
    if granularity == tables.DAY:
        return start
    if granularity == tables.WEEK and start.weekday() == 0:
        return start + dt.timedelta(days=6)
    raise _column_error(
        tables.COMPETITOR_TRENDS,
        "period_start",
        f"a `{granularity}` bucket starting {start} (the spec's buckets are days, or weeks starting on "
        "Monday); nothing was written",
    )


def competitor_trend_table(
    data: Row, *, brand_id: str, engine: str, totals: bool = False, window: Window | None = None
) -> pa.Table:
    """Every entity's series points (the brand, then each tracked competitor), as ``day`` or ``week``
    rows; with ``totals``, each entity's window totals too, as a ``window`` row owned by the window's
    last day. ``window`` (the request's) stands in for a response without ``from``/``to``."""
    granularity = data.get("granularity") or tables.DAY
    entities = [data["brand"], *(data.get("competitors") or ())] if data.get("brand") else []
    shaped: list[dict[str, Any]] = []
    period: tuple[dt.date, dt.date] | None = None
    if totals and entities:
        first = _trend_date(data.get("from") or (window and window.start), "period_start")
        end = _trend_date(data.get("to") or (window and window.end), "date")
        period = (first, end - dt.timedelta(days=1))
    for entity in entities:
        common = {
            **{name: entity.get(name) for name in _ENTITY_FIELDS},
            "brand_id": brand_id,
            "engine": engine,
            "competitor_id": entity.get("id"),
        }
        for point in entity.get("series") or ():
            start = _trend_date(point.get("date"), "period_start")
            shaped.append(
                {
                    **point,
                    **common,
                    "granularity": granularity,
                    "period_start": start,
                    "date": _bucket_end(start, granularity),
                }
            )
        if period is not None and entity.get("totals") is not None:
            shaped.append(
                {
                    **_object(tables.COMPETITOR_TRENDS, "totals", entity["totals"]),
                    **common,
                    "granularity": tables.WINDOW,
                    "period_start": period[0],
                    "date": period[1],
                }
            )
    return rows_to_table(tables.COMPETITOR_TRENDS, shaped)


# ---------------------------------------------------------------------------------------------
# splitting by partition


def keep_rows(table: pa.Table, mask: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``table.filter(mask)`` (null counts as false), but the table itself when every row is kept:
    Arrow's filter copies the rows even then, and landing filters each chunk twice."""
    mask = pc.fill_null(mask, False)
    if pc.all(mask).as_py() is not False:
        return table
    return table.filter(mask)


def _cell_mask(table: pa.Table, date_column: str, cells: frozenset[Cell] | set[Cell]) -> pa.Array:
    """Engines that share a date set are tested together: a rectangular run is two ``is_in``."""
    dates_by_engine: dict[str, set[dt.date]] = {}
    for day, engine in cells:
        dates_by_engine.setdefault(engine, set()).add(day)
    engines_by_dates: dict[frozenset[dt.date], list[str]] = {}
    for engine, days in dates_by_engine.items():
        engines_by_dates.setdefault(frozenset(days), []).append(engine)
    mask = pa.array([False] * table.num_rows, type=pa.bool_())
    dates, engines = table[date_column], table["engine"]
    for days, group in engines_by_dates.items():
        hit = pc.and_(
            pc.is_in(engines, value_set=pa.array(group, type=pa.string())),
            pc.is_in(dates, value_set=pa.array(sorted(days), type=pa.date32())),
        )
        mask = pc.or_(mask, pc.fill_null(hit, False))
    return mask


def filter_cells(table: pa.Table, date_column: str, cells: frozenset[Cell] | set[Cell]) -> pa.Table:
    """Keep the rows of the run's ``(date, engine)`` cells (drops hull days and other engines)."""
    if table.num_rows == 0:
        return table
    return keep_rows(table, _cell_mask(table, date_column, cells))


def select_box(table: pa.Table, date_column: str, box: Box) -> pa.Table:
    """Rows inside one write scope."""
    if table.num_rows == 0:
        return table
    dates = table[date_column]
    mask = pc.and_(
        pc.and_(
            pc.greater_equal(dates, pa.scalar(box.window.start, pa.date32())),
            pc.less(dates, pa.scalar(box.window.end, pa.date32())),
        ),
        pc.is_in(table["engine"], value_set=pa.array(list(box.engines), type=pa.string())),
    )
    return keep_rows(table, mask)
