"""The one writer interface every warehouse engine implements, and the write procedure, once.

Table contracts are plain data (:class:`TableSpec`); rows arrive as Arrow tables. Engines own all
SQL: assets never build SQL themselves.

:class:`Warehouse` runs every write the same way (docs/ARCHITECTURE.md, *Warehouse*): check without
I/O, then inside the engine's write transaction (:meth:`Warehouse._write_transaction`) plan the table
(:meth:`Warehouse._prepare_table`: create or evolve it), encode the rows, deduplicate them by key,
stage them (:meth:`Warehouse._stage`), and apply them: a replace of partition scopes
(:meth:`Warehouse._apply_replace`) or a merge with retirement (:meth:`Warehouse._apply_merge`).
Engines implement only these hooks; the steps and their order live here and in
:mod:`resources.warehouse.common`.

:meth:`Warehouse.query` takes one parameter style on every engine: ``:name``, translated to the
engine's own (:func:`bind_parameters`).
"""

from __future__ import annotations

import datetime as dt
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple

import pyarrow as pa

from resources.failures import FailureKind

if TYPE_CHECKING:
    from resources.warehouse.common import LoadPlan, WriteStamp

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
    #: the value rows landed before the column existed take when a writer adds it (a key column
    #: added to an existing table needs one)
    default: str | None = None


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

    failure_kind = FailureKind.CONFIGURATION


@dataclass
class StagedWrite:
    """One write made ready to apply: planned, encoded, deduplicated and staged by the engine."""

    plan: LoadPlan
    #: the engine's handle on the staged rows (DuckDB: the Arrow table; Postgres: a temp table;
    #: BigQuery: a staging table)
    stage: Any
    stamp: WriteStamp
    rows: int
    duplicates_dropped: int
    #: partition writes: the scope the rows replace (NUL-free, as the rows land)
    scope: PartitionScope | None = None

    def result(self, table: str, rows_deleted: int) -> WriteResult:
        return WriteResult(
            table=table,
            rows_written=self.rows,
            rows_deleted=rows_deleted,
            columns_added=self.plan.columns_added,
            duplicates_dropped=self.duplicates_dropped,
        )


#: The methods that hold the write procedure; engines implement the hooks they call, never these
#: (tests/warehouse/test_template.py).
TEMPLATE_METHODS = (
    "replace_partitions",
    "replace_partitions_together",
    "upsert_snapshot",
    "query",
    "_land_partitions",
    "_stage_write",
)


class Warehouse(ABC):
    """One engine. Every write is a single transaction: it lands whole or not at all.

    The write procedure is defined here once (:data:`TEMPLATE_METHODS`); an engine implements its
    hooks: :meth:`_write_transaction`, :meth:`_prepare_table`, :meth:`_stage`, :meth:`_apply_replace`,
    :meth:`_apply_merge`, :meth:`_run_query`, :meth:`_placeholder`, and optionally
    :meth:`_run_landing` (a retry of a whole landing) and :meth:`_may_repeat_a_key`.
    """

    #: Whether :meth:`_apply_replace` takes a whole landing's writes at once (BigQuery's one script):
    #: then every write is staged first; otherwise each write is applied as soon as it is staged, so a
    #: landing holds one chunk's stage at a time.
    applies_landing_at_once: ClassVar[bool] = False
    #: Whether the driver reads ``%`` as a placeholder marker once parameters are given (psycopg):
    #: :meth:`query` then doubles every other ``%``.
    percent_is_placeholder: ClassVar[bool] = False

    @abstractmethod
    def ensure_table(self, spec: TableSpec) -> list[str]:
        """Create the table (and its ``_current`` view for snapshots, and column comments) if missing.

        Returns the names of columns added to an existing table.
        """

    # --- the write procedure (template methods) ------------------------------------------------------

    def replace_partitions(
        self, spec: TableSpec, rows: pa.Table, scope: PartitionScope, run_id: str
    ) -> WriteResult:
        """Delete the rows in ``scope`` and insert ``rows``, in one transaction.

        Every row of ``rows`` must fall inside ``scope`` (a ValueError otherwise, nothing written).
        Columns of ``rows`` not in the table are added as nullable columns (schema evolution).
        """
        return self.replace_partitions_together(spec, [PartitionWrite(rows, scope)], run_id)[0]

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
        return self._run_landing(spec, writes, lambda: self._land_partitions(spec, writes, run_id))

    def _land_partitions(
        self, spec: TableSpec, writes: Iterable[PartitionWrite], run_id: str
    ) -> list[WriteResult]:
        """One attempt at a landing: every write staged and applied in one write transaction."""
        from resources.warehouse.common import partition_writes  # common builds on this module

        checked = partition_writes(spec, writes, run_id)  # the spec and first write: before any I/O
        results: list[WriteResult] = []
        pending: list[StagedWrite] = []
        with self._write_transaction(spec) as tx:
            for write in checked:
                pending.append(self._stage_write(tx, spec, write.rows, run_id, write.scope))
                del write  # one chunk's rows in memory at a time
                if not self.applies_landing_at_once:
                    results += self._applied(tx, spec, pending)
                    pending = []
            if pending:
                results += self._applied(tx, spec, pending)
        return results

    def _applied(self, tx: Any, spec: TableSpec, staged: list[StagedWrite]) -> list[WriteResult]:
        deleted = self._apply_replace(tx, spec, staged)
        return [s.result(spec.name, n) for s, n in zip(staged, deleted, strict=True)]

    def upsert_snapshot(
        self, spec: TableSpec, rows: pa.Table, run_id: str, scope: SnapshotScope | None
    ) -> WriteResult:
        """Upsert ``rows`` by key with ``is_current = true``; retire rows in ``scope`` that are absent.

        ``scope=None`` retires nothing (pure upsert, e.g. audit reports); nor does a column scope
        without values.
        """
        from resources.warehouse.common import check_snapshot_write, clean_snapshot_scope, retires

        check_snapshot_write(spec, rows, scope, run_id)  # before any I/O
        retire = clean_snapshot_scope(scope) if retires(scope) else None
        with self._write_transaction(spec) as tx:
            staged = self._stage_write(tx, spec, rows, run_id)
            retired = self._apply_merge(tx, spec, staged, retire)
        return staged.result(spec.name, retired)

    def _stage_write(
        self, tx: Any, spec: TableSpec, rows: pa.Table, run_id: str, scope: PartitionScope | None = None
    ) -> StagedWrite:
        """Plan, encode, deduplicate and stage one write's rows inside the write transaction."""
        from resources.warehouse.common import WriteStamp, dedupe_by_key, encode_rows

        # stamped inside the transaction (DuckDB: under the file lock): later than any row landed before
        stamp = WriteStamp.now(run_id)
        plan = self._prepare_table(tx, spec, rows.schema)
        data = encode_rows(rows, plan)
        del rows
        dropped = 0
        if self._may_repeat_a_key(tx, spec, data):
            data, dropped = dedupe_by_key(data, spec.key)
        stage = self._stage(tx, spec, plan, data)
        return StagedWrite(plan, stage, stamp, data.num_rows, dropped, scope)

    # --- engine hooks --------------------------------------------------------------------------------

    def _run_landing(
        self, spec: TableSpec, writes: Iterable[PartitionWrite], land: Callable[[], list[WriteResult]]
    ) -> list[WriteResult]:
        """Run one landing (``land``); an engine that retries whole landings does it here (DuckDB's
        memory budget). ``writes`` tells whether they can be iterated again."""
        return land()

    @abstractmethod
    def _write_transaction(self, spec: TableSpec) -> AbstractContextManager[Any]:
        """The transaction of one write or landing of ``spec``'s table: everything applied in it
        commits together or not at all. Yields the handle the other hooks get as ``tx``."""

    @abstractmethod
    def _prepare_table(self, tx: Any, spec: TableSpec, rows_schema: pa.Schema) -> LoadPlan:
        """Plan the write of rows shaped ``rows_schema`` (``common.plan_load``) and create or evolve
        the table to match; raises ``SchemaMismatchError`` before anything is written."""

    def _may_repeat_a_key(self, tx: Any, spec: TableSpec, data: pa.Table) -> bool:
        """Whether two rows of ``data`` may share a key (then they are deduplicated, last one wins).
        An engine that counts faster than Arrow's single-threaded hash answers here."""
        return True

    @abstractmethod
    def _stage(self, tx: Any, spec: TableSpec, plan: LoadPlan, data: pa.Table) -> Any:
        """Put the encoded rows where :meth:`_apply_replace` or :meth:`_apply_merge` reads them."""

    @abstractmethod
    def _apply_replace(self, tx: Any, spec: TableSpec, staged: Sequence[StagedWrite]) -> list[int]:
        """Delete each write's scope and insert its staged rows, in order; the rows deleted per write.

        ``staged`` is one write, or the whole landing when :attr:`applies_landing_at_once`. A key
        that exists outside the write's scope raises ``ValueError`` (the transaction rolls back).
        """

    @abstractmethod
    def _apply_merge(
        self, tx: Any, spec: TableSpec, staged: StagedWrite, retire: SnapshotScope | None
    ) -> int:
        """Upsert the staged rows by key (current again, ``first_seen_at`` kept); mark current rows in
        ``retire`` that this write did not send as retired; the rows retired."""

    # --- queries -------------------------------------------------------------------------------------

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> pa.Table:
        """Run a read-only query (checks, sensors, the report, the CLI summary).

        Values go in as ``:name`` parameters on every engine (``WHERE date >= :since``), each a
        Python value: ``str``, ``int``, ``float``, ``bool``, ``datetime.date``, ``datetime.datetime``,
        ``None`` or a list of one of these. A NULL needs its type from the SQL around it on Postgres
        (``CAST(:x AS VARCHAR) IS NULL``, not ``:x IS NULL``). Names must not be SQL keywords on any
        engine (BigQuery: ``:limit``, ``:end``, ``:all`` are not names). ``::`` casts, and colons
        inside quotes and comments, are left alone. Identifiers never are parameters: use
        :meth:`table_ref`.
        """
        values = dict(params or {})
        native = bind_parameters(sql, values, self._placeholder, escape_percent=self.percent_is_placeholder)
        return self._run_query(native, values)

    @abstractmethod
    def _placeholder(self, name: str) -> str:
        """The engine's placeholder for parameter ``name`` (DuckDB ``$name``, BigQuery ``@name``)."""

    @abstractmethod
    def _run_query(self, sql: str, params: dict[str, Any]) -> pa.Table:
        """Run ``sql``, already in the engine's parameter syntax, read-only."""

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


#: A ``:name`` parameter, or a stretch where colons are not parameters: a quoted string or name, a
#: comment. ``::`` (a cast) and ``a:b`` (a slice) are not parameters either; ``:name::date`` is one.
_SQL_PARAMETER = re.compile(
    r"(?P<skip>'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`(?:[^`\\]|\\.)*`|--[^\n]*|/\*.*?\*/)"
    r"|(?<![:\w]):(?P<name>[A-Za-z_]\w*)"
    r"|(?P<percent>%)",
    re.DOTALL,
)


def bind_parameters(
    sql: str, params: Mapping[str, Any], placeholder: Callable[[str], str], *, escape_percent: bool = False
) -> str:
    """``sql`` with each ``:name`` written as ``placeholder(name)``; a name without a value in
    ``params`` raises ``ValueError`` naming it. ``escape_percent`` doubles every other ``%`` (for
    drivers that read ``%`` as a placeholder once parameters are given), but only when there are any.
    """
    escape = escape_percent and bool(params)

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name is None:
            text = match[0]
            return text.replace("%", "%%") if escape else text
        if name not in params:
            raise ValueError(f"query parameter :{name} has no value (given: {sorted(params) or 'none'})")
        return placeholder(name)

    if ":" not in sql and not escape:
        return sql
    return _SQL_PARAMETER.sub(replace, sql)
