"""Schema evolution: what one write does to its table's shape, decided before anything is written.

:func:`plan_load` compares the incoming Arrow schema with the table's existing columns: it creates the
table, adds the columns the rows bring, rewrites comments that differ, and raises
:class:`~resources.warehouse.contract.SchemaMismatchError` on an incompatible type change
(:func:`~resources.warehouse.types.is_compatible`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    planner = _Planner(spec, rows_schema, table_label, type_name)
    if existing is None:
        return planner.create(table_comment)
    return planner.evolve(existing, table_comment)


@dataclass(frozen=True)
class _Planner:
    spec: TableSpec
    rows_schema: pa.Schema
    table_label: str
    type_name: Callable[[SqlType], str]

    @property
    def incoming(self) -> dict[str, pa.DataType]:
        return {f.name: f.type for f in self.rows_schema}

    def check(self, column: str, target: SqlType, target_name: str) -> None:
        """Raise SchemaMismatchError if the rows' ``column`` cannot land in a ``target`` column."""
        t = self.incoming.get(column)
        if t is None:
            return
        new = sql_type(t)
        if not is_compatible(target, new):
            new_name = self.type_name(new) if new is not None else "NULL"
            raise SchemaMismatchError(
                f"incompatible type change in table {self.table_label}, column {column!r}: "
                f"existing type {target_name}, new type {new_name} (Arrow {t}); nothing was written",
                table=self.table_label,
                column=column,
                old_type=target_name,
                new_type=new_name,
            )

    def new_columns(self, skip: Collection[str] = ()) -> tuple[NewColumn, ...]:
        """The spec's columns, then the rows' columns the spec lacks, but those in ``skip``; checked."""
        spec, incoming = self.spec, self.incoming
        spec_names = {c.name for c in spec.columns}
        columns = [NewColumn(c.name, sql_type_or_default(c.type), c.description) for c in spec.columns]
        columns += [
            NewColumn(n, sql_type_or_default(incoming[n]), EVOLVED_COLUMN_DESCRIPTION)
            for n in self.rows_schema.names
            if n not in spec_names
        ]
        new = tuple(c for c in columns if c.name not in skip)
        for c in new:
            self.check(c.name, c.type, self.type_name(c.type))
        return new

    def plan(self, types: Mapping[str, SqlType], **fields: Any) -> LoadPlan:
        names = tuple(self.rows_schema.names)
        return LoadPlan(
            table=self.spec.name,
            load_columns=names,
            load_types=tuple(types[n] for n in names),
            **fields,
        )

    def create(self, table_comment: str | None) -> LoadPlan:
        system = system_columns(self.spec)
        columns = self.new_columns()
        comments: list[tuple[str | None, str]] = [(None, table_comment or self.spec.description)]
        comments += [(c.name, c.description) for c in (*columns, *system)]
        return self.plan(
            create=True,
            columns=columns,
            null_columns=(),
            comments=tuple(comments),
            table_columns=tuple(c.name for c in (*columns, *system)),
            types={c.name: c.type for c in columns},
        )

    def evolve(self, existing: Sequence[ExistingColumn], table_comment: str | None) -> LoadPlan:
        spec, label, incoming = self.spec, self.table_label, self.incoming
        system = system_columns(spec)
        by_name = {c.name: c for c in existing}
        for name, col in by_name.items():
            if name not in incoming:
                continue
            if col.type is None:
                new_name = self.type_name(sql_type_or_default(incoming[name]))
                raise SchemaMismatchError(
                    f"table {label}, column {name!r} has type {col.engine_type}, which the writer "
                    f"does not manage; new type {new_name}; nothing was written",
                    table=label,
                    column=name,
                    old_type=col.engine_type,
                    new_type=new_name,
                )
            self.check(name, col.type, col.engine_type)
        missing_system = [c.name for c in system if c.name not in by_name]
        if missing_system:
            raise SchemaMismatchError(
                f"table {label} exists but lacks the writer's columns {missing_system}; "
                "it was not created by this connector; nothing was written",
                table=label,
            )
        added = self.new_columns(skip=by_name)
        comments: list[tuple[str | None, str]] = [] if table_comment is None else [(None, table_comment)]
        descriptions = {c.name: c.description for c in (*spec.columns, *system)}
        comments += [
            (c.name, descriptions[c.name])
            for c in existing
            if c.name in descriptions and c.comment != descriptions[c.name]
        ]
        comments += [(c.name, c.description) for c in added]
        table_columns = tuple(c.name for c in existing) + tuple(c.name for c in added)
        system_names = {c.name for c in system}
        return self.plan(
            create=False,
            columns=added,
            null_columns=tuple(n for n in table_columns if n not in incoming and n not in system_names),
            comments=tuple(comments),
            table_columns=table_columns,
            types={c.name: c.type for c in added} | {c.name: c.type for c in existing if c.type is not None},
        )
