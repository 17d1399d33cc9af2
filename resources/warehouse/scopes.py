"""Scope checks: a partition write's rows lie in its scope, a snapshot write's scope fits its table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from resources.warehouse.contract import PartitionScope, SnapshotScope, TableSpec


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
