"""BigQuery: Arrow -> Parquet -> a staging table, then one transaction (replace) or one MERGE (snapshot).

The table change is server-side and atomic, so a client crash leaves the previous rows (staging
tables expire by themselves). BigQuery cancels one of two jobs changing a table at once, so that
step alone is retried (:func:`retry_concurrent`). Values are always query parameters, never SQL text.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from google.api_core.exceptions import GoogleAPIError, NotFound
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from resources.warehouse.base import StagedWrite, Warehouse
from resources.warehouse.contract import (
    FIRST_SEEN_AT,
    IS_CURRENT,
    LAST_SEEN_AT,
    LOADED_AT,
    RUN_ID,
    SnapshotScope,
    TableSpec,
    system_columns,
)
from resources.warehouse.handoffs import HandoffDialect
from resources.warehouse.schema_evolution import ExistingColumn, LoadPlan, plan_load
from resources.warehouse.sql import added_column_default, scope_parameters, stamp_parameters
from resources.warehouse.types import (
    Kind,
    SqlType,
    bigquery_type,
    from_bigquery_type,
    sql_type_or_default,
)
from resources.warehouse.views import (
    ViewSpec,
    column_descriptions,
    current_view_description,
    current_view_name,
)
from resources.warehouse.write_checks import retires

if TYPE_CHECKING:
    from google.cloud import bigquery

#: Orphaned staging tables (a crashed write) delete themselves after this long.
STAGING_EXPIRATION = dt.timedelta(hours=6)
STAGING_PREFIX = "_visibility_staging_"
#: Script variable holding the partition replace's deleted-row count.
_DELETED_VAR = "_visibility_rows_deleted"
#: Column types BigQuery can cluster by (FLOAT64 and arrays cannot).
_CLUSTERABLE = frozenset({Kind.BOOLEAN, Kind.BIGINT, Kind.VARCHAR, Kind.DATE, Kind.TIMESTAMPTZ})
_MAX_CLUSTER_COLUMNS = 4

# --- names and types (pure) ----------------------------------------------------------------------


def quote_identifier(name: str) -> str:
    """A backquoted BigQuery identifier; backquotes and backslashes inside are escaped."""
    if not isinstance(name, str) or not name or "\x00" in name or "\n" in name or "\r" in name:
        raise ValueError(f"invalid BigQuery identifier {name!r}")
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def qualified_name(project: str, dataset: str, table: str) -> str:
    """``project``.``dataset``.``table``, each part quoted on its own (project ids may hold dashes)."""
    return ".".join(quote_identifier(p) for p in (project, dataset, table))


def type_name(st: SqlType) -> str:
    """BigQuery's spelling of a logical type: ``INT64``, ``ARRAY<STRING>``, ... (for messages)."""
    bq = bigquery_type(st)
    return _field_type_name(bq.field_type, bq.mode)


def _field_type_name(field_type: str, mode: str | None) -> str:
    return f"ARRAY<{field_type}>" if (mode or "NULLABLE").upper() == "REPEATED" else field_type


def schema_field(name: str, st: SqlType, description: str | None = None) -> bigquery.SchemaField:
    """A NULLABLE (or REPEATED) field: the writer checks keys, and BigQuery adds only nullable columns."""
    from google.cloud import bigquery

    bq = bigquery_type(st)
    return bigquery.SchemaField(name, bq.field_type, mode=bq.mode, description=description)


def existing_columns(schema: Sequence[bigquery.SchemaField]) -> list[ExistingColumn]:
    """A BigQuery table schema in the shared planner's terms (foreign types, e.g. RECORD, map to None)."""
    return [
        ExistingColumn(
            name=f.name,
            engine_type=_field_type_name(f.field_type, f.mode),
            type=from_bigquery_type(f.field_type, f.mode or "NULLABLE"),
            comment=f.description,
        )
        for f in schema
    ]


def table_schema(
    spec: TableSpec, plan: LoadPlan, existing: Sequence[bigquery.SchemaField] | None
) -> list[bigquery.SchemaField]:
    """The table's full schema after ``plan``: existing fields (described), then added ones."""
    if existing is None:
        fields = [schema_field(c.name, c.type, c.description) for c in plan.columns]
        return fields + [
            schema_field(c.name, sql_type_or_default(c.type), c.description) for c in system_columns(spec)
        ]
    descriptions = {c.name: c.description for c in (*spec.columns, *system_columns(spec), *plan.columns)}
    fields = [_described(f, descriptions.get(f.name, f.description)) for f in existing]
    names = {f.name for f in existing}
    fields += [schema_field(c.name, c.type, c.description) for c in plan.columns if c.name not in names]
    return fields


def _described(f: bigquery.SchemaField, description: str | None) -> bigquery.SchemaField:
    """``f`` with ``description`` (``f`` itself when it already has it)."""
    from google.cloud import bigquery

    if description == f.description:
        return f
    info = f.to_api_repr()
    info["description"] = description
    return bigquery.SchemaField.from_api_repr(info)


def staging_schema(plan: LoadPlan) -> list[bigquery.SchemaField]:
    """The staging table: the rows' columns as loaded from Parquet."""
    return [schema_field(name, st) for name, st in zip(plan.load_columns, plan.load_types, strict=True)]


def clustering_fields(spec: TableSpec, types: Mapping[str, SqlType]) -> list[str] | None:
    """The columns of ``spec.cluster_by`` the table has (the default names columns some tables lack);
    one BigQuery cannot cluster by (FLOAT64, arrays) is a spec error."""
    present = [name for name in spec.cluster_by if name in types]
    if len(present) > _MAX_CLUSTER_COLUMNS:
        raise ValueError(f"table {spec.name}: BigQuery clusters by at most 4 columns, got {present}")
    for name in present:
        st = types[name]
        if st.is_list or st.kind not in _CLUSTERABLE:
            raise ValueError(f"table {spec.name}: BigQuery cannot cluster by {name!r} ({type_name(st)})")
    return present or None


# --- SQL (pure) ----------------------------------------------------------------------------------


def scope_predicate(spec: TableSpec, suffix: str = "") -> str:
    """Rows of the partition scope (the date bounds prune partitions); ``suffix`` names the
    parameters of one write of several (``@brands_0``, ...)."""
    assert spec.date_column is not None
    quoted = quote_identifier
    return (
        f"{quoted(spec.brand_column)} IN UNNEST(@brands{suffix}) "
        f"AND {quoted(spec.date_column)} >= @start{suffix} AND {quoted(spec.date_column)} < @end{suffix} "
        f"AND {quoted(spec.engine_column)} IN UNNEST(@engines{suffix})"
    )


def _deleted_var(i: int) -> str:
    return f"{_DELETED_VAR}_{i}"


def replace_script(
    target: str, staged: Sequence[tuple[str, LoadPlan]], spec: TableSpec, fault_sql: str | None = None
) -> str:
    """One multi-statement transaction for a whole landing: per staged write, count and delete its scope's
    rows, then insert. ``fault_sql`` (tests only) runs between the last write's DELETE and INSERT.
    """
    quoted = quote_identifier
    lines = [f"DECLARE {_deleted_var(i)} INT64 DEFAULT 0;" for i in range(len(staged))]
    lines.append("BEGIN TRANSACTION;")
    for i, (staging, plan) in enumerate(staged):
        where = scope_predicate(spec, f"_{i}")
        cols = ", ".join(quoted(c) for c in plan.load_columns)
        lines += [
            f"SET {_deleted_var(i)} = (SELECT COUNT(*) FROM {target} WHERE {where});",
            f"DELETE FROM {target} WHERE {where};",
        ]
        if fault_sql and i == len(staged) - 1:
            lines.append(fault_sql.rstrip(";") + ";")
        lines.append(
            f"INSERT INTO {target} ({cols}, {quoted(LOADED_AT)}, {quoted(RUN_ID)}) "
            f"SELECT {cols}, @ts_{i}, @run_id FROM {staging};"
        )
    deleted = ", ".join(f"{_deleted_var(i)} AS rows_deleted_{i}" for i in range(len(staged)))
    lines += ["COMMIT TRANSACTION;", f"SELECT {deleted};"]
    return "\n".join(lines)


def merge_statement(
    target: str, staging: str, spec: TableSpec, plan: LoadPlan, scope: SnapshotScope | None
) -> str:
    """Upsert the staged rows by key and, within ``scope``, retire current rows the source lacks: one
    statement, atomic by itself."""
    quoted = quote_identifier
    on = " AND ".join(f"tgt.{quoted(k)} = src.{quoted(k)}" for k in spec.key)
    cols = plan.load_columns
    sets = [f"{quoted(c)} = src.{quoted(c)}" for c in cols if c not in spec.key]
    sets += [f"{quoted(c)} = NULL" for c in plan.null_columns]
    sets += [
        f"{quoted(LOADED_AT)} = @ts",
        f"{quoted(RUN_ID)} = @run_id",
        f"{quoted(IS_CURRENT)} = TRUE",
        f"{quoted(LAST_SEEN_AT)} = @ts",
    ]
    insert_cols = [quoted(c) for c in (*cols, LOADED_AT, RUN_ID, IS_CURRENT, FIRST_SEEN_AT, LAST_SEEN_AT)]
    insert_vals = [f"src.{quoted(c)}" for c in cols] + ["@ts", "@run_id", "TRUE", "@ts", "@ts"]
    sql = (
        f"MERGE {target} AS tgt USING {staging} AS src ON {on}\n"
        f"WHEN MATCHED THEN UPDATE SET {', '.join(sets)}\n"
        f"WHEN NOT MATCHED BY TARGET THEN INSERT ({', '.join(insert_cols)}) VALUES ({', '.join(insert_vals)})"
    )
    if retires(scope):
        assert scope is not None
        condition = f"tgt.{quoted(IS_CURRENT)}"
        if scope.column is not None:
            condition += f" AND tgt.{quoted(scope.column)} IN UNNEST(@values)"
        sql += (
            f"\nWHEN NOT MATCHED BY SOURCE AND {condition} THEN UPDATE SET "
            f"{quoted(IS_CURRENT)} = FALSE, {quoted(LOADED_AT)} = @ts, {quoted(RUN_ID)} = @run_id"
        )
    return sql


# --- parameters (pure) ---------------------------------------------------------------------------


#: Python types -> BigQuery parameter types (a bool is an int: it comes first).
_PARAM_TYPES = (
    (bool, "BOOL"),
    (int, "INT64"),
    (float, "FLOAT64"),
    (str, "STRING"),
    (bytes, "BYTES"),
    (dt.date, "DATE"),
)


def _param_type(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return "TIMESTAMP" if value.tzinfo is not None else "DATETIME"
    for kind, name in _PARAM_TYPES:
        if isinstance(value, kind):
            return name
    raise TypeError(f"no BigQuery parameter type for {type(value).__name__}")


def query_parameter(name: str, value: Any) -> Any:
    """A named query parameter, typed by the Python value; a sequence is an ARRAY parameter (typed by
    its first non-null item, or STRING)."""
    from google.cloud import bigquery

    if isinstance(value, list | tuple):
        first = next((v for v in value if v is not None), None)
        return bigquery.ArrayQueryParameter(
            name, "STRING" if first is None else _param_type(first), list(value)
        )
    if value is None:
        return bigquery.ScalarQueryParameter(name, "STRING", None)
    return bigquery.ScalarQueryParameter(name, _param_type(value), value)


def _job_config(params: Mapping[str, Any]) -> bigquery.QueryJobConfig:
    """A query job whose parameters are ``params``, each typed by its Python value."""
    from google.cloud import bigquery

    return bigquery.QueryJobConfig(query_parameters=[query_parameter(k, v) for k, v in params.items()])


def fill_added_column(
    ref: str, spec: TableSpec, column: str, st: SqlType
) -> tuple[str, dict[str, Any]] | None:
    """The ``UPDATE`` giving the rows landed before ``column`` (of type ``st``) existed its default,
    the value a parameter (BigQuery's string literals escape with backslashes, not the standard's
    doubled quote); None when the column has no default."""
    default = added_column_default(spec, column, literal=str)  # the raw value, never spliced into SQL
    if default is None:
        return None
    name = quote_identifier(column)
    sql = f"UPDATE {ref} SET {name} = CAST(@added_default AS {type_name(st)}) WHERE {name} IS NULL"
    return sql, {"added_default": default}


def replace_parameters(writes: Sequence[StagedWrite]) -> dict[str, Any]:
    """The values of :func:`replace_script`'s parameters: each write's scope and stamp (suffixed
    ``_i``), and the landing's run."""
    values: dict[str, Any] = {"run_id": writes[0].stamp.run_id}
    for i, write in enumerate(writes):
        assert write.scope is not None
        each = {**scope_parameters(write.scope), "ts": write.stamp.loaded_at}
        values |= {f"{name}_{i}": value for name, value in each.items()}
    return values


# --- load encoding and retries (pure) ------------------------------------------------------------


def drop_null_list_items(data: pa.Table) -> pa.Table:
    """BigQuery arrays cannot hold NULL (a load would fail): null items are dropped, only in the list
    columns that hold one; a NULL list stays NULL (BigQuery stores it as an empty array)."""
    for i, f in enumerate(data.schema):
        if not (pa.types.is_list(f.type) or pa.types.is_large_list(f.type)):
            continue
        column = data.column(i)
        if pc.list_flatten(column).null_count == 0:
            continue
        cleaned = [None if v is None else [x for x in v if x is not None] for v in column.to_pylist()]
        data = data.set_column(i, f, pa.array(cleaned, type=f.type))
    return data


T = TypeVar("T")

#: BigQuery cancels one of two transactions (or DML statements) that change the same table at once.
_CONCURRENT_MARKERS = ("concurrent update", "could not serialize access")


def is_concurrent_update(exc: BaseException) -> bool:
    """Whether BigQuery refused a statement only because another one changed the table meanwhile."""
    text = str(exc).lower()
    return any(marker in text for marker in _CONCURRENT_MARKERS)


def retry_concurrent(run: Callable[[], T], *, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``run`` again while it fails on a concurrent update, up to 5 times with jittered backoff. Safe:
    each attempt is a whole statement or transaction, and a cancelled one changed nothing.
    """
    retrying = Retrying(
        retry=retry_if_exception(is_concurrent_update),
        stop=stop_after_attempt(5),
        wait=wait_random_exponential(multiplier=1.0),
        sleep=sleep,
        reraise=True,
    )
    return retrying(run)


# --- Parquet -------------------------------------------------------------------------------------


def write_parquet(data: pa.Table, sink: IO[bytes]) -> None:
    """Parquet BigQuery reads back exactly: microsecond timestamps, standard 3-level lists."""
    pq.write_table(
        data,
        sink,
        coerce_timestamps="us",
        allow_truncated_timestamps=True,
        use_compliant_nested_type=True,
    )


# --- the engine ----------------------------------------------------------------------------------


class BigQueryWarehouse(Warehouse):
    """Tables in ``project.dataset``; partitioned by ``spec.date_column`` (DAY), clustered by
    ``cluster_by``. Without a ``client``, one is created on first use (Application Default
    Credentials)."""

    def __init__(
        self,
        project: str,
        dataset: str,
        *,
        client: bigquery.Client | None = None,
    ) -> None:
        quote_identifier(project)
        quote_identifier(dataset)
        self.project = project
        self.dataset = dataset
        self._client = client
        self._dataset_ready = False
        #: test-only fault hook: one SQL statement run inside the transaction after the DELETE
        self._between_delete_and_insert_sql: str | None = None

    def __repr__(self) -> str:
        return f"BigQueryWarehouse(project={self.project!r}, dataset={self.dataset!r})"

    @property
    def client(self) -> bigquery.Client:
        if self._client is None:
            from google.cloud import bigquery

            self._client = bigquery.Client(project=self.project)
        return self._client

    def table_ref(self, table: str) -> str:
        return qualified_name(self.project, self.dataset, table)

    def _table_id(self, table: str) -> str:
        return f"{self.project}.{self.dataset}.{table}"

    # --- catalog ----------------------------------------------------------------------------------

    def _ensure_dataset(self) -> None:
        if self._dataset_ready:
            return
        from google.cloud import bigquery

        try:
            self.client.get_dataset(f"{self.project}.{self.dataset}")
        except NotFound:
            self.client.create_dataset(bigquery.Dataset(f"{self.project}.{self.dataset}"), exists_ok=True)
        self._dataset_ready = True

    def _get_table(self, table: str) -> bigquery.Table | None:
        try:
            return self.client.get_table(self._table_id(table))
        except NotFound:
            return None

    def _prepare_table(self, staging: list[str], spec: TableSpec, rows_schema: pa.Schema) -> LoadPlan:
        """Create or evolve the table (and the snapshot view); raise SchemaMismatchError first."""
        from google.cloud import bigquery

        self._ensure_dataset()
        table = self._get_table(spec.name)
        existing = existing_columns(table.schema) if table is not None else None
        plan = plan_load(
            spec,
            rows_schema,
            existing,
            table_label=f"{self.project}.{self.dataset}.{spec.name}",
            type_name=type_name,
            table_comment=None
            if table is not None and table.description == spec.description
            else spec.description,
        )
        if table is None:
            new = bigquery.Table(self._table_id(spec.name), schema=table_schema(spec, plan, None))
            new.description = spec.description
            if spec.kind == "partitioned":
                new.time_partitioning = bigquery.TimePartitioning(
                    type_=bigquery.TimePartitioningType.DAY, field=spec.date_column
                )
            new.clustering_fields = clustering_fields(spec, {c.name: c.type for c in plan.columns})
            # a concurrent first write may create it meanwhile: from the same spec, so the same table
            self.client.create_table(new, exists_ok=True)
        elif plan.columns or plan.comments:
            self._evolve(spec, plan, table.schema)
        if spec.kind == "snapshot":  # re-issued when columns change, so its schema follows the table
            view = self._put_view(
                current_view_name(spec),
                f"SELECT * FROM {self.table_ref(spec.name)} WHERE {quote_identifier(IS_CURRENT)}",
                current_view_description(spec),
                refresh=table is None or bool(plan.columns),
            )
            self._describe_columns(view, dict(column_descriptions(spec, [f.name for f in view.schema])))
        return plan

    def _evolve(self, spec: TableSpec, plan: LoadPlan, schema: Sequence[bigquery.SchemaField]) -> None:
        """Add the plan's columns (DDL, one per statement, then a fill of their default), then patch
        the schema's descriptions through the API (DDL OPTIONS would need the text spliced into SQL)."""
        ref = self.table_ref(spec.name)
        for c in plan.columns:
            column = f"{quote_identifier(c.name)} {type_name(c.type)}"
            self.client.query(f"ALTER TABLE {ref} ADD COLUMN IF NOT EXISTS {column}").result()
            fill = fill_added_column(ref, spec, c.name, c.type)
            if fill is not None:  # BigQuery leaves the existing rows NULL: a key column needs a value
                self._run_statement(*fill)
        fresh = self.client.get_table(self._table_id(spec.name))
        fresh.schema = table_schema(spec, plan, schema)
        fresh.description = spec.description
        self.client.update_table(fresh, ["schema", "description"])

    def _put_view(self, name: str, query: str, description: str, *, refresh: bool = False) -> bigquery.Table:
        """The view as wanted: created, or its query and description updated when they differ."""
        from google.cloud import bigquery

        view = self._get_table(name)
        if view is None:
            new = bigquery.Table(self._table_id(name))
            new.view_query = query
            new.description = description
            view = self.client.create_table(new, exists_ok=True)
        elif refresh or view.description != description or view.view_query not in (None, query):
            view.view_query = query
            view.description = description
            view = self.client.update_table(view, ["view_query", "description"])
        if not view.schema:  # BigQuery derives a view's schema from its query: read it back
            view = self.client.get_table(self._table_id(name))
        return view

    def _describe_columns(self, view: bigquery.Table, wanted: Mapping[str, str]) -> None:
        """Patch the descriptions of the view's (derived) columns; its types stay BigQuery's."""
        fields = list(view.schema)
        if all(f.description == wanted.get(f.name, f.description) for f in fields):
            return
        view.schema = [_described(f, wanted.get(f.name, f.description)) for f in fields]
        self.client.update_table(view, ["schema"])

    # --- Warehouse hooks (the procedure: Warehouse in base.py) -------------------------------------

    view_errors = (GoogleAPIError,)

    def _ensure_view(self, view: ViewSpec) -> None:
        if any(self._get_table(source) is None for source in view.sources):
            return
        table = self._put_view(view.name, view.select(self.table_ref), view.description)
        self._describe_columns(table, {c.name: c.description for c in view.columns})

    handoff_dialect = HandoffDialect("STRING", "TIMESTAMP", primary_key=False, now="CURRENT_TIMESTAMP()")
    #: each look is a query job (billed at least 10 MB)
    handoff_poll_seconds = 5.0
    #: every write of a landing is staged first, then applied in ONE multi-statement transaction
    applies_landing_at_once = True

    @contextmanager
    def _write_transaction(self, spec: TableSpec) -> Iterator[list[str]]:
        """The staging tables (their names) of one write or landing, dropped afterwards whatever
        happened (the transaction is the script of :meth:`_apply_replace`, or the one ``MERGE``). A
        new column is DDL, outside transactions: a failed landing may leave it, empty (never rows)."""
        staging: list[str] = []
        try:
            yield staging
        finally:
            for name in staging:
                self.client.delete_table(self._table_id(name), not_found_ok=True)

    def _stage(self, staging: list[str], spec: TableSpec, plan: LoadPlan, data: pa.Table) -> str:
        """A new staging table loaded with ``data`` (one Parquet load job per write, one chunk in
        memory at a time); returns its name."""
        from google.cloud import bigquery

        name = f"{STAGING_PREFIX}{spec.name}_{uuid.uuid4().hex}"
        schema = staging_schema(plan)
        table = bigquery.Table(self._table_id(name), schema=schema)
        table.expires = dt.datetime.now(dt.UTC) + STAGING_EXPIRATION
        table.description = f"Staging for one write to {spec.name}; dropped after the write."
        self.client.create_table(table)
        staging.append(name)  # dropped at the end of the write, loaded or not
        config = bigquery.LoadJobConfig(
            source_format=bigquery.SourceFormat.PARQUET,
            schema=schema,
            # append into the table just created: keeps its expiration (a truncate may reset it)
            write_disposition=bigquery.WriteDisposition.WRITE_APPEND,
            create_disposition=bigquery.CreateDisposition.CREATE_NEVER,
        )
        parquet_options = bigquery.ParquetOptions()
        parquet_options.enable_list_inference = True
        config.parquet_options = parquet_options
        with tempfile.TemporaryFile(prefix="visibility-bq-") as f:
            write_parquet(drop_null_list_items(data), f)
            f.seek(0)
            self.client.load_table_from_file(f, self._table_id(name), job_config=config, rewind=True).result()
        return name

    def _apply_replace(self, staging: list[str], spec: TableSpec, staged: Sequence[StagedWrite]) -> list[int]:
        """Every staged write in ONE multi-statement transaction (:func:`replace_script`), retried on
        a concurrent update: the landing commits whole or not at all."""
        script = replace_script(
            self.table_ref(spec.name),
            [(self.table_ref(s.stage), s.plan) for s in staged],
            spec,
            fault_sql=self._between_delete_and_insert_sql,
        )
        config = _job_config(replace_parameters(staged))
        result = retry_concurrent(lambda: list(self.client.query(script, job_config=config).result()))
        deleted = result[0] if result else None
        return [
            int(deleted[f"rows_deleted_{i}"] or 0) if deleted is not None else 0 for i in range(len(staged))
        ]

    def _apply_merge(
        self, staging: list[str], spec: TableSpec, staged: StagedWrite, retire: SnapshotScope | None
    ) -> int:
        """One ``MERGE`` (upsert and retire-in-scope), retried on a concurrent update. Every source row
        touches exactly one target row, so the rows retired are the rows affected beyond those."""
        sql = merge_statement(
            self.table_ref(spec.name), self.table_ref(staged.stage), spec, staged.plan, retire
        )
        affected = self._run_statement(sql, stamp_parameters(staged.stamp, retire))
        return max(affected - staged.rows, 0)

    def _create_handoffs(self, ddl: str) -> None:
        self._ensure_dataset()
        self.client.query(ddl).result()

    def _run_statement(self, sql: str, params: Mapping[str, Any]) -> int:
        """One DML statement, retried on a concurrent update (a handoff's retry re-reads the row:
        still a compare-and-set); the rows it changed."""
        config = _job_config(params)

        def run() -> int:
            job = self.client.query(sql, job_config=config)
            job.result()
            return int(job.num_dml_affected_rows or 0)

        return retry_concurrent(run)

    # --- queries ----------------------------------------------------------------------------------

    def _placeholder(self, name: str) -> str:
        return f"@{name}"

    def _run_query(self, sql: str, params: dict[str, Any]) -> pa.Table:
        """Each value a typed parameter (:func:`query_parameter`; lists become ARRAY parameters)."""
        return self.client.query(sql, job_config=_job_config(params)).to_arrow(create_bqstorage_client=False)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
