"""The one writer interface every warehouse engine implements (see docs/ARCHITECTURE.md).

Table contracts are plain data (:class:`TableSpec`); rows arrive as Arrow tables. Engines own all
SQL: assets never build SQL themselves.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import pyarrow as pa

#: Columns every landed table carries in addition to its spec.
LOADED_AT = "_loaded_at"
RUN_ID = "_run_id"
#: Extra columns of snapshot tables.
IS_CURRENT = "is_current"
FIRST_SEEN_AT = "first_seen_at"
LAST_SEEN_AT = "last_seen_at"
#: The setting that names the warehouse; configuration errors name it.
WAREHOUSE_SETTING = "VISIBILITY_WAREHOUSE"


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True


@dataclass(frozen=True)
class TableSpec:
    """A landed table: typed columns, key, and how it is written.

    ``kind="partitioned"``: rows are replaced by :class:`PartitionScope` (brand x date range x engine).
    ``kind="snapshot"``: rows are upserted by key; rows gone from the API are kept with
    ``is_current = false`` (see :meth:`Warehouse.upsert_snapshot`).
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
    """One replace of :meth:`Warehouse.replace_partitions_together`: these rows replace this scope."""

    rows: pa.Table
    scope: PartitionScope


@dataclass(frozen=True)
class SnapshotScope:
    """Which existing rows a snapshot write may retire (mark ``is_current = false``).

    ``column=None`` means the whole table (for example ``brands`` after a full listing);
    otherwise rows whose ``column`` is in ``values`` (for example ``brand_id`` of the brands fetched).
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
    """A warehouse setting is invalid, or the warehouse it names cannot be used (found before any
    API request by :meth:`Warehouse.check_connection`); the message names the setting and never
    holds a password."""


class Warehouse(ABC):
    """One engine. Every write is a single transaction: it lands whole or not at all."""

    @abstractmethod
    def ensure_table(self, spec: TableSpec) -> list[str]:
        """Create the table (and its ``_current`` view for snapshots, and column comments) if missing.

        Returns the names of columns added to an existing table.
        """

    def replace_partitions(
        self, spec: TableSpec, rows: pa.Table, scope: PartitionScope, run_id: str
    ) -> WriteResult:
        """Delete the rows in ``scope`` and insert ``rows``, in one transaction.

        Every row of ``rows`` must fall inside ``scope`` (a ValueError otherwise, nothing written).
        Columns of ``rows`` not in the table are added as nullable columns (schema evolution).
        """
        return self.replace_partitions_together(spec, [PartitionWrite(rows, scope)], run_id)[0]

    @abstractmethod
    def replace_partitions_together(
        self, spec: TableSpec, writes: Iterable[PartitionWrite], run_id: str
    ) -> list[WriteResult]:
        """Every write of ``writes`` (one table, one run) in ONE transaction: all land or none does.

        Each write is what :meth:`replace_partitions` does, in order, so a later write sees the
        earlier ones (a key may not exist outside its own scope). ``writes`` is consumed lazily, one
        write's rows at a time, so a long backfill needs the memory of one chunk, not of the table.
        Engines that retry a whole landing (DuckDB beyond its memory budget) iterate ``writes``
        again: pass a list, or an object whose ``__iter__`` starts over; a one-shot iterator is
        not retried. Returns one result per write, in order.
        """

    @abstractmethod
    def upsert_snapshot(
        self, spec: TableSpec, rows: pa.Table, run_id: str, scope: SnapshotScope | None
    ) -> WriteResult:
        """Upsert ``rows`` by key with ``is_current = true``; retire rows in ``scope`` that are absent.

        ``scope=None`` retires nothing (pure upsert, e.g. audit reports).
        """

    @abstractmethod
    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        """Run a read-only query (checks, tests, the CLI summary). Use :meth:`table_ref` for names."""

    @abstractmethod
    def table_ref(self, table: str) -> str:
        """The quoted, schema-qualified name of ``table`` for use in :meth:`query`."""

    @contextmanager
    def session(self) -> Iterator[Warehouse]:
        """Several writes in a row share one connection; each write is still its own transaction.

        For steps that write many chunks (landing a backfill): engines whose connection setup or
        catalog lookups cost per write amortise them here. Sessions nest. The default does nothing.
        """
        yield self

    def check_connection(self) -> None:
        """Raise :class:`WarehouseConfigError` (naming ``VISIBILITY_WAREHOUSE``) if the warehouse
        cannot be reached or written; called before a sync spends the API's rate budget. The default
        runs ``SELECT 1``; engines override it when a query proves less (or more) than a write needs."""
        try:
            self.query("SELECT 1")
        except Exception as exc:
            raise self.config_error(f"cannot be reached ({type(exc).__name__}: {first_line(exc)})") from None

    def config_error(self, problem: str) -> WarehouseConfigError:
        """A :class:`WarehouseConfigError` about this warehouse: the setting, this handle's repr
        (passwords masked by every engine's repr) and ``problem``."""
        return WarehouseConfigError(f"{WAREHOUSE_SETTING}: {self!r} {problem}")

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (engines append hints and links on later lines)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
