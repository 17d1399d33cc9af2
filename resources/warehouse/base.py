"""The one writer interface every warehouse engine implements, and the write procedure, once: its
steps and their order live here (docs/ARCHITECTURE.md, *Warehouse*), engines implement only the
hooks, so every engine writes the same way."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from resources.warehouse.contract import (
    LOGGER_NAME,
    WAREHOUSE_SETTING,
    PartitionScope,
    PartitionWrite,
    SnapshotScope,
    TableSpec,
    WarehouseConfigError,
    WriteResult,
    first_line,
)
from resources.warehouse.encoding import clean_snapshot_scope, dedupe_by_key, encode_rows
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
from resources.warehouse.schema_evolution import LoadPlan
from resources.warehouse.views import ViewSpec, views_reading
from resources.warehouse.write_checks import (
    check_snapshot_write,
    partition_writes,
    retires,
    validate_spec,
)

log = logging.getLogger(LOGGER_NAME)


@dataclass(frozen=True)
class WriteStamp:
    """The values of the writer-owned columns for one write: one timestamp for every row."""

    run_id: str
    loaded_at: dt.datetime

    @classmethod
    def now(cls, run_id: str) -> WriteStamp:
        """A stamp strictly later than every earlier one of this process (it tells this write's rows
        from older ones)."""
        global _last_stamp
        with _stamp_lock:
            now = dt.datetime.now(dt.UTC)
            if _last_stamp is not None and now <= _last_stamp:
                now = _last_stamp + dt.timedelta(microseconds=1)
            _last_stamp = now
        return cls(run_id, now)


_stamp_lock = threading.Lock()
_last_stamp: dt.datetime | None = None


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


def outside_scope_error(spec: TableSpec, rows: int | None = None, detail: str | None = None) -> ValueError:
    """A partition write whose keys already exist outside its scope (the landing rolls back)."""
    return ValueError(
        f"{f'{rows} ' if rows else ''}row(s) for {spec.name} have keys {list(spec.key)} that already "
        "exist outside the partition scope (another brand, date or engine); a partition write never "
        "touches rows outside its scope, so nothing was written" + (f". {detail}" if detail else "")
    )


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
    """``sql`` with each ``:name`` written as ``placeholder(name)``; a name without a value raises.
    ``escape_percent``: for drivers that read ``%`` as a placeholder once parameters are given.
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


class Warehouse(ABC):
    """One engine. Every write is a single transaction: it lands whole or not at all."""

    #: :meth:`_apply_replace` takes a whole landing at once (BigQuery's one script); otherwise each
    #: write is applied as soon as it is staged (one chunk's stage at a time)
    applies_landing_at_once: ClassVar[bool] = False
    #: the driver reads ``%`` as a placeholder marker once parameters are given (psycopg)
    percent_is_placeholder: ClassVar[bool] = False
    #: the backfill handoffs table's column types and insert (:mod:`resources.warehouse.handoffs`)
    handoff_dialect: ClassVar[HandoffDialect] = HandoffDialect("VARCHAR", "TIMESTAMPTZ")
    #: how often a run waiting for another run's claim reads the handoff again
    handoff_poll_seconds: ClassVar[float] = 1.0
    #: the engine's errors that make a view a warning rather than a failed landing
    view_errors: ClassVar[tuple[type[Exception], ...]] = ()

    def ensure_table(self, spec: TableSpec) -> list[str]:
        """Create or evolve the table (its ``_current`` view for snapshots, its comments), then the
        analyst views reading it whose sources all exist. Returns the columns added to an existing
        table. A view that fails is logged and skipped: the table is there."""
        validate_spec(spec)
        added = self._ensure_table(spec)
        for view in views_reading(spec.name):
            try:
                self._ensure_view(view)
            except self.view_errors as exc:
                log.warning(
                    "view %s could not be created in %r (%s: %s); its tables are unaffected",
                    view.name,
                    self,
                    type(exc).__name__,
                    first_line(exc),
                )
        return added

    # --- the write procedure (template methods) ------------------------------------------------------

    def replace_partitions(
        self, spec: TableSpec, rows: pa.Table, scope: PartitionScope, run_id: str
    ) -> WriteResult:
        """Delete the rows in ``scope`` and insert ``rows`` (all inside it), in one transaction."""
        return self.replace_partitions_together(spec, [PartitionWrite(rows, scope)], run_id)[0]

    def replace_partitions_together(
        self, spec: TableSpec, writes: Iterable[PartitionWrite], run_id: str
    ) -> list[WriteResult]:
        """Every write of ``writes`` (one table, one run) in ONE transaction: all land or none does.

        ``writes`` is consumed lazily, one chunk at a time, and iterated again if DuckDB retries the landing
        beyond its memory budget: pass a list, or an object whose ``__iter__`` starts over.
        """
        return self._run_landing(spec, writes, lambda: self._land_partitions(spec, writes, run_id))

    def _land_partitions(
        self, spec: TableSpec, writes: Iterable[PartitionWrite], run_id: str
    ) -> list[WriteResult]:
        """One attempt at a landing: every write staged and applied in one write transaction."""
        checked = partition_writes(spec, writes, run_id)  # the spec and run id: before any I/O
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
        """Upsert ``rows`` by key with ``is_current = true``; retire rows in ``scope`` that are absent
        (``None``, or a column scope without values, retires nothing)."""
        check_snapshot_write(spec, rows, run_id)  # before any I/O
        retire = clean_snapshot_scope(scope) if retires(scope) else None
        with self._write_transaction(spec) as tx:
            staged = self._stage_write(tx, spec, rows, run_id)
            retired = self._apply_merge(tx, spec, staged, retire)
        return staged.result(spec.name, retired)

    def _stage_write(
        self, tx: Any, spec: TableSpec, rows: pa.Table, run_id: str, scope: PartitionScope | None = None
    ) -> StagedWrite:
        """Stamp (under the engine's lock: later than any row landed before), plan, encode,
        deduplicate and stage one write's rows inside the write transaction."""
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

    def _ensure_table(self, spec: TableSpec) -> list[str]:
        """Create or evolve ``spec``'s table to its own schema, as a write would; the columns added."""
        with self._write_transaction(spec) as tx:
            return self._prepare_table(tx, spec, spec.arrow_schema).columns_added

    @abstractmethod
    def _ensure_view(self, view: ViewSpec) -> None:
        """Create, re-create or comment ``view`` as its spec says, if all its sources exist."""

    def _run_landing(
        self, spec: TableSpec, writes: Iterable[PartitionWrite], land: Callable[[], list[WriteResult]]
    ) -> list[WriteResult]:
        """Run one landing (``land``); an engine that retries whole landings does it here."""
        return land()

    @abstractmethod
    def _write_transaction(self, spec: TableSpec) -> AbstractContextManager[Any]:
        """The transaction of one write or landing of ``spec``'s table: everything applied in it
        commits together or not at all. Yields the handle the other hooks get as ``tx``."""

    @abstractmethod
    def _prepare_table(self, tx: Any, spec: TableSpec, rows_schema: pa.Schema) -> LoadPlan:
        """Plan the write of rows shaped ``rows_schema`` (``plan_load``) and create or evolve the
        table to match; raises ``SchemaMismatchError`` before anything is written."""

    def _may_repeat_a_key(self, tx: Any, spec: TableSpec, data: pa.Table) -> bool:
        """Whether two rows of ``data`` may share a key (then they are deduplicated, last one wins)."""
        return True

    @abstractmethod
    def _stage(self, tx: Any, spec: TableSpec, plan: LoadPlan, data: pa.Table) -> Any:
        """Put the encoded rows where :meth:`_apply_replace` or :meth:`_apply_merge` reads them."""

    @abstractmethod
    def _apply_replace(self, tx: Any, spec: TableSpec, staged: Sequence[StagedWrite]) -> list[int]:
        """Delete each write's scope and insert its staged rows, in order; the rows deleted per write.
        A key that exists outside the write's scope raises :func:`outside_scope_error`.
        """

    @abstractmethod
    def _apply_merge(
        self, tx: Any, spec: TableSpec, staged: StagedWrite, retire: SnapshotScope | None
    ) -> int:
        """Upsert the staged rows by key (current again, ``first_seen_at`` kept); mark current rows in
        ``retire`` that this write did not send as retired; the rows retired."""

    # --- queries -------------------------------------------------------------------------------------

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> pa.Table:
        """Run a read-only query with ``:name`` parameters (identifiers go through :meth:`table_ref`).

        On Postgres a NULL parameter needs its type from the SQL (``CAST(:x AS VARCHAR) IS NULL``),
        and no name may be an SQL keyword on any engine (BigQuery refuses ``:limit``, ``:end``).
        """
        return self._run_query(*self._bind(sql, params or {}))

    def _bind(self, sql: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        values = dict(params)
        native = bind_parameters(sql, values, self._placeholder, escape_percent=self.percent_is_placeholder)
        return native, values

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
        return self._run_statement(*self._bind(sql, params))

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
        """Several writes in a row share one connection (where opening one costs); each write is still
        its own transaction."""
        yield self

    def check_connection(self) -> None:
        """Raise :class:`WarehouseConfigError` (naming ``VISIBILITY_WAREHOUSE``) if the warehouse
        cannot be reached or written; called before a sync spends the API's rate budget."""
        try:
            self.query("SELECT 1")
        except Exception as exc:
            raise self.config_error(f"cannot be reached ({type(exc).__name__}: {first_line(exc)})") from None

    def config_error(self, problem: str) -> WarehouseConfigError:
        """A :class:`WarehouseConfigError` naming the setting, this handle's repr (passwords masked)
        and ``problem``."""
        return WarehouseConfigError(f"{WAREHOUSE_SETTING}: {self!r} {problem}")

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
