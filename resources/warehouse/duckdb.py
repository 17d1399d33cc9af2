"""DuckDB, the default warehouse: one file, Arrow in, one writer process at a time.

DuckDB lets one process open a file for writing. The connection is therefore opened per write and
closed right after it, so the file lock is held only while writing; a second writer waits for the lock
(retrying with backoff up to ``lock_timeout_seconds``) instead of failing, then raises
:class:`~resources.warehouse.base.WarehouseLockTimeout`. BI tools open the file read-only
(:meth:`DuckDBWarehouse.open_read_only`), which also waits while a write is in progress.

:meth:`DuckDBWarehouse.session` keeps one connection open across several writes (opening, closing
and the checkpoint on close cost more than a typical chunk's write) and caches the catalog lookups
meanwhile. The file lock is then held for the whole session: meant for the landing step, which runs
in the single-slot writer pool, not for long-lived handles.

Partitioned tables carry no primary-key index; snapshot tables do (their upserts need it). The key
index (an ART) lives in memory as the table grows: a 30-day backfill's landing process held 1.66x
what a 10-day one did. Without it, a partition replace is a delete plus an insert, and keys stay
unique because every write is deduplicated and refuses a key that exists outside its scope (the
``keys_unique`` asset checks verify it too). Partitioned tables created with the index by earlier
versions keep it and the upsert path; to drop it, recreate the table
(``CREATE OR REPLACE TABLE t AS SELECT * FROM t`` keeps the rows and drops the constraint).

``memory_limit`` gives a handle's connections a DuckDB memory budget (the landing worker's:
:class:`~resources.warehouse.resource.WarehouseResource`). DuckDB otherwise keeps what it reads
cached up to 80% of RAM until the connection closes, and the checkpoint that ends each write merges
the table's partial row groups: both grew with the table, so a landing process took more memory
the longer the backfill. Within a budget DuckDB evicts and spills instead. A write that does not fit
the budget is retried once without it. The checkpoint when a connection closes runs within the
budget too; one that does not fit leaves the committed writes in the WAL file (every reader sees
them) for the next checkpoint to fold in. (An explicit ``CHECKPOINT`` would fail the same way with
a fatal error that ends the database instance: closing is the safe place.)
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import pyarrow as pa

from resources.warehouse.base import (
    FIRST_SEEN_AT,
    IS_CURRENT,
    LAST_SEEN_AT,
    LOADED_AT,
    RUN_ID,
    PartitionScope,
    SnapshotScope,
    TableSpec,
    Warehouse,
    WarehouseLockTimeout,
    WriteResult,
)
from resources.warehouse.common import (
    ExistingColumn,
    LoadPlan,
    WriteStamp,
    check_partition_write,
    check_snapshot_write,
    current_view_description,
    current_view_name,
    dedupe_by_key,
    encode_rows,
    plan_load,
    quote_identifier,
    quote_literal,
    system_columns,
    validate_spec,
)
from resources.warehouse.types import duckdb_type, from_duckdb_type, sql_type_or_default

q = quote_identifier

DEFAULT_LOCK_TIMEOUT_SECONDS = 600.0
#: the smallest ``memory_limit`` accepted: below it DuckDB fails ordinary chunk writes
MIN_MEMORY_LIMIT_BYTES = 32 * 1000**2
_MEMORY_UNITS = {"kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}
_MEMORY_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}
_MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b)\s*$", re.IGNORECASE)

#: rows per ON CONFLICT statement (DuckDB's row-group size)
UPSERT_BATCH_ROWS = 122_880

log = logging.getLogger(__name__)

# One DuckDB database instance per file per process: writes from threads of one process take turns.
# Reentrant: a thread holding a session may still write through another handle on the same file.
_PROCESS_LOCKS: dict[str, threading.RLock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


def _process_lock(path: Path) -> threading.RLock:
    with _PROCESS_LOCKS_GUARD:
        return _PROCESS_LOCKS.setdefault(str(path), threading.RLock())


def _exec(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Execute and drain: DuckDB 2 refuses new work on a connection with an unfinished result."""
    return con.execute(sql, params).fetchall()


def parse_memory_limit(value: str) -> int:
    """Bytes of a DuckDB memory size (``64MB``, ``1GiB``); ``ValueError`` if unreadable or too small."""
    match = _MEMORY_RE.match(value)
    if match is None:
        raise ValueError(
            f"{value!r} is not a memory size such as 64MB or 1GiB (units: KB, MB, GB, TB, KiB ... TiB)"
        )
    size = int(float(match[1]) * _MEMORY_UNITS[match[2].lower()])
    if size < MIN_MEMORY_LIMIT_BYTES:
        raise ValueError(f"{value!r} is below the smallest DuckDB budget a write needs (32MB)")
    return size


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def connect_with_lock_wait(path: Path, *, read_only: bool, timeout: float) -> duckdb.DuckDBPyConnection:
    """Open ``path``, retrying while another process holds the file lock, up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if not _is_lock_error(exc):
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WarehouseLockTimeout(
                    f"DuckDB file {path} stayed locked by another process for {timeout:g}s "
                    f"(lock_timeout_seconds); DuckDB said: {exc}"
                ) from exc
            time.sleep(min(remaining, delay * (0.5 + random.random())))
            delay = min(delay * 2, 0.25)


class _KeyConflict(Exception):
    """A plain INSERT hit the primary key: retry after removing duplicate keys from the rows."""


class _Existing(NamedTuple):
    """A table as the catalog shows it."""

    #: None: no such table
    columns: list[ExistingColumn] | None
    comment: str | None
    #: it carries a primary-key index (snapshot tables, and partitioned tables of earlier versions)
    keyed: bool


@dataclass
class _Session:
    """One thread's open session: its connection, and catalog facts read under its file lock.

    Nobody else can change the catalog while the lock is held, so the facts stay true until this
    writer changes them: DDL drops the table's entries, a rollback drops everything.
    """

    con: duckdb.DuckDBPyConnection
    depth: int = 1
    schema_ready: bool = False
    tables: dict[str, _Existing] = field(default_factory=dict)
    views: set[str] = field(default_factory=set)

    def forget(self, table: str | None = None) -> None:
        if table is None:
            self.schema_ready = False
            self.tables.clear()
            self.views.clear()
        else:
            self.tables.pop(table, None)


def _key_holds_the_scope(spec: TableSpec) -> bool:
    """Every key names its brand, date and engine: a row in a scope shares no key with one outside."""
    return {spec.brand_column, spec.engine_column, spec.date_column} <= set(spec.key)


@dataclass(frozen=True)
class _ScopedWrite:
    """One partition replace under way: its connection, table, scope filter and stamp."""

    con: duckdb.DuckDBPyConnection
    ref: str
    spec: TableSpec
    scope: PartitionScope
    plan: LoadPlan
    stamp: WriteStamp

    @property
    def in_scope(self) -> str:
        spec = self.spec
        assert spec.date_column is not None
        return (
            f"list_contains($brands, {q(spec.brand_column)}) AND {q(spec.date_column)} >= $start "
            f"AND {q(spec.date_column)} < $end AND list_contains($engines, {q(spec.engine_column)})"
        )

    @property
    def params(self) -> dict[str, Any]:
        scope = self.scope
        return {
            "brands": list(scope.brand_ids),
            "start": scope.start,
            "end": scope.end,
            "engines": list(scope.engines),
        }

    @property
    def outside_message(self) -> str:
        return (
            f"row(s) for {self.spec.name} have keys {list(self.spec.key)} that already exist outside the "
            "partition scope (another brand, date or engine); a partition write never touches rows "
            "outside its scope, so nothing was written"
        )


class DuckDBWarehouse(Warehouse):
    """A DuckDB file; every write is one transaction on a connection opened for that write."""

    def __init__(
        self,
        path: str | Path,
        schema: str = "visibility",
        *,
        read_only: bool = False,
        lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
        memory_limit: str | None = None,
    ) -> None:
        path = Path(path)
        if str(path) in ("", ":memory:"):
            raise ValueError("DuckDBWarehouse needs a file path (an in-memory database dies with each write)")
        if lock_timeout_seconds < 0:
            raise ValueError("lock_timeout_seconds must be >= 0")
        q(schema)  # validates the name
        self.path = path.expanduser().resolve()
        self.schema = schema
        self.read_only = read_only
        self.lock_timeout_seconds = lock_timeout_seconds
        if memory_limit is not None:
            parse_memory_limit(memory_limit)
        #: DuckDB's memory budget for this handle's connections (module doc); None: DuckDB's default
        self.memory_limit = memory_limit
        #: test-only fault hook, called inside the transaction after the delete, before the insert
        self._between_delete_and_insert: Callable[[], None] | None = None
        self._local = threading.local()  # .session: this thread's open _Session, if any

    @classmethod
    def open_read_only(
        cls,
        path: str | Path,
        schema: str = "visibility",
        *,
        lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
    ) -> DuckDBWarehouse:
        """A reader (BI tools, checks): never takes the writer lock, waits while a write runs."""
        return cls(path, schema, read_only=True, lock_timeout_seconds=lock_timeout_seconds)

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "read-write"
        budget = f", memory_limit={self.memory_limit!r}" if self.memory_limit else ""
        return f"DuckDBWarehouse(path={str(self.path)!r}, schema={self.schema!r}, {mode}{budget})"

    # --- connections ------------------------------------------------------------------------------

    def _session(self) -> _Session | None:
        return getattr(self._local, "session", None)

    @contextmanager
    def session(self) -> Iterator[DuckDBWarehouse]:
        """Writes (and queries) of this thread share one connection until the block ends.

        Each write is still its own transaction. Opening waits for the file lock like a write does
        (:class:`WarehouseLockTimeout` after ``lock_timeout_seconds``); the lock is then held until
        the block ends, so other processes wait that long. Sessions nest; other threads of this
        process wait for the session like for a write.
        """
        current = self._session()
        if current is not None:
            current.depth += 1
            try:
                yield self
            finally:
                current.depth -= 1
            return
        with self._connect(read_only=self.read_only) as con:
            self._local.session = _Session(con)
            try:
                yield self
            finally:
                self._local.session = None

    @contextmanager
    def _connect(self, *, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        session = self._session()
        if session is not None:
            if not read_only and self.read_only:
                raise PermissionError(f"{self!r} was opened read-only")
            yield session.con
            return
        if read_only and not self.path.exists():
            raise FileNotFoundError(f"DuckDB file {self.path} does not exist (nothing landed yet)")
        if not read_only:
            if self.read_only:
                raise PermissionError(f"{self!r} was opened read-only")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = _process_lock(self.path)
        if not lock.acquire(timeout=self.lock_timeout_seconds):
            raise WarehouseLockTimeout(
                f"DuckDB file {self.path} stayed busy with another write of this process for "
                f"{self.lock_timeout_seconds:g}s (lock_timeout_seconds)"
            )
        try:
            con = self._open(read_only=read_only)
            try:
                yield con
            finally:
                con.close()
        finally:
            lock.release()

    def _open(self, *, read_only: bool) -> duckdb.DuckDBPyConnection:
        try:
            con = connect_with_lock_wait(self.path, read_only=read_only, timeout=self.lock_timeout_seconds)
        except duckdb.ConnectionException as exc:
            # this process already holds the file read-write elsewhere (DuckDB shares one instance
            # per file and process): reading through that instance takes no new lock
            if not read_only or "different configuration" not in str(exc):
                raise
            con = connect_with_lock_wait(self.path, read_only=False, timeout=self.lock_timeout_seconds)
        _exec(con, "SET enable_progress_bar = false")  # no progress bars in run logs
        if self._budgeted:
            self._apply_budget(con)
        return con

    def _apply_budget(self, con: duckdb.DuckDBPyConnection) -> None:
        assert self.memory_limit is not None
        _exec(con, f"SET memory_limit = {quote_literal(self.memory_limit)}")

    @property
    def _budgeted(self) -> bool:
        """Whether this thread's connections run within ``memory_limit`` now."""
        return self.memory_limit is not None and not getattr(self._local, "unbudgeted", False)

    @contextmanager
    def _without_budget(self) -> Iterator[None]:
        """This thread's connections (an open session's too) use DuckDB's default memory limit."""
        session = self._session()
        self._local.unbudgeted = True
        if session is not None:
            _exec(session.con, "RESET memory_limit")
        try:
            yield
        finally:
            self._local.unbudgeted = False
            if session is not None and self.memory_limit is not None:
                # DuckDB refuses a limit below what it holds now: the session then goes on without
                with contextlib.suppress(duckdb.OutOfMemoryException):
                    self._apply_budget(session.con)

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._connect(read_only=False) as con:
            con.begin()
            try:
                yield con
                con.commit()
            except BaseException:
                session = self._session()
                if session is not None:
                    session.forget()  # the rollback may undo DDL whose effects were cached
                with contextlib.suppress(duckdb.Error):  # keep the original error
                    con.rollback()
                raise

    # --- catalog ----------------------------------------------------------------------------------

    @property
    def catalog(self) -> str:
        """DuckDB names a file's catalog after its stem (``data/visibility.duckdb`` -> ``visibility``).

        Names are qualified with it, or a schema named like the file (the default: ``visibility``
        in ``visibility.duckdb``) would be an ambiguous reference.
        """
        return self.path.name.split(".", 1)[0]

    def table_ref(self, table: str) -> str:
        return f"{q(self.catalog)}.{q(self.schema)}.{q(table)}"

    def _existing(self, con: duckdb.DuckDBPyConnection, table: str) -> _Existing:
        session = self._session()
        if session is not None and table in session.tables:
            return session.tables[table]
        found = _exec(
            con,
            "SELECT t.comment, c.column_name, c.data_type, c.comment, "
            "EXISTS (SELECT 1 FROM duckdb_constraints() k WHERE k.database_name = t.database_name "
            "AND k.schema_name = t.schema_name "
            "AND k.table_name = t.table_name AND k.constraint_type = 'PRIMARY KEY') "
            "FROM duckdb_tables() t JOIN duckdb_columns() c USING (database_name, schema_name, table_name) "
            "WHERE t.database_name = current_database() AND t.schema_name = $schema "
            "AND t.table_name = $table ORDER BY c.column_index",
            {"schema": self.schema, "table": table},
        )
        answer = _Existing(None, None, keyed=False)
        if found:
            columns = [ExistingColumn(n, t, from_duckdb_type(t), c) for _, n, t, c, _ in found]
            answer = _Existing(columns, found[0][0], keyed=bool(found[0][4]))
        if session is not None:
            session.tables[table] = answer
        return answer

    def _ensure(self, con: duckdb.DuckDBPyConnection, spec: TableSpec, rows_schema: pa.Schema) -> LoadPlan:
        """Create or evolve the table inside the caller's transaction; returns the plan.

        In a session, a table that needs no change costs no catalog query after the first write.
        """
        session = self._session()
        if session is None or not session.schema_ready:
            _exec(con, f"CREATE SCHEMA IF NOT EXISTS {q(self.catalog)}.{q(self.schema)}")
            if session is not None:
                session.schema_ready = True
        existing, comment, _ = self._existing(con, spec.name)
        plan = plan_load(
            spec,
            rows_schema,
            existing,
            table_label=f"{self.schema}.{spec.name}",
            type_name=duckdb_type,
            table_comment=None if comment == spec.description else spec.description,
        )
        ref = self.table_ref(spec.name)
        if session is not None and (plan.create or plan.columns or plan.comments):
            session.forget(spec.name)  # read again by the next write, which sees this DDL
        if plan.create:
            defs = [
                f"{q(c.name)} {duckdb_type(c.type)}" + (" NOT NULL" if c.name in spec.key else "")
                for c in plan.columns
            ]
            defs += [f"{q(c.name)} {duckdb_type(sql_type_or_default(c.type))}" for c in system_columns(spec)]
            if spec.kind == "snapshot":  # upserts need the index; partitioned tables do without (module doc)
                defs.append(f"PRIMARY KEY ({', '.join(q(k) for k in spec.key)})")
            _exec(con, f"CREATE TABLE {ref} ({', '.join(defs)})")
        else:
            for c in plan.columns:
                _exec(con, f"ALTER TABLE {ref} ADD COLUMN {q(c.name)} {duckdb_type(c.type)}")
        for column, text in plan.comments:
            target = f"TABLE {ref}" if column is None else f"COLUMN {ref}.{q(column)}"
            _exec(con, f"COMMENT ON {target} IS {quote_literal(text)}")
        if spec.kind == "snapshot":
            view = current_view_name(spec)
            if session is not None and view in session.views and not (plan.create or plan.columns):
                return plan
            has_view = _exec(
                con,
                "SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() "
                "AND schema_name = $schema AND view_name = $view",
                {"schema": self.schema, "view": view},
            )
            if session is not None:
                session.views.add(view)
            if plan.create or plan.columns or not has_view[0][0]:
                _exec(
                    con,
                    # the body names the table schema-relative: DuckDB 2.0 refuses a catalog-qualified
                    # name there when the schema and the file share a name (it is stored relative anyway)
                    f"CREATE OR REPLACE VIEW {self.table_ref(view)} AS "
                    f"SELECT * FROM {q(self.schema)}.{q(spec.name)} WHERE {q(IS_CURRENT)}",
                )
                comment = quote_literal(current_view_description(spec))
                _exec(con, f"COMMENT ON VIEW {self.table_ref(view)} IS {comment}")
        return plan

    # --- Warehouse --------------------------------------------------------------------------------

    def ensure_table(self, spec: TableSpec) -> list[str]:
        validate_spec(spec)
        with self._transaction() as con:
            return self._ensure(con, spec, spec.arrow_schema).columns_added

    @contextmanager
    def _registered(self, con: duckdb.DuckDBPyConnection, data: pa.Table) -> Iterator[str]:
        name = f"__visibility_rows_{uuid.uuid4().hex}"
        con.register(name, data)
        try:
            yield q(name)
        finally:
            with contextlib.suppress(duckdb.Error):  # an aborted transaction refuses it; harmless
                con.unregister(name)

    def replace_partitions(
        self, spec: TableSpec, rows: pa.Table, scope: PartitionScope, run_id: str
    ) -> WriteResult:
        """Replace the scope's rows in one transaction.

        Tables this writer creates carry no key index: the scope is deleted, then the rows
        (deduplicated by key) are inserted; a key that already exists outside the scope fails the
        write (checked only where the key does not contain the brand, date and engine: otherwise a
        row in the scope cannot share its key with one outside). Tables created with a primary key
        (by earlier versions) keep the upsert path of :meth:`_replace_indexed`.
        """
        check_partition_write(spec, rows, scope, run_id)  # the stamp is taken inside the transaction
        try:
            return self._replace_deduplicating(spec, rows, scope, run_id)
        except duckdb.OutOfMemoryException:  # rolled back: nothing was written
            if not self._budgeted:
                raise
            log.warning(
                "DuckDB write of %d rows into %s exceeded memory_limit=%s; retried without it",
                rows.num_rows,
                spec.name,
                self.memory_limit,
            )
        with self._without_budget():
            return self._replace_deduplicating(spec, rows, scope, run_id)

    def _replace_deduplicating(
        self, spec: TableSpec, rows: pa.Table, scope: PartitionScope, run_id: str
    ) -> WriteResult:
        try:
            return self._replace(spec, rows, scope, run_id, deduplicated=False)
        except _KeyConflict:
            deduped, dropped = dedupe_by_key(rows, spec.key)
        return self._replace(spec, deduped, scope, run_id, deduplicated=True, dropped=dropped)

    def _replace(
        self,
        spec: TableSpec,
        rows: pa.Table,
        scope: PartitionScope,
        run_id: str,
        *,
        deduplicated: bool,
        dropped: int = 0,
    ) -> WriteResult:
        with self._transaction() as con:
            stamp = WriteStamp.now(run_id)  # taken under the file lock: later than any landed row
            plan = self._ensure(con, spec, rows.schema)
            write = _ScopedWrite(con, self.table_ref(spec.name), spec, scope, plan, stamp)
            if self._existing(con, spec.name).keyed:
                return self._replace_indexed(write, rows, deduplicated=deduplicated, dropped=dropped)
            data = encode_rows(rows, plan)
            if not deduplicated and self._repeats_a_key(con, spec, data):
                data, dropped = dedupe_by_key(data, spec.key)
            deleted = int(_exec(con, f"DELETE FROM {write.ref} WHERE {write.in_scope}", write.params)[0][0])
            if self._between_delete_and_insert is not None:
                self._between_delete_and_insert()
            if data.num_rows and not _key_holds_the_scope(spec):
                # after the delete, any row left with one of these keys lies outside the scope
                with self._registered(con, data.select(list(spec.key))) as keys:
                    on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in spec.key)
                    clash = int(
                        _exec(con, f"SELECT count(*) FROM {write.ref} t SEMI JOIN {keys} s ON {on}")[0][0]
                    )
                if clash:  # raising rolls the delete back
                    raise ValueError(f"{clash} {write.outside_message}")
            if data.num_rows:
                self._insert(con, spec, plan, data, stamp)
        return WriteResult(
            table=spec.name,
            rows_written=data.num_rows,
            rows_deleted=deleted,
            columns_added=plan.columns_added,
            duplicates_dropped=dropped,
        )

    def _repeats_a_key(self, con: duckdb.DuckDBPyConnection, spec: TableSpec, data: pa.Table) -> bool:
        """Whether two rows share a key: DuckDB counts on every core, several times faster than
        Arrow's single-threaded hash (the rows are then deduplicated, which is rare)."""
        if data.num_rows < 2:
            return False
        keys = ", ".join(q(k) for k in spec.key)
        with self._registered(con, data.select(list(spec.key))) as source:
            found = _exec(
                con, f"SELECT count(*) FROM (SELECT 1 FROM {source} GROUP BY {keys} HAVING count(*) > 1)"
            )
        return bool(found[0][0])

    def _replace_indexed(
        self, write: _ScopedWrite, rows: pa.Table, *, deduplicated: bool, dropped: int
    ) -> WriteResult:
        """The scope's replace on a table with a primary-key index: a plain INSERT for a new
        partition, else upsert + stale delete.

        DuckDB's key index handles a key deleted and re-inserted in one transaction very slowly (a
        million-row re-run took a minute), while an upsert updates in place; rows of the scope this
        write did not send (an older stamp) are then deleted. Row counts before and after prove
        that no key outside the scope was touched. The fault hook runs between the two statements.
        Duplicate keys: the plain INSERT lets the index find them (no hashing of the rows in the
        common case); on a key conflict the write is retried once with the last row of each key.
        """
        con, ref, spec, plan, stamp = write.con, write.ref, write.spec, write.plan, write.stamp

        def counts() -> tuple[int, int]:
            found = _exec(
                con, f"SELECT count(*), count(*) FILTER ({write.in_scope}) FROM {ref}", write.params
            )
            return int(found[0][0]), int(found[0][1])

        # a WHERE (not a FILTER) lets DuckDB skip row groups by the date column's min/max: a new
        # partition costs no scan of the table
        scope_before = int(
            _exec(con, f"SELECT count(*) FROM {ref} WHERE {write.in_scope}", write.params)[0][0]
        )
        if scope_before and not deduplicated:
            # an upsert would silently keep one of two rows with the same key: dedupe first
            rows, dropped = dedupe_by_key(rows, spec.key)
            deduplicated = True
        data = encode_rows(rows, plan)
        n = data.num_rows
        if n and not scope_before:
            # nothing to replace (a new partition): a plain INSERT, lighter than an upsert
            try:
                self._insert(con, spec, plan, data, stamp)
            except duckdb.ConstraintException as exc:
                if not deduplicated:
                    raise _KeyConflict from exc  # duplicates in the rows, or a key outside
                raise ValueError(f"some {write.outside_message}: {exc}") from exc
        elif n:
            total_before = int(_exec(con, f"SELECT count(*) FROM {ref}")[0][0])
            self._upsert(con, spec, plan, data, stamp, is_snapshot=False)
            total_after, scope_after = counts()
            matched_in_scope = scope_before + n - scope_after
            moved = total_before + n - total_after - matched_in_scope
            if moved:  # raising rolls the upsert back
                raise ValueError(f"{moved} {write.outside_message}")
        if self._between_delete_and_insert is not None:
            self._between_delete_and_insert()
        if scope_before:
            _exec(
                con,
                f"DELETE FROM {ref} WHERE {write.in_scope} AND ({q(LOADED_AT)} IS DISTINCT FROM $loaded_at "
                f"OR {q(RUN_ID)} IS DISTINCT FROM $run_id)",
                {**write.params, "loaded_at": stamp.loaded_at, "run_id": stamp.run_id},
            )
        return WriteResult(
            table=spec.name,
            rows_written=n,
            rows_deleted=scope_before,
            columns_added=plan.columns_added,
            duplicates_dropped=dropped,
        )

    def _insert(
        self,
        con: duckdb.DuckDBPyConnection,
        spec: TableSpec,
        plan: LoadPlan,
        data: pa.Table,
        stamp: WriteStamp,
    ) -> None:
        cols = ", ".join(q(c) for c in plan.load_columns)
        with self._registered(con, data) as source:
            _exec(
                con,
                f"INSERT INTO {self.table_ref(spec.name)} ({cols}, {q(LOADED_AT)}, {q(RUN_ID)}) "
                f"SELECT {cols}, $ts, $run_id FROM {source}",
                {"ts": stamp.loaded_at, "run_id": stamp.run_id},
            )

    def _upsert(
        self,
        con: duckdb.DuckDBPyConnection,
        spec: TableSpec,
        plan: LoadPlan,
        data: pa.Table,
        stamp: WriteStamp,
        *,
        is_snapshot: bool,
    ) -> None:
        """INSERT ... ON CONFLICT (key) DO UPDATE: every column takes this write's value (or NULL).

        In slices: DuckDB holds a whole ON CONFLICT input in memory (about 4x its Arrow size for a
        million rows); slices of :data:`UPSERT_BATCH_ROWS` keep that bounded. Keys are unique across
        slices (deduplicated before), so slicing changes nothing else.
        """
        ref = self.table_ref(spec.name)
        cols = ", ".join(q(c) for c in plan.load_columns)
        updates = [f"{q(c)} = excluded.{q(c)}" for c in plan.load_columns if c not in spec.key]
        updates += [f"{q(c)} = NULL" for c in plan.null_columns]
        updates += [f"{q(LOADED_AT)} = excluded.{q(LOADED_AT)}", f"{q(RUN_ID)} = excluded.{q(RUN_ID)}"]
        insert_cols = f"{cols}, {q(LOADED_AT)}, {q(RUN_ID)}"
        values = f"{cols}, $ts, $run_id"
        if is_snapshot:
            insert_cols += f", {q(IS_CURRENT)}, {q(FIRST_SEEN_AT)}, {q(LAST_SEEN_AT)}"
            values += ", true, $ts, $ts"
            updates += [f"{q(IS_CURRENT)} = true", f"{q(LAST_SEEN_AT)} = excluded.{q(LAST_SEEN_AT)}"]
        for offset in range(0, data.num_rows, UPSERT_BATCH_ROWS):
            with self._registered(con, data.slice(offset, UPSERT_BATCH_ROWS)) as source:
                _exec(
                    con,
                    f"INSERT INTO {ref} ({insert_cols}) SELECT {values} FROM {source} "
                    f"ON CONFLICT ({', '.join(q(k) for k in spec.key)}) DO UPDATE SET {', '.join(updates)}",
                    {"ts": stamp.loaded_at, "run_id": stamp.run_id},
                )

    def upsert_snapshot(
        self, spec: TableSpec, rows: pa.Table, run_id: str, scope: SnapshotScope | None
    ) -> WriteResult:
        check_snapshot_write(spec, rows, scope, run_id)  # the stamp is taken inside the transaction
        rows, dropped = dedupe_by_key(rows, spec.key)
        with self._transaction() as con:
            stamp = WriteStamp.now(run_id)
            plan = self._ensure(con, spec, rows.schema)
            data = encode_rows(rows, plan)
            ref = self.table_ref(spec.name)
            retired = 0
            if data.num_rows:
                self._upsert(con, spec, plan, data, stamp, is_snapshot=True)
            if scope is not None and (scope.column is None or scope.values):
                params: dict[str, Any] = {"ts": stamp.loaded_at, "run_id": stamp.run_id}
                # rows this write did not send carry an older stamp
                where = (
                    f"tgt.{q(IS_CURRENT)} AND (tgt.{q(LOADED_AT)} IS DISTINCT FROM $ts "
                    f"OR tgt.{q(RUN_ID)} IS DISTINCT FROM $run_id)"
                )
                if scope.column is not None:
                    where += f" AND list_contains($values, tgt.{q(scope.column)})"
                    params["values"] = list(scope.values)
                res = _exec(
                    con,
                    f"UPDATE {ref} AS tgt SET {q(IS_CURRENT)} = false, "
                    f"{q(LOADED_AT)} = $ts, {q(RUN_ID)} = $run_id WHERE {where}",
                    params,
                )
                retired = int(res[0][0]) if res else 0
        return WriteResult(
            table=spec.name,
            rows_written=data.num_rows,
            rows_deleted=retired,
            columns_added=plan.columns_added,
            duplicates_dropped=dropped,
        )

    def query(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        """Run ``sql`` on a read-only connection (DuckDB ``$name`` parameters)."""
        with self._connect(read_only=True) as con:
            return con.sql(sql, params=params or None).to_arrow_table()

    def close(self) -> None:
        """Nothing to release: connections live only for one call or one :meth:`session`."""

    def check_connection(self) -> None:
        """The file's folder can be created and written (the file itself appears with the first write).

        Opening the file would take the writer lock another process may hold, so a scratch file is
        written next to it instead. A reader needs the file itself: :meth:`Warehouse.check_connection`.
        """
        if self.read_only:
            super().check_connection()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and not self.path.is_file():
            raise IsADirectoryError(f"DuckDB file {self.path} is not a file")
        probe = self.path.parent / f".{self.path.name}.{uuid.uuid4().hex}.write-check"
        probe.write_bytes(b"")
        probe.unlink()
