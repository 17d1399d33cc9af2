"""Postgres: SQLAlchemy 2 engine on psycopg 3; rows go in with COPY.

Every write is one transaction through a temporary stage table. An advisory lock per table makes
overlapping writes of one table (a daily run and a backfill) queue instead of failing on each
other's keys; DDL takes a second lock per schema.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.csv as pa_csv
from psycopg import sql as pgsql
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import SQLAlchemyError

from resources.warehouse.base import StagedWrite, Warehouse, outside_scope_error
from resources.warehouse.contract import IS_CURRENT, SnapshotScope, TableSpec, first_line
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
from resources.warehouse.types import from_postgres_type, postgres_type
from resources.warehouse.urls import POSTGRES_SCHEMES
from resources.warehouse.views import (
    ViewShape,
    ViewSpec,
    ViewWork,
    column_descriptions,
    current_view_description,
    current_view_name,
    view_work,
)

quoted = quote_identifier

#: Postgres silently truncates longer identifiers, which could merge two columns: refuse them.
MAX_IDENTIFIER_BYTES = 63
COPY_BATCH_ROWS = 65_536


def dialect(cur: psycopg.Cursor[Any]) -> SqlDialect:
    """Postgres' DDL: its type names, literals quoted by psycopg for ``cur``'s connection, and a
    primary key on every table."""
    return SqlDialect(postgres_type, literal=lambda text: pgsql.Literal(text).as_string(cur))


def postgres_sqlalchemy_url(url: str | URL) -> URL:
    """``postgresql://...`` (or ``postgres://``) -> a psycopg 3 SQLAlchemy URL, never echoing the password."""
    parsed: URL | None
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except Exception:  # sqlalchemy's error quotes the raw URL (and password): not even as a context
        parsed = None
    if parsed is None:
        raise ValueError("not a valid Postgres URL (postgresql://user:pass@host:port/db)")
    if parsed.drivername not in POSTGRES_SCHEMES:
        raise ValueError(f"unsupported Postgres URL scheme {parsed.drivername!r} (expected postgresql://)")
    if not parsed.database:
        raise ValueError(f"Postgres URL {parsed.render_as_string(hide_password=True)} names no database")
    return parsed.set(drivername="postgresql+psycopg")


def check_identifier(name: str, what: str) -> None:
    if len(name.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise ValueError(f"{what} {name!r} is longer than Postgres' {MAX_IDENTIFIER_BYTES}-byte limit")


def _array_item(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        value = value.isoformat()
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def array_literal(values: list[Any] | None) -> str | None:
    """A Postgres array literal (``{"a","b"}``) for COPY; items quoted and escaped."""
    if values is None:
        return None
    return "{" + ",".join(_array_item(v) for v in values) + "}"


def _copy_ready(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Lists -> array literals: Arrow's CSV writer writes every other landed type as Postgres reads it."""
    if not any(pa.types.is_list(f.type) or pa.types.is_large_list(f.type) for f in batch.schema):
        return batch
    arrays = [
        pa.array([array_literal(v) for v in col.to_pylist()], type=pa.string())
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type)
        else col
        for col in batch.columns
    ]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def copy_arrow(cur: psycopg.Cursor[Any], table_sql: str, data: pa.Table) -> None:
    """COPY ``data`` into ``table_sql`` as CSV, one Arrow batch at a time (bounded memory)."""
    cols = ", ".join(quoted(c) for c in data.column_names)
    options = pa_csv.WriteOptions(include_header=False)
    with cur.copy(f"COPY {table_sql} ({cols}) FROM STDIN (FORMAT csv)") as copy:  # type: ignore[arg-type]
        for batch in data.to_batches(max_chunksize=COPY_BATCH_ROWS):
            buf = io.BytesIO()
            pa_csv.write_csv(_copy_ready(batch), buf, options)
            copy.write(buf.getbuffer())


class PostgresWarehouse(Warehouse):
    """A Postgres schema; each write is one transaction (COPY into a temp stage, then SQL)."""

    def __init__(self, url: str | URL, schema: str = "visibility") -> None:
        self._url = postgres_sqlalchemy_url(url)
        quoted(schema)
        check_identifier(schema, "schema name")
        self.schema = schema
        self._engine = create_engine(self._url, pool_pre_ping=True, pool_size=2, max_overflow=2)
        #: test-only fault hook, called inside the transaction after the delete, before the insert
        self._between_delete_and_insert: Callable[[], None] | None = None

    @property
    def url(self) -> str:
        """The server URL with the password masked."""
        return self._url.render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"PostgresWarehouse(url={self.url!r}, schema={self.schema!r})"

    # --- connections ------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        """One SQLAlchemy transaction; yields a psycopg cursor on its connection (COPY needs it)."""
        with self._engine.begin() as conn:
            raw = conn.connection.driver_connection
            assert isinstance(raw, psycopg.Connection)
            with raw.cursor() as cur:
                yield cur

    # --- catalog ----------------------------------------------------------------------------------

    def table_ref(self, table: str) -> str:
        return f"{quoted(self.schema)}.{quoted(table)}"

    def _existing(
        self, cur: psycopg.Cursor[Any], table: str
    ) -> tuple[list[ExistingColumn] | None, str | None]:
        """The table's columns (None: no such table) and its comment."""
        cur.execute(
            "SELECT obj_description(c.oid, 'pg_class'), a.attname, format_type(a.atttypid, a.atttypmod), "
            "col_description(c.oid, a.attnum) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p') ORDER BY a.attnum",
            (self.schema, table),
        )
        found = cur.fetchall()
        if not found:
            return None, None
        return [ExistingColumn(n, t, from_postgres_type(t), c) for _, n, t, c in found], found[0][0]

    def _view_shape(self, cur: psycopg.Cursor[Any], view: str) -> ViewShape | None:
        cur.execute(
            "SELECT obj_description(c.oid, 'pg_class'), a.attname, col_description(c.oid, a.attnum) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = 'v' ORDER BY a.attnum",
            (self.schema, view),
        )
        found = cur.fetchall()
        if not found:
            return None
        return ViewShape(found[0][0], tuple((n, c) for _, n, c in found if n is not None))

    def _lock_ddl(self, cur: psycopg.Cursor[Any]) -> None:
        """Serialise the DDL of this schema's writers (then decide again on what is now committed)."""
        cur.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"visibility-ddl:{self.schema}",)
        )

    def _plan(self, cur: psycopg.Cursor[Any], spec: TableSpec, rows_schema: pa.Schema) -> LoadPlan:
        existing, comment = self._existing(cur, spec.name)
        return plan_load(
            spec,
            rows_schema,
            existing,
            table_label=f"{self.schema}.{spec.name}",
            type_name=postgres_type,
            table_comment=None if comment == spec.description else spec.description,
        )

    def _prepare_table(self, cur: psycopg.Cursor[Any], spec: TableSpec, rows_schema: pa.Schema) -> LoadPlan:
        """Create or evolve the table (and a snapshot's ``_current`` view) inside the caller's
        transaction; returns the plan. Only a write that changes the catalog takes the DDL lock."""
        for name in [spec.name, current_view_name(spec), *rows_schema.names, *(c.name for c in spec.columns)]:
            check_identifier(name, "identifier")
        plan = self._plan(cur, spec, rows_schema)
        if not (plan.create or plan.columns or plan.comments or self._current_view_work(cur, spec, plan)):
            return plan
        # DDL: serialise writers of this schema, then decide again on what is now committed
        self._lock_ddl(cur)
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted(self.schema)}")
        plan = self._plan(cur, spec, rows_schema)
        ref = self.table_ref(spec.name)
        statements = table_statements(dialect(cur), spec, plan, ref) + view_statements(
            dialect(cur),
            self.table_ref(current_view_name(spec)),
            f"SELECT * FROM {ref} WHERE {quoted(IS_CURRENT)}",
            self._current_view_work(cur, spec, plan),
            current_view_description(spec),
            column_descriptions(spec, plan.table_columns),
        )
        for statement in statements:
            cur.execute(statement)  # type: ignore[arg-type]
        if not plan.create and {c.name for c in plan.columns} & set(spec.key):
            self._rekey(cur, spec)
        return plan

    def _current_view_work(self, cur: psycopg.Cursor[Any], spec: TableSpec, plan: LoadPlan) -> ViewWork:
        if spec.kind != "snapshot":
            return None
        if plan.create or plan.columns:
            return "create"
        columns = column_descriptions(spec, plan.table_columns)
        return view_work(
            self._view_shape(cur, current_view_name(spec)), current_view_description(spec), columns
        )

    def _rekey(self, cur: psycopg.Cursor[Any], spec: TableSpec) -> None:
        """Move the primary key to the spec's key once a key column was added (its rows filled)."""
        cur.execute(
            "SELECT con.conname, array_agg(a.attname::text ORDER BY k.n) FROM pg_constraint con "
            "CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, n) "
            "JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum "
            "WHERE con.contype = 'p' AND con.conrelid = %(ref)s::regclass GROUP BY con.conname",
            {"ref": self.table_ref(spec.name)},
        )
        found = cur.fetchone()
        if found is not None and list(found[1]) == list(spec.key):
            return
        ref = self.table_ref(spec.name)
        drop = f"DROP CONSTRAINT {quoted(found[0])}, " if found is not None else ""
        cur.execute(f"ALTER TABLE {ref} {drop}ADD PRIMARY KEY ({', '.join(quoted(k) for k in spec.key)})")  # type: ignore[arg-type]

    def _lock_table(self, cur: psycopg.Cursor[Any], table: str) -> None:
        """Serialise writers of one table until commit: at READ COMMITTED a second replace of
        overlapping rows would not see the first one's inserts when it deletes, and fail on their keys.
        Taken before the schema's DDL lock, always in that order, so writers cannot deadlock."""
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self.schema}.{table}",))

    # --- Warehouse hooks (the procedure: Warehouse in base.py) -------------------------------------

    view_errors = (psycopg.Error, SQLAlchemyError)

    def _ensure_view(self, view: ViewSpec) -> None:
        for name in (view.name, *view.sources, *view.column_names):
            check_identifier(name, "identifier")
        columns = tuple((c.name, c.description) for c in view.columns)
        with self._transaction() as cur:
            if any(self._existing(cur, source)[0] is None for source in view.sources):
                return
            if view_work(self._view_shape(cur, view.name), view.description, columns) is None:
                return
            self._lock_ddl(cur)
            work = view_work(self._view_shape(cur, view.name), view.description, columns)
            body = view.select(self.table_ref)
            ref = self.table_ref(view.name)
            for statement in view_statements(dialect(cur), ref, body, work, view.description, columns):
                cur.execute(statement)  # type: ignore[arg-type]

    @contextmanager
    def _write_transaction(self, spec: TableSpec) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction on one connection, holding the table's advisory lock from the first write
        to the commit (and the schema's DDL lock once a write changed the table's shape)."""
        with self._transaction() as cur:
            self._lock_table(cur, spec.name)
            yield cur

    def _stage(self, cur: psycopg.Cursor[Any], spec: TableSpec, plan: LoadPlan, data: pa.Table) -> str:
        """COPY ``data`` into a temp table shaped like the target's load columns; returns its name."""
        stage = quoted(f"_visibility_stage_{uuid.uuid4().hex}")
        cols = ", ".join(quoted(c) for c in plan.load_columns)
        cur.execute(
            f"CREATE TEMP TABLE {stage} ON COMMIT DROP AS "  # type: ignore[arg-type]
            f"SELECT {cols} FROM {self.table_ref(spec.name)} WITH NO DATA"
        )
        copy_arrow(cur, stage, data)
        return stage

    def _apply_replace(
        self, cur: psycopg.Cursor[Any], spec: TableSpec, staged: Sequence[StagedWrite]
    ) -> list[int]:
        """Per write: delete its scope, insert its stage, drop the stage (so a long landing holds one
        chunk's stage at a time). A key outside the scope fails on the table's primary key."""
        ref = self.table_ref(spec.name)
        deleted = []
        for write in staged:
            assert write.scope is not None
            deleted.append(self._write(cur, delete_scope_statement(ref, spec), scope_parameters(write.scope)))
            if self._between_delete_and_insert is not None:
                self._between_delete_and_insert()
            try:
                self._write(
                    cur, insert_statement(ref, write.plan, write.stage), stamp_parameters(write.stamp)
                )
            except psycopg.errors.UniqueViolation as exc:  # the transaction rolls back
                raise outside_scope_error(spec, detail=exc.diag.message_detail) from exc
            cur.execute(f"DROP TABLE {write.stage}")  # type: ignore[arg-type]
        return deleted

    def _apply_merge(
        self, cur: psycopg.Cursor[Any], spec: TableSpec, staged: StagedWrite, retire: SnapshotScope | None
    ) -> int:
        ref = self.table_ref(spec.name)
        self._write(
            cur, upsert_statement(ref, spec, staged.plan, staged.stage), stamp_parameters(staged.stamp)
        )
        if retire is None:
            return 0
        return self._write(cur, retire_statement(ref, retire), stamp_parameters(staged.stamp, retire))

    def _write(self, cur: psycopg.Cursor[Any], sql: str, params: dict[str, Any]) -> int:
        """Run ``sql`` (``:name`` parameters) on ``cur``; the rows it changed."""
        cur.execute(*self._bind(sql, params))
        return max(cur.rowcount, 0)

    def _create_handoffs(self, ddl: str) -> None:
        with self._transaction() as cur:
            self._lock_ddl(cur)  # two runs creating it at once would collide in the catalog
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted(self.schema)}")
            cur.execute(ddl)

    def _run_statement(self, sql: str, params: dict[str, Any]) -> int:
        with self._transaction() as cur:
            cur.execute(sql, params)
            return cur.rowcount

    # --- queries ----------------------------------------------------------------------------------

    #: psycopg reads ``%`` as a placeholder marker once parameters are given
    percent_is_placeholder = True

    def _placeholder(self, name: str) -> str:
        return f"%({name})s"

    def _run_query(self, sql: str, params: dict[str, Any]) -> pa.Table:
        """In a read-only transaction, through the driver (psycopg's ``%(name)s``)."""
        with self._engine.connect() as conn:
            conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            result = conn.exec_driver_sql(sql, params or None)  # type: ignore[arg-type]
            names = list(result.keys())
            rows = result.fetchall()
        arrays = [pa.array([r[i] for r in rows]) for i in range(len(names))]
        return pa.Table.from_arrays(arrays, names=names)

    def check_connection(self) -> None:
        """The server answers, is not read-only (a standby), and this user may create tables in the
        schema (or create the schema); else a :class:`WarehouseConfigError` naming
        ``VISIBILITY_WAREHOUSE``, with the password masked."""
        try:
            with self._engine.connect() as conn:
                found = conn.execute(
                    text(
                        "SELECT current_user AS who, current_setting('transaction_read_only') = 'on' AS ro, "
                        "has_database_privilege(current_database(), 'CREATE') AS may_create_schema, "
                        "(SELECT has_schema_privilege(n.oid, 'CREATE') "
                        "AND has_schema_privilege(n.oid, 'USAGE') FROM pg_namespace n "
                        "WHERE n.nspname = :schema) AS may_write_schema"
                    ),
                    {"schema": self.schema},
                ).one()
        except Exception as exc:
            detail = first_line(exc)
            if self._url.password:
                detail = detail.replace(self._url.password, "***")
            raise self.config_error(f"cannot be reached ({type(exc).__name__}: {detail})") from None
        if found.ro:
            raise self.config_error(
                "is read-only (a standby, or default_transaction_read_only): writes would fail"
            )
        if found.may_write_schema is None and not found.may_create_schema:
            raise self.config_error(
                f"has no schema {self.schema!r} and user {found.who!r} may not create it "
                "(CREATE on the database); create it, or set VISIBILITY_SCHEMA to one the user may write"
            )
        if found.may_write_schema is False:
            raise self.config_error(
                f"does not let user {found.who!r} create tables in schema {self.schema!r} "
                "(USAGE and CREATE on the schema)"
            )

    def close(self) -> None:
        self._engine.dispose()
