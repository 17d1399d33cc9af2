"""Every check of a write that needs no I/O, in the order the write procedure runs them.

A snapshot write is checked whole (:func:`check_snapshot_write`); a landing of many partition writes
one write at a time (:func:`partition_writes`), so a long backfill holds one chunk in memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

import pyarrow as pa

from resources.warehouse.contract import PartitionScope, PartitionWrite, SnapshotScope, TableSpec
from resources.warehouse.nul import clean_scope
from resources.warehouse.scopes import check_rows_in_scope, check_snapshot_scope
from resources.warehouse.stamp import WriteStamp, check_run_id
from resources.warehouse.validation import validate_rows, validate_spec


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
    are checked as the engine asks for them (one chunk in memory at a time). The write procedure
    stamps each write (:meth:`WriteStamp.now`) when it stages it, inside the engine's write
    transaction (under its lock if it takes one).
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
