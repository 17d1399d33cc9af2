"""DuckDB, the default warehouse: one file, Arrow in, one writer process at a time.

DuckDB lets one process open a file for writing, so a connection is opened per write (or landing)
and closed right after; a second writer waits for the file lock (:mod:`resources.warehouse.duckdb_lock`).
Partitioned tables carry no primary-key index (it lives in memory and grows with the table); every
write is deduplicated and refuses a key outside its scope instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from resources.warehouse.base import StagedWrite, Warehouse, outside_scope_error
from resources.warehouse.contract import (
    IS_CURRENT,
    LOGGER_NAME,
    WAREHOUSE_SETTING,
    PartitionWrite,
    SnapshotScope,
    TableSpec,
    WarehouseConfigError,
    WriteResult,
    first_line,
)
from resources.warehouse.duckdb_lock import (
    connect_with_lock_wait,
    hold_process_lock,
    is_lock_error,
    lock_holder,
)
from resources.warehouse.duckdb_memory import MemoryBudget, read_within
from resources.warehouse.schema_evolution import ExistingColumn, LoadPlan, plan_load
from resources.warehouse.sql import (
    SqlDialect,
    delete_scope_statement,
    insert_statement,
    quote_identifier,
    retire_statement,
    scope_parameters,
    stamp_parameters,
    table_statements,
    upsert_statement,
    view_statements,
)
from resources.warehouse.types import duckdb_type, from_duckdb_type
from resources.warehouse.urls import DEFAULT_LOCK_TIMEOUT_SECONDS
from resources.warehouse.views import (
    ViewShape,
    ViewSpec,
    column_descriptions,
    current_view_description,
    current_view_name,
    view_work,
)

quoted = quote_identifier

#: DuckDB threads of a landing handle (one with a ``memory_limit``): half the cores, at least one;
#: a landing runs beside the fetch of the next table (bench/RESULTS.md, *Landing memory*).
LANDING_THREADS = max(1, (os.cpu_count() or 2) // 2)

log = logging.getLogger(LOGGER_NAME)
#: DuckDB's DDL: its type names; partitioned tables carry no key index (module doc)
DIALECT = SqlDialect(duckdb_type, key_index_on_partitioned=False)
#: The name :func:`_exec_on_rows` gives its Arrow table in SQL.
ROWS = quoted("_visibility_rows")


def _exec(con: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Execute and drain: DuckDB 2 refuses new work on a connection with an unfinished result."""
    return con.execute(sql, params).fetchall()


def _exec_on_rows(
    con: duckdb.DuckDBPyConnection, sql: str, params: Any = None, *, rows: pa.Table
) -> list[tuple[Any, ...]]:
    """Execute ``sql``, which reads ``rows`` as :data:`ROWS` (a replacement scan of locals), and drain.

    Not ``con.register``: dropped inside a transaction, a registration keeps its rows until commit, so
    a landing would hold every chunk's rows.
    """
    _visibility_rows = rows  # read by DuckDB's replacement scan (underscore: not "unused")
    return con.execute(sql, params).fetchall()


def _is_fatal(exc: BaseException) -> bool:
    """DuckDB ended the database instance: it must be closed and opened again."""
    return isinstance(exc, duckdb.FatalException) or "database has been invalidated" in str(exc)


class DuckDBWarehouse(Warehouse):
    """A DuckDB file; every write (or landing of many writes) is one transaction on a connection
    opened for it."""

    view_errors = (duckdb.Error,)

    def __init__(
        self,
        path: str | Path,
        schema: str = "visibility",
        *,
        read_only: bool = False,
        lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
        memory_limit: str | None = None,
        query_memory_limit: str | None = None,
    ) -> None:
        path = Path(path)
        if str(path) in ("", ":memory:"):
            raise ValueError("DuckDBWarehouse needs a file path (an in-memory database dies with each write)")
        if lock_timeout_seconds < 0:
            raise ValueError("lock_timeout_seconds must be >= 0")
        quoted(schema)  # validates the name
        self.path = path.expanduser().resolve()
        self.schema = schema
        self.read_only = read_only
        self.lock_timeout_seconds = lock_timeout_seconds
        #: DuckDB's memory budget for this handle's connections; None: DuckDB's default
        self._budget = MemoryBudget(memory_limit)
        #: the budget of a query on a connection outside ``memory_limit`` (``read_within``)
        self.query_memory_limit = query_memory_limit
        #: test-only fault hook, called inside the transaction after the delete, before the insert
        self._between_delete_and_insert: Callable[[], None] | None = None
        self._local = threading.local()  # .con: this thread's open session's connection, if any

    @property
    def memory_limit(self) -> str | None:
        """DuckDB's memory budget for this handle's connections (``64MB``); None: DuckDB's default."""
        return self._budget.limit

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "read-write"
        budget = f", memory_limit={self.memory_limit!r}" if self.memory_limit else ""
        return f"DuckDBWarehouse(path={str(self.path)!r}, schema={self.schema!r}, {mode}{budget})"

    # --- connections ------------------------------------------------------------------------------

    def _session(self) -> duckdb.DuckDBPyConnection | None:
        return getattr(self._local, "con", None)

    @contextmanager
    def session(self) -> Iterator[DuckDBWarehouse]:
        """Writes (and queries) of this thread share one connection until the block ends; each write
        is still its own transaction. The file lock is held meanwhile (other processes and threads
        wait for it): meant for landing steps. Sessions nest."""
        if self._session() is not None:
            yield self
            return
        with self._connect(read_only=self.read_only) as con:
            self._local.con = con
            try:
                yield self
            finally:
                current, self._local.con = self._local.con, None
                if current is not con:  # reopened after a fatal error: close the new one
                    current.close()

    @contextmanager
    def _connect(self, *, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if not read_only and self.read_only:
            raise PermissionError(f"{self!r} was opened read-only")
        session = self._session()
        if session is not None:
            yield session
            return
        if read_only and not self.path.exists():
            raise FileNotFoundError(f"DuckDB file {self.path} does not exist (nothing landed yet)")
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with hold_process_lock(self.path, timeout=self.lock_timeout_seconds):
            con = self._open(read_only=read_only)
            try:
                yield con
            finally:
                con.close()

    def _open(self, *, read_only: bool) -> duckdb.DuckDBPyConnection:
        timeout = self.lock_timeout_seconds
        try:
            con = connect_with_lock_wait(self.path, read_only=read_only, timeout=timeout)
        except duckdb.ConnectionException as exc:
            # this process already holds the file read-write elsewhere (DuckDB shares one instance
            # per file and process): reading through that instance takes no new lock
            if not read_only or "different configuration" not in str(exc):
                raise
            con = connect_with_lock_wait(self.path, read_only=False, timeout=timeout)
        _exec(con, "SET enable_progress_bar = false")  # no progress bars in run logs
        if self._budget.limit is not None:
            _exec(con, f"SET threads = {LANDING_THREADS}")
        if self._budget.active:
            self._budget.apply(con)
        return con

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._connect(read_only=False) as con:
            con.begin()
            try:
                yield con
                con.commit()
            except BaseException as exc:
                with contextlib.suppress(duckdb.Error):  # keep the original error
                    con.rollback()
                if _is_fatal(exc):
                    self._reopen_session(con)
                raise

    def _reopen_session(self, con: duckdb.DuckDBPyConnection) -> None:
        """After a fatal error DuckDB's instance must be closed before the file can be used again:
        an open session gets a new connection (a plain write's connection is closed by its caller)."""
        if self._session() is not con:
            return
        with contextlib.suppress(duckdb.Error):
            con.close()
        self._local.con = self._open(read_only=self.read_only)

    # --- catalog ----------------------------------------------------------------------------------

    @property
    def catalog(self) -> str:
        """The file's stem, as DuckDB names its catalog: names are qualified with it, or a schema named
        like the file (the default, ``visibility`` in ``visibility.duckdb``) would be ambiguous."""
        return self.path.name.split(".", 1)[0]

    def table_ref(self, table: str) -> str:
        return f"{quoted(self.catalog)}.{quoted(self.schema)}.{quoted(table)}"

    def _existing(
        self, con: duckdb.DuckDBPyConnection, table: str
    ) -> tuple[list[ExistingColumn] | None, str | None]:
        """The table's columns (None: no such table) and its comment."""
        found = _exec(
            con,
            "SELECT t.comment, c.column_name, c.data_type, c.comment "
            "FROM duckdb_tables() t JOIN duckdb_columns() c USING (database_name, schema_name, table_name) "
            "WHERE t.database_name = current_database() AND t.schema_name = $schema "
            "AND t.table_name = $table ORDER BY c.column_index",
            {"schema": self.schema, "table": table},
        )
        if not found:
            return None, None
        columns = [ExistingColumn(n, t, from_duckdb_type(t), c) for _, n, t, c in found]
        return columns, found[0][0]

    def _prepare_table(
        self, con: duckdb.DuckDBPyConnection, spec: TableSpec, rows_schema: pa.Schema
    ) -> LoadPlan:
        """Create or evolve the table (and a snapshot's ``_current`` view) inside the caller's
        transaction; returns the plan."""
        _exec(con, f"CREATE SCHEMA IF NOT EXISTS {quoted(self.catalog)}.{quoted(self.schema)}")
        existing, comment = self._existing(con, spec.name)
        plan = plan_load(
            spec,
            rows_schema,
            existing,
            table_label=f"{self.schema}.{spec.name}",
            type_name=duckdb_type,
            table_comment=None if comment == spec.description else spec.description,
        )
        for statement in table_statements(DIALECT, spec, plan, self.table_ref(spec.name)):
            _exec(con, statement)
        if spec.kind == "snapshot":
            self._write_view(
                con,
                current_view_name(spec),
                f"SELECT * FROM {self._relative_ref(spec.name)} WHERE {quoted(IS_CURRENT)}",
                current_view_description(spec),
                column_descriptions(spec, plan.table_columns),
                recreate=plan.create or bool(plan.columns),
            )
        return plan

    def _relative_ref(self, table: str) -> str:
        """A table named schema-relative, for view bodies: DuckDB 2.0 refuses a catalog-qualified name
        there when the schema and the file share a name (it is stored relative anyway)."""
        return f"{quoted(self.schema)}.{quoted(table)}"

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

    def _write_view(
        self,
        con: duckdb.DuckDBPyConnection,
        view: str,
        body: str,
        description: str,
        columns: Sequence[tuple[str, str]],
        *,
        recreate: bool = False,
    ) -> None:
        """Create, re-create or comment the view as the catalog shows it needs (``recreate``: its
        table's columns changed, so its stored column list is stale)."""
        work = view_work(None if recreate else self._view_shape(con, view), description, columns)
        for statement in view_statements(DIALECT, self.table_ref(view), body, work, description, columns):
            _exec(con, statement)

    # --- Warehouse hooks (the procedure: Warehouse in base.py) -------------------------------------

    def _ensure_view(self, view: ViewSpec) -> None:
        with self._transaction() as con:
            if any(self._existing(con, source)[0] is None for source in view.sources):
                return
            columns = [(c.name, c.description) for c in view.columns]
            self._write_view(con, view.name, view.select(self._relative_ref), view.description, columns)

    def _run_landing(
        self, spec: TableSpec, writes: Iterable[PartitionWrite], land: Callable[[], list[WriteResult]]
    ) -> list[WriteResult]:
        """Within ``memory_limit``, a landing that runs out of memory is retried once without it
        (:meth:`~resources.warehouse.duckdb_memory.MemoryBudget.run_landing`)."""
        return self._budget.run_landing(spec.name, writes, land, self._session)

    def _write_transaction(self, spec: TableSpec) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """One transaction on one connection: a landing of many writes commits whole or not at all."""
        return self._transaction()

    def _may_repeat_a_key(self, con: duckdb.DuckDBPyConnection, spec: TableSpec, data: pa.Table) -> bool:
        """Whether two rows share a key, counted by DuckDB within the handle's memory budget: Arrow's
        own count, outside it, raised a 30-day sync's peak memory by 15 % (bench/RESULTS.md)."""
        if data.num_rows < 2:
            return False
        keys = ", ".join(quoted(k) for k in spec.key)
        found = _exec_on_rows(
            con,
            f"SELECT count(*) FROM (SELECT 1 FROM {ROWS} GROUP BY {keys} HAVING count(*) > 1)",
            rows=data.select(list(spec.key)),
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
        """Per write: delete its scope, then insert its rows. With no key index, a key that already
        exists outside the scope is looked for here (unless the key holds the brand, date and
        engine: then a row in the scope cannot share its key with one outside)."""
        ref = self.table_ref(spec.name)
        key_holds_the_scope = {spec.brand_column, spec.engine_column, spec.date_column} <= set(spec.key)
        deleted = []
        for write in staged:
            assert write.scope is not None
            deleted.append(self._write(con, delete_scope_statement(ref, spec), scope_parameters(write.scope)))
            if self._between_delete_and_insert is not None:
                self._between_delete_and_insert()
            data = write.stage
            if not data.num_rows:
                continue
            if not key_holds_the_scope:  # after the delete, a row left with one of these keys is outside
                on = " AND ".join(f"t.{quoted(k)} = s.{quoted(k)}" for k in spec.key)
                sql = f"SELECT count(*) FROM {ref} t SEMI JOIN {ROWS} s ON {on}"
                clash = int(_exec_on_rows(con, sql, rows=data.select(list(spec.key)))[0][0])
                if clash:
                    raise outside_scope_error(spec, clash)
            self._write(con, insert_statement(ref, write.plan, ROWS), stamp_parameters(write.stamp), data)
        return deleted

    def _apply_merge(
        self,
        con: duckdb.DuckDBPyConnection,
        spec: TableSpec,
        staged: StagedWrite,
        retire: SnapshotScope | None,
    ) -> int:
        ref, stamp = self.table_ref(spec.name), staged.stamp
        upsert = upsert_statement(ref, spec, staged.plan, ROWS)
        self._write(con, upsert, stamp_parameters(stamp), staged.stage)
        if retire is None:
            return 0
        return self._write(con, retire_statement(ref, retire), stamp_parameters(stamp, retire))

    def _write(
        self, con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any], rows: pa.Table | None = None
    ) -> int:
        """Run ``sql`` (``:name`` parameters; it reads ``rows`` as :data:`ROWS`); the rows it changed."""
        native, values = self._bind(sql, params)
        found = _exec(con, native, values) if rows is None else _exec_on_rows(con, native, values, rows=rows)
        return int(found[0][0]) if found else 0

    def _create_handoffs(self, ddl: str) -> None:
        with self._transaction() as con:
            _exec(con, f"CREATE SCHEMA IF NOT EXISTS {quoted(self.catalog)}.{quoted(self.schema)}")
            _exec(con, ddl)

    def _run_statement(self, sql: str, params: dict[str, Any]) -> int:
        """Under the file lock, in one transaction: atomic against every other process's writes."""
        with self._transaction() as con:
            rows = _exec(con, sql, params)
        return int(rows[0][0]) if rows else 0

    # --- queries ----------------------------------------------------------------------------------

    def _placeholder(self, name: str) -> str:
        return f"${name}"

    def _run_query(self, sql: str, params: dict[str, Any]) -> pa.Table:
        """On a read-only connection (the session's, in a session)."""
        with self._connect(read_only=True) as con:
            limit = None if self._budget.active else self.query_memory_limit
            if limit is None:
                return con.sql(sql, params=params or None).to_arrow_table()
            return read_within(con, limit, lambda: con.sql(sql, params=params or None).to_arrow_table())

    def close(self) -> None:
        """Nothing to release: connections live only for one call or one :meth:`session`."""

    def check_connection(self) -> None:
        """The file's folder can be written (DuckDB writes its WAL and temporary files there), and an
        existing file is a DuckDB database this process can read, write and open (a file another
        process holds is only reported, since writes wait for it). A new file is left to the first
        write; a reader checks the file only."""
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
        if header[8:12] != b"DUCK":  # DuckDB's magic bytes
            raise self.config_error(
                "exists but is not a DuckDB database (it does not start with DuckDB's header): point "
                "VISIBILITY_WAREHOUSE at a DuckDB file, or at a path that does not exist yet"
            )
        if not self.read_only:
            for target in (path, path.with_name(path.name + ".wal")):
                if target.exists() and not os.access(target, os.R_OK | os.W_OK):
                    raise self.config_error(f"cannot be written: {target} is not writable by this user")
        try:
            duckdb.connect(str(path), read_only=True).close()
        except duckdb.Error as exc:
            if isinstance(exc, duckdb.ConnectionException) and "different configuration" in str(exc):
                return  # this process has it open already
            if not is_lock_error(exc):
                raise self.config_error(
                    f"cannot be opened by DuckDB {duckdb.__version__}: {first_line(exc)}"
                ) from None
            log.warning(  # another process writes: the header said enough
                "DuckDB file %s is in use by %s; writes will wait for it (up to lock_timeout_seconds=%g s)",
                path,
                lock_holder(str(exc)),
                self.lock_timeout_seconds,
            )
