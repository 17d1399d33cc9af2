"""DuckDB, the default warehouse: one file, Arrow in, one writer process at a time.

DuckDB lets one process open a file for writing. The connection is therefore opened per write (or per
landing of many writes) and closed right after it, so the file lock is held only while writing; a
second writer waits for the lock (retrying with backoff up to ``lock_timeout_seconds``) instead of
failing, then raises :class:`~resources.warehouse.base.WarehouseLockTimeout`. While it waits it says
so: a WARNING on the ``visibility.warehouse`` logger naming the file and the process DuckDB says
holds it, about every :data:`LOCK_WAIT_NOTICE_SECONDS`, and the handle's ``on_wait`` callback
(:class:`LockWait`) at the same moments. BI tools open the file read-only
(:meth:`DuckDBWarehouse.open_read_only`), which also waits while a write is in progress.

:meth:`~resources.warehouse.base.Warehouse.replace_partitions_together` (the write procedure, in
``base.py``; this module implements its hooks) lands every chunk of one table's landing in one
transaction on one connection: the chunks commit together or not at all. :meth:`DuckDBWarehouse.session`
keeps one connection open across several writes and caches the catalog lookups meanwhile. The file
lock is then held for the whole session: meant for landing steps, not for long-lived handles.

Partitioned tables carry no primary-key index; snapshot tables do (their upserts need it). The key
index (an ART) lives in memory and grows with the table, so a landing process would grow with the days of
a backfill (docs/ARCHITECTURE.md, *Engine flows*). Without it, a partition replace is a delete plus
an insert, and keys stay unique because every write is deduplicated and refuses a key that exists
outside its scope (the ``keys_unique`` asset checks verify it too). A partitioned table that
carries the index (created by hand or by another tool) is refused with
:class:`KeyIndexedTableError`, naming the table and the one statement that drops the index
(docs/OPERATIONS.md, *DuckDB tables with a key index*): one write path.

``memory_limit`` gives a handle's connections a DuckDB memory budget (the landing worker's:
:class:`~resources.warehouse.resource.WarehouseResource`). DuckDB otherwise keeps what it reads
cached up to 80% of RAM until the connection closes, and the checkpoint that ends each write merges
the table's partial row groups: both grew with the table, so a landing process took more memory
the longer the backfill. Within a budget DuckDB evicts and spills instead. A landing that does not
fit the budget fails in one of several forms (:func:`is_out_of_memory`: ``OutOfMemoryException``,
or a ``TransactionException`` at commit saying "failed to pin block", ...); it is rolled back whole
and retried once without the budget, with a warning. Budgeted connections also leave the checkpoint
to the moment they close (``checkpoint_threshold``): DuckDB's automatic checkpoint after a commit
that does not fit the budget is a fatal error that ends the database instance, while the checkpoint
on close that does not fit leaves the committed writes in the WAL file (every reader sees them) for
the next checkpoint to fold in. (An explicit ``CHECKPOINT`` fails the fatal way too: closing is the
safe place.)

Retries, all of them (nothing above this module retries a write: not the landing worker, not the
sync step, and Dagster's ``run_retries`` skip runs whose step failed):

* **A write is retried once, in one case**: a partition landing within ``memory_limit`` that ran out
  of memory (:func:`is_out_of_memory`) is rolled back whole and run once more without the budget
  (:meth:`DuckDBWarehouse._run_landing`), since the budget must never fail a sync and
  a rolled-back landing is safe to repeat. Every other error surfaces at once: a key outside the
  scope, a schema mismatch or a full disk would fail the same way again. A one-shot iterator of
  writes is not retried (it cannot start over), and snapshot writes, which land outside the budget,
  are not either.
* **Opening the file waits for its lock** (:func:`connect_with_lock_wait`, tenacity): attempts to
  connect, with jittered backoff from 20 ms to 250 ms, while DuckDB's error says another process
  holds the lock, up to ``lock_timeout_seconds``; nothing of the write has run yet. Another thread
  of this process holding the file is waited for the same way (:meth:`DuckDBWarehouse._acquire`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import duckdb
import pyarrow as pa
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay

from resources.warehouse.backoff import jittered_backoff
from resources.warehouse.base import (
    FIRST_SEEN_AT,
    IS_CURRENT,
    LAST_SEEN_AT,
    LOADED_AT,
    RUN_ID,
    WAREHOUSE_SETTING,
    PartitionScope,
    PartitionWrite,
    SchemaMismatchError,
    SnapshotScope,
    StagedWrite,
    TableSpec,
    Warehouse,
    WarehouseConfigError,
    WarehouseLockTimeout,
    WriteResult,
    first_line,
)
from resources.warehouse.common import (
    ExistingColumn,
    LoadPlan,
    ViewShape,
    WriteStamp,
    added_column_default,
    column_descriptions,
    current_view_description,
    current_view_name,
    is_one_shot,
    plan_load,
    quote_identifier,
    quote_literal,
    system_columns,
    validate_spec,
    view_work,
)
from resources.warehouse.types import duckdb_type, from_duckdb_type, sql_type_or_default
from resources.warehouse.urls import DEFAULT_LOCK_TIMEOUT_SECONDS
from resources.warehouse.views import views_reading

q = quote_identifier

#: the smallest ``memory_limit`` accepted: below it DuckDB fails ordinary chunk writes
MIN_MEMORY_LIMIT_BYTES = 32 * 1000**2
_MEMORY_UNITS = {"kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}
_MEMORY_UNITS |= {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}
_MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b)\s*$", re.IGNORECASE)
#: budgeted connections checkpoint when they close, not after a commit (module doc)
_NO_AUTOCHECKPOINT = "1TB"

#: rows per ON CONFLICT statement (DuckDB's row-group size)
UPSERT_BATCH_ROWS = 122_880

#: The logger of every warehouse warning (lock waits, landings retried without the budget).
LOGGER_NAME = "visibility.warehouse"
log = logging.getLogger(LOGGER_NAME)

#: A wait for the file lock is first reported after this long, then about this often.
LOCK_WAIT_NOTICE_SECONDS = 5.0
LOCK_WAIT_FIRST_NOTICE_SECONDS = 1.0
#: Attempts to open a locked file are this far apart at first, doubling up to the most (jittered).
LOCK_RETRY_FIRST_SECONDS = 0.02
LOCK_RETRY_MOST_SECONDS = 0.25

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


#: The name :func:`_exec_on_rows` gives its Arrow table in SQL.
ROWS = q("_visibility_rows")


def _exec_on_rows(
    con: duckdb.DuckDBPyConnection, sql: str, rows: pa.Table, params: Any = None
) -> list[tuple[Any, ...]]:
    """Execute ``sql``, which reads ``rows`` as the table :data:`ROWS`, and drain.

    DuckDB finds the table by its replacement scan of this frame's locals, and lets go of it when
    the statement ends. Not ``con.register``: a registration is a catalog entry, and one dropped
    inside a transaction keeps its Arrow table alive until the commit, so a landing of many chunks
    in one transaction would hold every chunk's rows.
    """
    _visibility_rows = rows  # read by DuckDB's replacement scan (underscore: not "unused")
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


#: What DuckDB's errors say when memory ran out, whatever their class (checked case-insensitively).
_OUT_OF_MEMORY_MARKERS = (
    "out of memory",
    "failed to pin block",
    "could not allocate",
    "failed to allocate",
    "could not free up enough memory",
)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether DuckDB failed for want of memory: ``OutOfMemoryException``, or another class
    (``TransactionException`` at commit, ``IOException``, ``InvalidInputException``, a fatal error)
    whose message says so ("failed to pin block", "Out of Memory", "could not allocate", ...)."""
    if isinstance(exc, duckdb.OutOfMemoryException):
        return True
    if not isinstance(exc, duckdb.Error):
        return False
    text = str(exc).lower()
    return any(marker in text for marker in _OUT_OF_MEMORY_MARKERS)


def _is_fatal(exc: BaseException) -> bool:
    """DuckDB ended the database instance: it must be closed and opened again."""
    return isinstance(exc, duckdb.FatalException) or "database has been invalidated" in str(exc)


def _committed_before_failing(exc: BaseException) -> bool:
    """A fatal error that DuckDB says came after a durable commit (its automatic checkpoint)."""
    return isinstance(exc, duckdb.Error) and "COMMIT succeeded" in str(exc)


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


_HOLDER_RE = re.compile(
    r"Conflicting lock is held in (?P<process>.+?) \(PID (?P<pid>\d+)\)(?: by user (?P<user>\S+?))?[.\s]"
)


def lock_holder(message: str) -> str:
    """Who holds the file lock, as DuckDB's lock error says: ``/usr/bin/python3 (PID 4242)``."""
    match = _HOLDER_RE.search(message + " ")
    if match is None:
        return "another process"
    holder = f"{match['process']} (PID {match['pid']})"
    return f"{holder}, user {match['user']}" if match["user"] else holder


@dataclass(frozen=True)
class LockWait:
    """A writer (or reader) waiting for a DuckDB file, as reported to ``on_wait`` callbacks.

    Reported about every :data:`LOCK_WAIT_NOTICE_SECONDS` while the wait lasts, and once more with
    ``done=True`` when it ends (the lock was taken, or the wait gave up), so a status line can clear.
    """

    path: Path
    #: what holds it: DuckDB's words for another process (``/usr/bin/python3 (PID 4242)``), or
    #: ``another write of this process``
    holder: str
    waited_seconds: float
    remaining_seconds: float
    done: bool = False

    @property
    def message(self) -> str:
        if self.done:
            return f"stopped waiting for the DuckDB lock on {self.path} after {self.waited_seconds:.0f} s"
        return (
            f"waiting for the DuckDB lock on {self.path} held by {self.holder}, "
            f"up to {self.remaining_seconds:.0f} more s"
        )


OnWait = Callable[[LockWait], None]


class _WaitReporter:
    """Reports one wait: a log line and the callback, first after a second, then every few seconds."""

    def __init__(self, path: Path, timeout: float, on_wait: OnWait | None) -> None:
        self.path = path
        self.timeout = timeout
        self.on_wait = on_wait
        self.started = time.monotonic()
        self.next_notice = self.started + LOCK_WAIT_FIRST_NOTICE_SECONDS
        self.reported = False

    def waiting(self, holder: str) -> None:
        now = time.monotonic()
        if now < self.next_notice:
            return
        self.next_notice = now + LOCK_WAIT_NOTICE_SECONDS
        waited = now - self.started
        wait = LockWait(self.path, holder, waited, max(self.timeout - waited, 0.0))
        log.warning("%s (lock_timeout_seconds=%g)", wait.message, self.timeout)
        self._call(wait)
        self.reported = True

    def done(self) -> None:
        if self.reported:
            waited = time.monotonic() - self.started
            self._call(LockWait(self.path, "", waited, max(self.timeout - waited, 0.0), done=True))

    def _call(self, wait: LockWait) -> None:
        if self.on_wait is not None:
            try:
                self.on_wait(wait)
            except Exception:  # a status line must never fail a write
                log.exception("the on_wait callback failed")


def connect_with_lock_wait(
    path: Path, *, read_only: bool, timeout: float, on_wait: OnWait | None = None
) -> duckdb.DuckDBPyConnection:
    """Open ``path``, retrying while another process holds the file lock, up to ``timeout`` seconds.

    The wait is reported (logger ``visibility.warehouse``, and ``on_wait``): see :class:`LockWait`.
    """
    reporter = _WaitReporter(path, timeout, on_wait)
    backoff = jittered_backoff(LOCK_RETRY_FIRST_SECONDS, LOCK_RETRY_MOST_SECONDS)

    def wait(state: RetryCallState) -> float:  # never past the deadline: the last attempt is at it
        return min(backoff(state), max(timeout - (state.seconds_since_start or 0.0), 0.0))

    def say_who_holds_it(state: RetryCallState) -> None:
        reporter.waiting(lock_holder(str(_failure(state))))

    def give_up(state: RetryCallState) -> NoReturn:
        exc = _failure(state)
        raise WarehouseLockTimeout(
            f"DuckDB file {path} stayed locked by {lock_holder(str(exc))} for {timeout:g}s "
            f"(lock_timeout_seconds); DuckDB said: {first_line(exc)}"
        ) from exc

    retrying = Retrying(
        retry=retry_if_exception(lambda exc: isinstance(exc, duckdb.IOException) and _is_lock_error(exc)),
        stop=stop_after_delay(timeout),
        wait=wait,
        before_sleep=say_who_holds_it,
        retry_error_callback=give_up,
    )
    try:
        return retrying(duckdb.connect, str(path), read_only=read_only)
    finally:
        reporter.done()


def _failure(state: RetryCallState) -> BaseException:
    """The exception of the attempt that just failed."""
    assert state.outcome is not None
    exc = state.outcome.exception()
    assert exc is not None
    return exc


#: The first bytes of every DuckDB database file hold this at offset 8.
_DUCKDB_MAGIC = b"DUCK"


#: Where the migration of a :class:`KeyIndexedTableError` is documented.
KEY_INDEX_MIGRATION_DOC = "docs/OPERATIONS.md#duckdb-tables-with-a-key-index"


class KeyIndexedTableError(SchemaMismatchError):
    """A partitioned table still carries the primary-key index development versions gave it: it is
    refused rather than written another way (module doc). Nothing was written."""

    @classmethod
    def of(cls, schema: str, table: str, table_ref: str) -> KeyIndexedTableError:
        return cls(
            f"DuckDB table {schema}.{table} carries a primary-key index, as development versions "
            "created partitioned tables; this version writes them without it, so nothing was written. "
            "With no sync running, recreate it without the index (its rows are kept): "
            f"CREATE OR REPLACE TABLE {table_ref} AS SELECT * FROM {table_ref}; "
            f"see {KEY_INDEX_MIGRATION_DOC}",
            table=table,
        )


class _Existing(NamedTuple):
    """A table as the catalog shows it."""

    #: None: no such table
    columns: list[ExistingColumn] | None
    comment: str | None
    #: it carries a primary-key index (snapshot tables; a partitioned one is refused, module doc)
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
    """One partition replace under way: its table and scope filter."""

    ref: str
    spec: TableSpec
    scope: PartitionScope

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
    """A DuckDB file; every write (or landing of many writes) is one transaction on a connection
    opened for it."""

    def __init__(
        self,
        path: str | Path,
        schema: str = "visibility",
        *,
        read_only: bool = False,
        lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
        memory_limit: str | None = None,
        on_wait: OnWait | None = None,
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
        #: called while a connection waits for the file lock (and once when the wait ends): a status
        #: line's hook; the same waits are logged on ``visibility.warehouse`` either way
        self.on_wait = on_wait
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
        on_wait: OnWait | None = None,
    ) -> DuckDBWarehouse:
        """A reader (BI tools, checks): never takes the writer lock, waits while a write runs."""
        return cls(path, schema, read_only=True, lock_timeout_seconds=lock_timeout_seconds, on_wait=on_wait)

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
                session = self._local.session
                self._local.session = None
                if session.con is not con:  # reopened after a fatal error: close the new one
                    session.con.close()

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
        self._acquire(lock)
        try:
            con = self._open(read_only=read_only)
            try:
                yield con
            finally:
                con.close()
        finally:
            lock.release()

    def _acquire(self, lock: threading.RLock) -> None:
        """Take this process's lock on the file (another thread's write or session), saying so
        while waiting, like the wait for another process."""
        if lock.acquire(blocking=False):
            return
        reporter = _WaitReporter(self.path, self.lock_timeout_seconds, self.on_wait)
        deadline = reporter.started + self.lock_timeout_seconds
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WarehouseLockTimeout(
                        f"DuckDB file {self.path} stayed busy with another write of this process "
                        f"(PID {os.getpid()}) for {self.lock_timeout_seconds:g}s (lock_timeout_seconds)"
                    )
                if lock.acquire(timeout=min(remaining, 0.5)):
                    return
                reporter.waiting(f"another write of this process (PID {os.getpid()})")
        finally:
            reporter.done()

    def _open(self, *, read_only: bool) -> duckdb.DuckDBPyConnection:
        wait = {"timeout": self.lock_timeout_seconds, "on_wait": self.on_wait}
        try:
            con = connect_with_lock_wait(self.path, read_only=read_only, **wait)
        except duckdb.ConnectionException as exc:
            # this process already holds the file read-write elsewhere (DuckDB shares one instance
            # per file and process): reading through that instance takes no new lock
            if not read_only or "different configuration" not in str(exc):
                raise
            con = connect_with_lock_wait(self.path, read_only=False, **wait)
        _exec(con, "SET enable_progress_bar = false")  # no progress bars in run logs
        if self._budgeted:
            self._apply_budget(con)
        return con

    def _apply_budget(self, con: duckdb.DuckDBPyConnection) -> None:
        assert self.memory_limit is not None
        _exec(con, f"SET memory_limit = {quote_literal(self.memory_limit)}")
        _exec(con, f"SET checkpoint_threshold = {quote_literal(_NO_AUTOCHECKPOINT)}")

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
            _exec(session.con, "RESET checkpoint_threshold")
        try:
            yield
        finally:
            self._local.unbudgeted = False
            session = self._session()
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
            except BaseException as exc:
                session = self._session()
                if session is not None:
                    session.forget()  # the rollback may undo DDL whose effects were cached
                with contextlib.suppress(duckdb.Error):  # keep the original error
                    con.rollback()
                if _is_fatal(exc):
                    self._reopen_session(con)
                raise
            try:
                con.commit()
            except duckdb.Error as exc:
                session = self._session()
                if session is not None:
                    session.forget()
                if not _is_fatal(exc):
                    with contextlib.suppress(duckdb.Error):
                        con.rollback()
                    raise
                self._reopen_session(con)
                if not _committed_before_failing(exc):
                    raise
                # durable: the WAL holds it, and the next open of the file folds it in
                log.warning(
                    "DuckDB committed a write to %s but its automatic checkpoint failed (%s); the "
                    "database was reopened, the write is in the WAL file until the next checkpoint",
                    self.path,
                    first_line(exc),
                )

    def _reopen_session(self, con: duckdb.DuckDBPyConnection) -> None:
        """After a fatal error DuckDB's instance must be closed before the file can be used again:
        an open session gets a new connection (a plain write's connection is closed by its caller)."""
        session = self._session()
        if session is None or session.con is not con:
            return
        with contextlib.suppress(duckdb.Error):
            con.close()
        session.forget()
        session.con = self._open(read_only=self.read_only)

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
                default = added_column_default(spec, c.name)  # DuckDB writes it into the existing rows
                fill = f" DEFAULT {default}" if default else ""
                _exec(con, f"ALTER TABLE {ref} ADD COLUMN {q(c.name)} {duckdb_type(c.type)}{fill}")
        for column, text in plan.comments:
            target = f"TABLE {ref}" if column is None else f"COLUMN {ref}.{q(column)}"
            _exec(con, f"COMMENT ON {target} IS {quote_literal(text)}")
        if spec.kind == "snapshot":
            view = current_view_name(spec)
            changed = plan.create or plan.columns or plan.comments
            if session is not None and view in session.views and not changed:
                return plan
            description = current_view_description(spec)
            columns = column_descriptions(spec, plan.table_columns)
            work = (
                "create"
                if plan.create or plan.columns
                else view_work(self._view_shape(con, view), description, columns)
            )
            if work == "create":
                _exec(
                    con,
                    f"CREATE OR REPLACE VIEW {self.table_ref(view)} AS "
                    f"SELECT * FROM {self._relative_ref(spec.name)} WHERE {q(IS_CURRENT)}",
                )
            if work is not None:
                self._comment_view(con, view, description, columns)
            if session is not None:
                session.views.add(view)
        return plan

    def _relative_ref(self, table: str) -> str:
        """A table named schema-relative, for view bodies: DuckDB 2.0 refuses a catalog-qualified name
        there when the schema and the file share a name (it is stored relative anyway)."""
        return f"{q(self.schema)}.{q(table)}"

    def _view_shape(self, con: duckdb.DuckDBPyConnection, view: str) -> ViewShape | None:
        found = _exec(
            con,
            "SELECT v.comment, c.column_name, c.comment FROM duckdb_views() v "
            "LEFT JOIN duckdb_columns() c ON c.database_name = v.database_name "
            "AND c.schema_name = v.schema_name AND c.table_name = v.view_name "
            "WHERE v.database_name = current_database() AND v.schema_name = $schema "
            "AND v.view_name = $view ORDER BY c.column_index",
            {"schema": self.schema, "view": view},
        )
        if not found:
            return None
        return ViewShape(found[0][0], tuple((n, c) for _, n, c in found if n is not None))

    def _comment_view(
        self, con: duckdb.DuckDBPyConnection, view: str, description: str, columns: Iterable[tuple[str, str]]
    ) -> None:
        ref = self.table_ref(view)
        _exec(con, f"COMMENT ON VIEW {ref} IS {quote_literal(description)}")
        for column, text in columns:
            _exec(con, f"COMMENT ON COLUMN {ref}.{q(column)} IS {quote_literal(text)}")

    def _ensure_views(self, spec: TableSpec) -> None:
        """The analyst views reading ``spec``'s table whose sources all exist: created, re-created or
        commented as their spec says; one that fails is logged and skipped (the table has landed)."""
        for view in views_reading(spec.name):
            try:
                with self._transaction() as con:
                    if any(self._existing(con, source).columns is None for source in view.sources):
                        continue
                    columns = [(c.name, c.description) for c in view.columns]
                    work = view_work(self._view_shape(con, view.name), view.description, columns)
                    if work == "create":
                        body = view.select(self._relative_ref)
                        _exec(con, f"CREATE OR REPLACE VIEW {self.table_ref(view.name)} AS {body}")
                    if work is not None:
                        self._comment_view(con, view.name, view.description, columns)
            except duckdb.Error as exc:
                log.warning(
                    "DuckDB view %s.%s could not be created (%s: %s); its tables are unaffected",
                    self.schema,
                    view.name,
                    type(exc).__name__,
                    first_line(exc),
                )

    # --- Warehouse --------------------------------------------------------------------------------

    def ensure_table(self, spec: TableSpec) -> list[str]:
        validate_spec(spec)
        with self._transaction() as con:
            added = self._ensure(con, spec, spec.arrow_schema).columns_added
        self._ensure_views(spec)
        return added

    # --- write hooks (the procedure: Warehouse in base.py) ----------------------------------------

    def _run_landing(
        self, spec: TableSpec, writes: Iterable[PartitionWrite], land: Callable[[], list[WriteResult]]
    ) -> list[WriteResult]:
        """Within ``memory_limit``, a landing that runs out of memory in any of DuckDB's forms
        (:func:`is_out_of_memory`) is rolled back whole and run once more without the budget, with a
        warning; ``writes`` is then iterated a second time (a one-shot iterator is not retried)."""
        try:
            return land()
        except duckdb.Error as exc:  # rolled back: nothing of this landing was written
            if not (self._budgeted and is_out_of_memory(exc)):
                raise
            if is_one_shot(writes):
                log.warning(
                    "DuckDB landing of %s exceeded memory_limit=%s and was rolled back; not retried "
                    "because its writes were a one-shot iterator",
                    spec.name,
                    self.memory_limit,
                )
                raise
            log.warning(
                "DuckDB landing of %s exceeded memory_limit=%s (%s: %s); rolled back whole, retrying "
                "it once without the budget",
                spec.name,
                self.memory_limit,
                type(exc).__name__,
                first_line(exc),
            )
        with self._without_budget():
            return land()

    def _write_transaction(self, spec: TableSpec) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """One transaction on one connection: a landing of many writes commits whole or not at all."""
        return self._transaction()

    def _prepare_table(
        self, con: duckdb.DuckDBPyConnection, spec: TableSpec, rows_schema: pa.Schema
    ) -> LoadPlan:
        """Create or evolve the table; a partitioned table with a key index is refused
        (:class:`KeyIndexedTableError`; raising rolls the landing back)."""
        plan = self._ensure(con, spec, rows_schema)
        if spec.kind == "partitioned" and self._existing(con, spec.name).keyed:
            raise KeyIndexedTableError.of(self.schema, spec.name, self.table_ref(spec.name))
        return plan

    def _may_repeat_a_key(self, con: duckdb.DuckDBPyConnection, spec: TableSpec, data: pa.Table) -> bool:
        """Whether two rows share a key: DuckDB counts on every core, several times faster than
        Arrow's single-threaded hash (the rows are then deduplicated, which is rare)."""
        if data.num_rows < 2:
            return False
        keys = ", ".join(q(k) for k in spec.key)
        found = _exec_on_rows(
            con,
            f"SELECT count(*) FROM (SELECT 1 FROM {ROWS} GROUP BY {keys} HAVING count(*) > 1)",
            data.select(list(spec.key)),
        )
        return bool(found[0][0])

    def _stage(
        self, con: duckdb.DuckDBPyConnection, spec: TableSpec, plan: LoadPlan, data: pa.Table
    ) -> pa.Table:
        """Nothing to copy: DuckDB reads the Arrow table where it is (:func:`_exec_on_rows`)."""
        return data

    def _apply_replace(
        self, con: duckdb.DuckDBPyConnection, spec: TableSpec, staged: Sequence[StagedWrite]
    ) -> list[int]:
        """Per write: delete its scope, then insert its rows. Tables this writer creates carry no key
        index, so a key that already exists outside the scope fails the landing here (checked only
        where the key does not contain the brand, date and engine: otherwise a row in the scope
        cannot share its key with one outside)."""
        deleted = []
        for write in staged:
            assert write.scope is not None
            scoped = _ScopedWrite(self.table_ref(spec.name), spec, write.scope)
            data: pa.Table = write.stage
            deleted.append(
                int(_exec(con, f"DELETE FROM {scoped.ref} WHERE {scoped.in_scope}", scoped.params)[0][0])
            )
            if self._between_delete_and_insert is not None:
                self._between_delete_and_insert()
            if data.num_rows and not _key_holds_the_scope(spec):
                # after the delete, any row left with one of these keys lies outside the scope
                on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in spec.key)
                keys = data.select(list(spec.key))
                sql = f"SELECT count(*) FROM {scoped.ref} t SEMI JOIN {ROWS} s ON {on}"
                clash = int(_exec_on_rows(con, sql, keys)[0][0])
                if clash:  # raising rolls the landing back
                    raise ValueError(f"{clash} {scoped.outside_message}")
            if data.num_rows:
                self._insert(con, spec, write.plan, data, write.stamp)
        return deleted

    def _insert(
        self,
        con: duckdb.DuckDBPyConnection,
        spec: TableSpec,
        plan: LoadPlan,
        data: pa.Table,
        stamp: WriteStamp,
    ) -> None:
        cols = ", ".join(q(c) for c in plan.load_columns)
        _exec_on_rows(
            con,
            f"INSERT INTO {self.table_ref(spec.name)} ({cols}, {q(LOADED_AT)}, {q(RUN_ID)}) "
            f"SELECT {cols}, $ts, $run_id FROM {ROWS}",
            data,
            {"ts": stamp.loaded_at, "run_id": stamp.run_id},
        )

    def _apply_merge(
        self,
        con: duckdb.DuckDBPyConnection,
        spec: TableSpec,
        staged: StagedWrite,
        retire: SnapshotScope | None,
    ) -> int:
        """``INSERT ... ON CONFLICT (key) DO UPDATE``, then retire the rows of ``retire`` this write
        did not send (they carry an older stamp)."""
        data: pa.Table = staged.stage
        stamp = staged.stamp
        if data.num_rows:
            self._upsert(con, spec, staged.plan, data, stamp)
        if retire is None:
            return 0
        params: dict[str, Any] = {"ts": stamp.loaded_at, "run_id": stamp.run_id}
        where = (
            f"tgt.{q(IS_CURRENT)} AND (tgt.{q(LOADED_AT)} IS DISTINCT FROM $ts "
            f"OR tgt.{q(RUN_ID)} IS DISTINCT FROM $run_id)"
        )
        if retire.column is not None:
            where += f" AND list_contains($values, tgt.{q(retire.column)})"
            params["values"] = list(retire.values)
        res = _exec(
            con,
            f"UPDATE {self.table_ref(spec.name)} AS tgt SET {q(IS_CURRENT)} = false, "
            f"{q(LOADED_AT)} = $ts, {q(RUN_ID)} = $run_id WHERE {where}",
            params,
        )
        return int(res[0][0]) if res else 0

    def _upsert(
        self,
        con: duckdb.DuckDBPyConnection,
        spec: TableSpec,
        plan: LoadPlan,
        data: pa.Table,
        stamp: WriteStamp,
    ) -> None:
        """A snapshot's INSERT ... ON CONFLICT (key) DO UPDATE: every column takes this write's value
        (or NULL), and the row is current again.

        In slices: DuckDB holds a whole ON CONFLICT input in memory, several times its Arrow size
        (bench/RESULTS.md, *Warehouse*); slices of :data:`UPSERT_BATCH_ROWS` keep that bounded.
        Keys are unique across slices (deduplicated before), so slicing changes nothing else.
        """
        ref = self.table_ref(spec.name)
        cols = ", ".join(q(c) for c in plan.load_columns)
        updates = [f"{q(c)} = excluded.{q(c)}" for c in plan.load_columns if c not in spec.key]
        updates += [f"{q(c)} = NULL" for c in plan.null_columns]
        updates += [f"{q(LOADED_AT)} = excluded.{q(LOADED_AT)}", f"{q(RUN_ID)} = excluded.{q(RUN_ID)}"]
        updates += [f"{q(IS_CURRENT)} = true", f"{q(LAST_SEEN_AT)} = excluded.{q(LAST_SEEN_AT)}"]
        system = (LOADED_AT, RUN_ID, IS_CURRENT, FIRST_SEEN_AT, LAST_SEEN_AT)
        insert_cols = f"{cols}, {', '.join(map(q, system))}"
        values = f"{cols}, $ts, $run_id, true, $ts, $ts"
        for offset in range(0, data.num_rows, UPSERT_BATCH_ROWS):
            _exec_on_rows(
                con,
                f"INSERT INTO {ref} ({insert_cols}) SELECT {values} FROM {ROWS} "
                f"ON CONFLICT ({', '.join(q(k) for k in spec.key)}) DO UPDATE SET {', '.join(updates)}",
                data.slice(offset, UPSERT_BATCH_ROWS),
                {"ts": stamp.loaded_at, "run_id": stamp.run_id},
            )

    # --- queries ----------------------------------------------------------------------------------

    def _placeholder(self, name: str) -> str:
        return f"${name}"

    def _run_query(self, sql: str, params: dict[str, Any]) -> pa.Table:
        """On a read-only connection (the session's, in a session)."""
        with self._connect(read_only=True) as con:
            return con.sql(sql, params=params or None).to_arrow_table()

    def close(self) -> None:
        """Nothing to release: connections live only for one call or one :meth:`session`."""

    def check_connection(self) -> None:
        """Everything a write will need, found before the first API request, or a
        :class:`WarehouseConfigError` naming ``VISIBILITY_WAREHOUSE``:

        * the file's folder exists or can be created, and can be written (DuckDB writes its WAL and
          temporary files next to the database);
        * an existing path is a regular file this process can read and write, starts with DuckDB's
          header, and this DuckDB opens it (read-only, without waiting: a file another process holds
          is only reported, with its holder, since writes wait for it).

        A new file is left to the first write. A reader (:meth:`open_read_only`) checks the file only.
        """
        try:
            if not self.read_only:
                self._check_folder()
            self._check_file()
        except OSError as exc:
            raise self.config_error(f"cannot be used ({type(exc).__name__}: {exc.strerror or exc})") from None

    def config_error(self, problem: str) -> WarehouseConfigError:
        return WarehouseConfigError(f"{WAREHOUSE_SETTING}: DuckDB file {self.path} {problem}")

    def _check_folder(self) -> None:
        folder = self.path.parent
        if folder.exists() and not folder.is_dir():
            raise self.config_error(f"cannot be created: {folder} is not a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self.config_error(f"cannot be created: its folder cannot ({exc.strerror or exc})") from None
        probe = folder / f".{self.path.name}.{uuid.uuid4().hex}.write-check"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise self.config_error(
                f"cannot be written: its folder {folder} refuses new files ({exc.strerror or exc}); "
                "DuckDB writes its WAL and temporary files there"
            ) from None

    def _check_file(self) -> None:
        path = self.path
        if not path.exists():
            if self.read_only:
                raise self.config_error("does not exist (nothing landed yet)")
            return
        if path.is_dir():
            raise self.config_error("is a folder, not a DuckDB database file")
        if not path.is_file():
            raise self.config_error("is not a regular file")
        try:
            with path.open("rb") as f:
                header = f.read(12)
        except OSError as exc:
            raise self.config_error(f"cannot be read ({exc.strerror or exc})") from None
        if not header:
            raise self.config_error(
                "is empty, not a DuckDB database (DuckDB refuses an empty file): delete it, or point "
                "VISIBILITY_WAREHOUSE at another file"
            )
        if header[8:12] != _DUCKDB_MAGIC:
            raise self.config_error(
                "exists but is not a DuckDB database (it does not start with DuckDB's header): point "
                "VISIBILITY_WAREHOUSE at a DuckDB file, or at a path that does not exist yet"
            )
        if not self.read_only:
            for target in (path, path.with_name(path.name + ".wal")):
                if target.exists() and not os.access(target, os.R_OK | os.W_OK):
                    raise self.config_error(f"cannot be written: {target} is not writable by this user")
        try:
            con = duckdb.connect(str(path), read_only=True)
        except duckdb.ConnectionException as exc:
            if "different configuration" in str(exc):  # this process has it open already
                return
            raise self.config_error(
                f"cannot be opened by DuckDB {duckdb.__version__}: {first_line(exc)}"
            ) from None
        except duckdb.Error as exc:
            if _is_lock_error(exc):  # another process writes: the header said enough
                log.warning(
                    "DuckDB file %s is in use by %s; writes will wait for it (up to "
                    "lock_timeout_seconds=%g s)",
                    path,
                    lock_holder(str(exc)),
                    self.lock_timeout_seconds,
                )
                return
            raise self.config_error(
                f"cannot be opened by DuckDB {duckdb.__version__}: {first_line(exc)}"
            ) from None
        con.close()
