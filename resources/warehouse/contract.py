"""What callers hand a :class:`~resources.warehouse.base.Warehouse` and get back: table specs,
scopes, write results and errors. Depends on no other warehouse module."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import pyarrow as pa

from resources.failures import FailureKind

#: Columns every landed table carries in addition to its spec.
LOADED_AT = "_loaded_at"
RUN_ID = "_run_id"
#: Extra columns of snapshot tables.
IS_CURRENT = "is_current"
FIRST_SEEN_AT = "first_seen_at"
LAST_SEEN_AT = "last_seen_at"
#: The setting that names the warehouse; configuration errors name it.
WAREHOUSE_SETTING = "VISIBILITY_WAREHOUSE"
#: The logger of every warehouse warning.
LOGGER_NAME = "visibility.warehouse"


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True
    #: the value rows landed before the column existed take when a writer adds it (a key column
    #: added to an existing table needs one)
    default: str | None = None


@dataclass(frozen=True)
class TableSpec:
    """A landed table: typed columns, key, and how it is written: ``partitioned`` tables replace a
    :class:`PartitionScope`; ``snapshot`` tables upsert by key and keep vanished rows as not current.
    """

    name: str
    description: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    kind: Literal["partitioned", "snapshot"]
    #: partitioned tables: the DATE column the scope's range applies to (also BigQuery's partition column)
    date_column: str | None = None
    brand_column: str = "brand_id"
    engine_column: str = "engine"
    #: BigQuery clustering
    cluster_by: tuple[str, ...] = ("brand_id", "engine")

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns])

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


@dataclass(frozen=True)
class PartitionScope:
    """Exactly the rows a partitioned write replaces: these brands x [start, end) x these engines."""

    brand_ids: tuple[str, ...]
    start: dt.date
    end: dt.date  # exclusive
    engines: tuple[str, ...]


class PartitionWrite(NamedTuple):
    """One replace of :meth:`~resources.warehouse.base.Warehouse.replace_partitions_together`: these
    rows replace this scope."""

    rows: pa.Table
    scope: PartitionScope


@dataclass(frozen=True)
class SnapshotScope:
    """Which existing rows a snapshot write may retire: the whole table (``column=None``, e.g. ``brands``
    after a full listing) or the rows whose ``column`` is in ``values``.
    """

    column: str | None = None
    values: tuple[Any, ...] = ()


@dataclass
class WriteResult:
    table: str
    rows_written: int
    rows_deleted: int = 0  # partition replace: old rows removed; snapshot: rows retired
    columns_added: list[str] = field(default_factory=list)
    #: rows of ``rows`` dropped because a later row had the same key (the last one wins)
    duplicates_dropped: int = 0


class SchemaMismatchError(Exception):
    """An incompatible type change; names the table, the column and both types. Nothing was written."""

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        column: str | None = None,
        old_type: str | None = None,
        new_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.table = table
        self.column = column
        self.old_type = old_type
        self.new_type = new_type


class WarehouseLockTimeout(Exception):
    """Another process held the (DuckDB) writer lock longer than the configured timeout."""


class WarehouseConfigError(ValueError):
    """A warehouse setting is invalid, or the warehouse it names cannot be used; the message names
    the setting and never holds a password."""

    failure_kind = FailureKind.CONFIGURATION


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (engines append hints and links on later lines)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


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
#: The comment of a column the API started sending that the spec does not name.
EVOLVED_COLUMN_DESCRIPTION = "Not in the table spec: a field the API started sending (added automatically)."


def system_columns(spec: TableSpec) -> tuple[Column, ...]:
    """The writer's own columns of ``spec``'s table, after the spec's columns."""
    return LOAD_COLUMNS + (SNAPSHOT_COLUMNS if spec.kind == "snapshot" else ())
