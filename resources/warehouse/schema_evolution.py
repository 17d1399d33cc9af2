"""Schema evolution: what one write does to its table's shape, decided before anything is written.

Columns are only ever added; an incompatible type change raises
:class:`~resources.warehouse.contract.SchemaMismatchError` before any write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from resources.warehouse.contract import (
    EVOLVED_COLUMN_DESCRIPTION,
    Column,
    SchemaMismatchError,
    TableSpec,
    system_columns,
)
from resources.warehouse.types import SqlType, is_compatible, sql_type, sql_type_or_default


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


def _check_fits(
    column: str,
    incoming: dict[str, pa.DataType],
    target: SqlType,
    target_name: str,
    *,
    table_label: str,
    type_name: Callable[[SqlType], str],
) -> None:
    """Raise SchemaMismatchError if the rows' ``column`` cannot land in a ``target`` column."""
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


def _check_existing(
    existing: Sequence[ExistingColumn],
    incoming: dict[str, pa.DataType],
    system: Sequence[Column],
    *,
    table_label: str,
    type_name: Callable[[SqlType], str],
) -> None:
    """The table's columns take the rows' types, and it has the writer's own columns."""
    for col in existing:
        if col.name in incoming and col.type is None:
            new_name = type_name(sql_type_or_default(incoming[col.name]))
            raise SchemaMismatchError(
                f"table {table_label}, column {col.name!r} has type {col.engine_type}, which the writer "
                f"does not manage; new type {new_name}; nothing was written",
                table=table_label,
                column=col.name,
                old_type=col.engine_type,
                new_type=new_name,
            )
        if col.type is not None:
            _check_fits(
                col.name, incoming, col.type, col.engine_type, table_label=table_label, type_name=type_name
            )
    names = {c.name for c in existing}
    missing_system = [c.name for c in system if c.name not in names]
    if missing_system:
        raise SchemaMismatchError(
            f"table {table_label} exists but lacks the writer's columns {missing_system}; "
            "it was not created by this connector; nothing was written",
            table=table_label,
        )


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
    ``existing=None``: the table does not exist.
    """
    incoming = {f.name: f.type for f in rows_schema}
    system = system_columns(spec)
    by_name = {c.name: c for c in existing or ()}
    if existing is not None:
        _check_existing(existing, incoming, system, table_label=table_label, type_name=type_name)

    # the spec's columns, then the rows' columns the spec lacks: those the table does not have yet
    spec_names = {c.name for c in spec.columns}
    candidates = [NewColumn(c.name, sql_type_or_default(c.type), c.description) for c in spec.columns]
    candidates += [
        NewColumn(n, sql_type_or_default(incoming[n]), EVOLVED_COLUMN_DESCRIPTION)
        for n in rows_schema.names
        if n not in spec_names
    ]
    added = tuple(c for c in candidates if c.name not in by_name)
    for c in added:
        _check_fits(c.name, incoming, c.type, type_name(c.type), table_label=table_label, type_name=type_name)

    comments: list[tuple[str | None, str]]
    if existing is None:
        comments = [(None, table_comment or spec.description)]
        comments += [(c.name, c.description) for c in (*added, *system)]
        table_columns = tuple(c.name for c in (*added, *system))
        null_columns: tuple[str, ...] = ()
    else:
        descriptions = {c.name: c.description for c in (*spec.columns, *system)}
        comments = [] if table_comment is None else [(None, table_comment)]
        comments += [
            (c.name, descriptions[c.name])
            for c in existing
            if c.name in descriptions and c.comment != descriptions[c.name]
        ]
        comments += [(c.name, c.description) for c in added]
        table_columns = tuple(c.name for c in existing) + tuple(c.name for c in added)
        system_names = {c.name for c in system}
        null_columns = tuple(n for n in table_columns if n not in incoming and n not in system_names)
    types = {c.name: c.type for c in by_name.values() if c.type is not None}
    types |= {c.name: c.type for c in added}
    return LoadPlan(
        table=spec.name,
        create=existing is None,
        columns=added,
        load_columns=tuple(rows_schema.names),
        null_columns=null_columns,
        comments=tuple(comments),
        table_columns=table_columns,
        load_types=tuple(types[n] for n in rows_schema.names),
    )
