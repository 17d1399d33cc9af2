"""Every check of a write that needs no I/O: a spec or rows the writers cannot honour, rows outside
their scope, a bad run id. Raised before anything is opened; nothing is written."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from resources.warehouse.contract import (
    LOAD_COLUMNS,
    SNAPSHOT_COLUMNS,
    PartitionScope,
    PartitionWrite,
    SnapshotScope,
    TableSpec,
    system_columns,
)
from resources.warehouse.encoding import NUL, clean_scope


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
    """Refuse a spec the writers cannot honour."""
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
    """Rows must carry the key (non-null) and no writer-owned columns (types: ``plan_load``)."""
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


def check_run_id(run_id: str) -> None:
    if not isinstance(run_id, str) or not run_id or NUL in run_id:
        raise ValueError("run_id must be a non-empty string without NUL")


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
    brand, engine = rows[spec.brand_column], rows[spec.engine_column]
    day = pc.cast(rows[spec.date_column], pa.date32())
    checks = [
        (spec.brand_column, pc.is_in(brand, value_set=pa.array(scope.brand_ids, type=brand.type))),
        (spec.engine_column, pc.is_in(engine, value_set=pa.array(scope.engines, type=engine.type))),
        (
            spec.date_column,
            pc.and_(
                pc.greater_equal(day, pa.scalar(scope.start, pa.date32())),
                pc.less(day, pa.scalar(scope.end, pa.date32())),
            ),
        ),
    ]
    for col, inside in checks:
        outside = pc.invert(pc.fill_null(inside, False))
        count = pc.sum(outside.cast(pa.int64())).as_py()
        if count:
            example = pc.filter(rows[col], outside)[0].as_py()
            raise ValueError(
                f"{count} row(s) for {spec.name} fall outside the partition scope: e.g. "
                f"{col}={example!r} (scope: brands {list(scope.brand_ids)}, "
                f"[{scope.start}, {scope.end}), engines {list(scope.engines)}); nothing was written"
            )


def retires(scope: SnapshotScope | None) -> bool:
    """Whether a snapshot write retires anything (a column scope with no values retires nothing)."""
    return scope is not None and (scope.column is None or bool(scope.values))


def check_snapshot_write(spec: TableSpec, rows: pa.Table, run_id: str) -> None:
    """Every check of a snapshot upsert that needs no I/O."""
    validate_spec(spec)
    validate_rows(spec, rows)
    if spec.kind != "snapshot":
        raise ValueError(f"table {spec.name} is a partitioned table: use replace_partitions")
    check_run_id(run_id)


def partition_writes(
    spec: TableSpec, writes: Iterable[PartitionWrite], run_id: str
) -> Iterator[PartitionWrite]:
    """The writes of one landing, each checked as the engine asks for it (one chunk in memory at a
    time), with its scope as the rows land (NUL-free). The spec and the run id are checked at this
    call, before the engine opens anything."""
    validate_spec(spec)
    check_run_id(run_id)
    return _checked(spec, writes)


def _checked(spec: TableSpec, writes: Iterable[PartitionWrite]) -> Iterator[PartitionWrite]:
    for rows, scope in writes:
        validate_rows(spec, rows)
        check_rows_in_scope(spec, rows, scope)
        yield PartitionWrite(rows, clean_scope(scope))
        del rows, scope  # before the next chunk is read


def is_one_shot(writes: Iterable[PartitionWrite]) -> bool:
    """Whether ``writes`` can be iterated only once (a generator): a retry cannot start it over."""
    return iter(writes) is writes
