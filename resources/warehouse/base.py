"""The one writer interface every warehouse engine implements, and the write procedure, once.

Engines own all SQL: assets never build SQL themselves. What callers hand a warehouse and get back
is :mod:`resources.warehouse.contract`.

:class:`Warehouse` runs every write the same way (docs/ARCHITECTURE.md, *Warehouse*): check without
I/O (:mod:`~resources.warehouse.write_checks`), then inside the engine's write transaction
(:meth:`Warehouse._write_transaction`) plan the table (:meth:`Warehouse._prepare_table`: create or
evolve it, :mod:`~resources.warehouse.schema_evolution`), encode the rows
(:mod:`~resources.warehouse.encoding`), deduplicate them by key (:mod:`~resources.warehouse.dedupe`),
stage them (:meth:`Warehouse._stage`), and apply them: a replace of partition scopes
(:meth:`Warehouse._apply_replace`) or a merge with retirement (:meth:`Warehouse._apply_merge`).
Engines implement only these hooks; the steps and their order live here.

:meth:`Warehouse.query` takes one parameter style on every engine: ``:name``, translated to the
engine's own (:func:`~resources.warehouse.parameters.bind_parameters`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from resources.warehouse.contract import (
    WAREHOUSE_SETTING,
    PartitionScope,
    PartitionWrite,
    SnapshotScope,
    TableSpec,
    WarehouseConfigError,
    WriteResult,
    first_line,
)
from resources.warehouse.dedupe import dedupe_by_key
from resources.warehouse.encoding import encode_rows
from resources.warehouse.handoffs import (
    CLAIMED,
    OPEN,
    Handoff,
    HandoffDialect,
    claim_statement,
    create_statement,
    handoff_of,
    insert_open_statement,
    landed_statement,
    read_statement,
    release_statement,
)
from resources.warehouse.handoffs import TABLE as HANDOFFS_TABLE
from resources.warehouse.nul import clean_snapshot_scope
from resources.warehouse.parameters import bind_parameters
from resources.warehouse.schema_evolution import LoadPlan
from resources.warehouse.scopes import retires
from resources.warehouse.stamp import WriteStamp
from resources.warehouse.write_checks import check_snapshot_write, partition_writes


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
    "read_handoff",
    "claim_handoff",
    "land_handoff",
    "release_handoff",
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
    #: the backfill handoffs table's column types and insert (:mod:`resources.warehouse.handoffs`)
    handoff_dialect: ClassVar[HandoffDialect] = HandoffDialect("VARCHAR", "TIMESTAMPTZ")
    #: how often a run waiting for another run's claim reads the handoff again
    handoff_poll_seconds: ClassVar[float] = 1.0

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
        """Plan the write of rows shaped ``rows_schema``
        (:func:`~resources.warehouse.schema_evolution.plan_load`) and create or evolve the table to
        match; raises ``SchemaMismatchError`` before anything is written."""

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

    # --- backfill handoffs (resources/warehouse/handoffs.py) --------------------------------------

    def read_handoff(self, backfill_id: str, table: str) -> Handoff | None:
        """The handoff of ``table`` in backfill ``backfill_id``; None when no run has reached it."""
        self._ensure_handoffs()
        sql = read_statement(self.table_ref(HANDOFFS_TABLE))
        rows = self.query(sql, {"backfill": backfill_id, "name": table}).to_pylist()
        return handoff_of(rows[0]) if rows else None

    def claim_handoff(self, backfill_id: str, table: str, run_id: str, was: Handoff | None) -> bool:
        """Make ``run_id`` the claimant of the table if its handoff is still ``was`` (None: no row, or
        open); False when another run changed it first."""
        self._ensure_handoffs()
        ref, keys = self.table_ref(HANDOFFS_TABLE), {"backfill": backfill_id, "name": table}
        if was is None:
            self._handoff_statement(insert_open_statement(ref, self.handoff_dialect), keys)
            was = Handoff("", OPEN)
        params = {**keys, "run": run_id, "was": was.claimant, "state": was.state}
        return self._handoff_statement(claim_statement(ref, self.handoff_dialect), params) > 0

    def land_handoff(
        self, backfill_id: str, table: str, run_id: str, cells: list[list[str]], metadata: dict[str, Any]
    ) -> bool:
        """Mark the table landed by its claimant ``run_id``, with the cells landed and their summary."""
        params = {
            "backfill": backfill_id,
            "name": table,
            "was": run_id,
            "state": CLAIMED,
            "cells": json.dumps(cells),
            "metadata": json.dumps(metadata, default=str),
        }
        sql = landed_statement(self.table_ref(HANDOFFS_TABLE), self.handoff_dialect)
        return self._handoff_statement(sql, params) > 0

    def release_handoff(self, backfill_id: str, table: str, run_id: str) -> bool:
        """Open the table's handoff again if ``run_id`` still claims it (its fetch or landing failed)."""
        params = {"backfill": backfill_id, "name": table, "was": run_id, "state": CLAIMED}
        return self._handoff_statement(release_statement(self.table_ref(HANDOFFS_TABLE)), params) > 0

    def _handoff_statement(self, sql: str, params: Mapping[str, Any]) -> int:
        self._ensure_handoffs()
        values = dict(params)
        native = bind_parameters(sql, values, self._placeholder, escape_percent=self.percent_is_placeholder)
        return self._run_statement(native, values)

    def _ensure_handoffs(self) -> None:
        if not getattr(self, "_handoffs_ready", False):
            self._create_handoffs(create_statement(self.table_ref(HANDOFFS_TABLE), self.handoff_dialect))
            self._handoffs_ready = True

    @abstractmethod
    def _create_handoffs(self, ddl: str) -> None:
        """Create the schema (dataset) if missing, then run ``ddl`` (``CREATE TABLE IF NOT EXISTS``)."""

    @abstractmethod
    def _run_statement(self, sql: str, params: dict[str, Any]) -> int:
        """Run one data-changing statement, in the engine's parameter syntax, in its own write
        transaction; the rows it changed."""

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
