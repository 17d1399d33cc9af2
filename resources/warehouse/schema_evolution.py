"""Schema evolution: what one write does to its table's shape, decided before anything is written.

:func:`plan_load` compares the incoming Arrow schema with the table's existing columns: it creates the
table, adds the columns the rows bring, rewrites comments that differ, and raises
:class:`~resources.warehouse.contract.SchemaMismatchError` on an incompatible type change
(:func:`~resources.warehouse.types.is_compatible`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from resources.warehouse.contract import (
    EVOLVED_COLUMN_DESCRIPTION,
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
