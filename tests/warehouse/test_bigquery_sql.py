"""BigQuery's SQL and schema builders as pure functions: no server, no credentials.

These hold the guarantees that do not depend on a server: values never reach SQL text, identifiers
are always quoted, and the Arrow -> BigQuery schema mapping. tests/warehouse/test_bigquery.py runs
the same SQL for real (emulator, and real BigQuery when configured).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from google.cloud import bigquery

from resources.warehouse.base import StagedWrite, WriteStamp
from resources.warehouse.bigquery import (
    BigQueryWarehouse,
    clustering_fields,
    drop_null_list_items,
    existing_columns,
    fill_added_column,
    is_concurrent_update,
    merge_statement,
    qualified_name,
    query_parameter,
    quote_identifier,
    replace_parameters,
    replace_script,
    retires,
    retry_concurrent,
    staging_schema,
    table_schema,
    type_name,
    write_parquet,
)
from resources.warehouse.contract import Column, PartitionScope, SnapshotScope, TableSpec
from resources.warehouse.schema_evolution import LoadPlan, plan_load
from resources.warehouse.sql import stamp_parameters
from resources.warehouse.types import Kind, SqlType
from tests.warehouse.conftest import COMPETITORS, MENTIONS, mention_rows

TARGET = "`p`.`d`.`t`"
STAGING = "`p`.`d`.`s`"
HOSTILE = "x'); DROP TABLE t; -- `tick` \\ 日本"
STAMP = WriteStamp(run_id=HOSTILE, loaded_at=dt.datetime(2026, 10, 1, 12, tzinfo=dt.UTC))


def _plan(spec: TableSpec, schema: pa.Schema | None = None) -> LoadPlan:
    return plan_load(spec, schema or spec.arrow_schema, None, table_label="p.d.t", type_name=type_name)


def _params(params: list[Any]) -> dict[str, Any]:
    return {p.name: p.to_api_repr() for p in params}


# --- identifiers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("brand_id", "`brand_id`"),
        ("select", "`select`"),
        ("a`b", "`a\\`b`"),
        ("a\\b", "`a\\\\b`"),
        ("naïve 日本", "`naïve 日本`"),
    ],
)
def test_identifiers_are_backquoted_with_backquote_and_backslash_escaped(name: str, quoted: str) -> None:
    assert quote_identifier(name) == quoted


@pytest.mark.parametrize("name", ["", "a\x00b", "a\nb"])
def test_unquotable_identifiers_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        quote_identifier(name)


def test_table_names_quote_each_part_so_project_dashes_are_safe() -> None:
    assert qualified_name("my-proj", "ds", "t`x") == "`my-proj`.`ds`.`t\\`x`"


# --- schema mapping -------------------------------------------------------------------------------


def test_arrow_types_map_to_bigquery_types_and_modes() -> None:
    spec = TableSpec(
        name="t",
        description="all types",
        columns=(
            Column("id", pa.string(), "key", nullable=False),
            Column("flag", pa.bool_(), "b"),
            Column("n", pa.int64(), "i"),
            Column("x", pa.float64(), "f"),
            Column("day", pa.date32(), "d"),
            Column("at", pa.timestamp("us", tz="UTC"), "tz"),
            Column("tags", pa.list_(pa.string()), "list"),
            Column("counts", pa.list_(pa.int64()), "int list"),
        ),
        key=("id",),
        kind="snapshot",
    )
    fields = {f.name: (f.field_type, f.mode, f.description) for f in table_schema(spec, _plan(spec), None)}
    assert fields == {
        "id": ("STRING", "NULLABLE", "key"),
        "flag": ("BOOL", "NULLABLE", "b"),
        "n": ("INT64", "NULLABLE", "i"),
        "x": ("FLOAT64", "NULLABLE", "f"),
        "day": ("DATE", "NULLABLE", "d"),
        "at": ("TIMESTAMP", "NULLABLE", "tz"),
        "tags": ("STRING", "REPEATED", "list"),
        "counts": ("INT64", "REPEATED", "int list"),
        "_loaded_at": ("TIMESTAMP", "NULLABLE", fields["_loaded_at"][2]),
        "_run_id": ("STRING", "NULLABLE", fields["_run_id"][2]),
        "is_current": ("BOOL", "NULLABLE", fields["is_current"][2]),
        "first_seen_at": ("TIMESTAMP", "NULLABLE", fields["first_seen_at"][2]),
        "last_seen_at": ("TIMESTAMP", "NULLABLE", fields["last_seen_at"][2]),
    }
    assert all(v[2] for v in fields.values())  # every column is described
    assert type_name(SqlType(Kind.VARCHAR, is_list=True)) == "ARRAY<STRING>"


def test_staging_holds_every_column_as_its_target_type() -> None:
    fields = {f.name: (f.field_type, f.mode) for f in staging_schema(_plan(MENTIONS))}
    assert fields["tags"] == ("STRING", "REPEATED")
    assert fields["observed_at"] == ("TIMESTAMP", "NULLABLE")
    assert "_loaded_at" not in fields  # written by the statement, not loaded


def test_existing_schema_reads_legacy_names_and_marks_foreign_types() -> None:
    schema = [
        bigquery.SchemaField("a", "INTEGER"),
        bigquery.SchemaField("b", "FLOAT", description="x"),
        bigquery.SchemaField("c", "BOOLEAN"),
        bigquery.SchemaField("d", "STRING", mode="REPEATED"),
        bigquery.SchemaField("e", "NUMERIC"),
        bigquery.SchemaField("f", "RECORD", fields=[bigquery.SchemaField("g", "STRING")]),
    ]
    cols = {c.name: c for c in existing_columns(schema)}
    assert cols["a"].type == SqlType(Kind.BIGINT)
    assert cols["b"].type == SqlType(Kind.DOUBLE) and cols["b"].comment == "x"
    assert cols["c"].type == SqlType(Kind.BOOLEAN)
    assert cols["d"].type == SqlType(Kind.VARCHAR, is_list=True) and cols["d"].engine_type == "ARRAY<STRING>"
    assert cols["e"].type is None and cols["f"].type is None  # not managed by the writer


def test_existing_columns_keep_their_field_and_get_the_spec_description() -> None:
    spec = TableSpec(
        name="t",
        description="d",
        columns=(Column("id", pa.string(), "new text", nullable=False),),
        key=("id",),
        kind="snapshot",
    )
    system = [f for f in table_schema(spec, _plan(spec), None) if f.name != "id"]
    existing = [
        bigquery.SchemaField("id", "STRING", description="old text"),
        bigquery.SchemaField("legacy", "NUMERIC", description="kept"),
        *system,
    ]
    plan = plan_load(
        spec,
        pa.schema([("id", pa.string()), ("extra", pa.int64())]),
        existing_columns(existing),
        table_label="p.d.t",
        type_name=type_name,
    )
    fields = table_schema(spec, plan, existing)
    by_name = {f.name: f for f in fields}
    assert [f.name for f in fields][:2] == ["id", "legacy"]  # existing order first
    assert by_name["id"].description == "new text"
    assert (by_name["legacy"].field_type, by_name["legacy"].description) == ("NUMERIC", "kept")
    assert (by_name["extra"].field_type, by_name["extra"].mode) == ("INT64", "NULLABLE")


def test_clustering_uses_the_spec_columns_the_table_has() -> None:
    types = {c.name: SqlType(Kind.VARCHAR) for c in COMPETITORS.columns}
    assert clustering_fields(
        MENTIONS, {"brand_id": SqlType(Kind.VARCHAR), "engine": SqlType(Kind.VARCHAR)}
    ) == [
        "brand_id",
        "engine",
    ]
    assert clustering_fields(COMPETITORS, types) == ["brand_id"]  # the default's "engine" is absent
    assert clustering_fields(COMPETITORS, {"id": SqlType(Kind.VARCHAR)}) is None


@pytest.mark.parametrize("bad", [SqlType(Kind.DOUBLE), SqlType(Kind.VARCHAR, is_list=True)])
def test_clustering_by_a_type_bigquery_cannot_cluster_is_a_spec_error(bad: SqlType) -> None:
    with pytest.raises(ValueError, match="cannot cluster by 'brand_id'"):
        clustering_fields(MENTIONS, {"brand_id": bad, "engine": SqlType(Kind.VARCHAR)})


# --- partition replace ----------------------------------------------------------------------------


def test_replace_is_one_transaction_deleting_the_scope_before_inserting() -> None:
    sql = replace_script(TARGET, [(STAGING, _plan(MENTIONS))], MENTIONS)
    statements = [s.strip() for s in sql.split(";\n")]
    assert statements[0] == "DECLARE _visibility_rows_deleted_0 INT64 DEFAULT 0"
    assert statements[1] == "BEGIN TRANSACTION"
    assert statements[2].startswith(
        "SET _visibility_rows_deleted_0 = (SELECT COUNT(*) FROM `p`.`d`.`t` WHERE"
    )
    assert statements[3] == (
        "DELETE FROM `p`.`d`.`t` WHERE `brand_id` IN UNNEST(@brands_0) AND `checked_on` >= @start_0 "
        "AND `checked_on` < @end_0 AND `engine` IN UNNEST(@engines_0)"
    )
    assert statements[4].startswith("INSERT INTO `p`.`d`.`t` (`id`, `brand_id`, ")
    assert "`_loaded_at`, `_run_id`) SELECT " in statements[4]
    assert statements[4].endswith("@ts_0, @run_id FROM `p`.`d`.`s`")
    assert statements[5] == "COMMIT TRANSACTION"
    assert statements[6] == "SELECT _visibility_rows_deleted_0 AS rows_deleted_0;"


def test_a_landing_of_several_writes_is_one_transaction_in_write_order() -> None:
    staged = [("`p`.`d`.`s0`", _plan(MENTIONS)), ("`p`.`d`.`s1`", _plan(MENTIONS))]
    sql = replace_script(TARGET, staged, MENTIONS)
    assert sql.count("BEGIN TRANSACTION") == 1 and sql.count("COMMIT TRANSACTION") == 1
    order = [
        sql.index(s)
        for s in (
            "BEGIN TRANSACTION",
            "DELETE FROM `p`.`d`.`t` WHERE `brand_id` IN UNNEST(@brands_0)",
            "FROM `p`.`d`.`s0`;",
            "DELETE FROM `p`.`d`.`t` WHERE `brand_id` IN UNNEST(@brands_1)",
            "FROM `p`.`d`.`s1`;",
            "COMMIT TRANSACTION",
        )
    ]
    assert order == sorted(order)
    assert sql.endswith(
        "SELECT _visibility_rows_deleted_0 AS rows_deleted_0, _visibility_rows_deleted_1 AS rows_deleted_1;"
    )


def test_fault_hook_runs_inside_the_transaction_between_the_last_delete_and_insert() -> None:
    staged = [("`p`.`d`.`s0`", _plan(MENTIONS)), ("`p`.`d`.`s1`", _plan(MENTIONS))]
    sql = replace_script(TARGET, staged, MENTIONS, fault_sql="SELECT ERROR('x');")
    assert sql.count("SELECT ERROR('x');") == 1
    order = [
        sql.index(s)
        for s in (
            "BEGIN TRANSACTION",
            "FROM `p`.`d`.`s0`;",
            "@brands_1",
            "SELECT ERROR('x');",
            "FROM `p`.`d`.`s1`;",
        )
    ]
    assert order == sorted(order) and sql.index("COMMIT") > order[-1]


def test_replace_values_travel_only_as_typed_parameters() -> None:
    scope = PartitionScope((HOSTILE, "b2"), dt.date(2026, 10, 1), dt.date(2026, 10, 3), (HOSTILE,))
    later = PartitionScope(("b3",), dt.date(2026, 10, 3), dt.date(2026, 10, 4), ("chatgpt",))
    spec = MENTIONS
    sql = replace_script(TARGET, [(STAGING, _plan(spec)), (STAGING, _plan(spec))], spec)
    writes = [StagedWrite(_plan(spec), STAGING, STAMP, 1, 0, s) for s in (scope, later)]
    params = _params([query_parameter(k, v) for k, v in replace_parameters(writes).items()])
    assert HOSTILE not in sql and "2026" not in sql
    assert set(re.findall(r"@(\w+)", sql)) == set(params)
    assert params["brands_0"]["parameterType"] == {"type": "ARRAY", "arrayType": {"type": "STRING"}}
    assert [v["value"] for v in params["brands_0"]["parameterValue"]["arrayValues"]] == [HOSTILE, "b2"]
    assert [v["value"] for v in params["brands_1"]["parameterValue"]["arrayValues"]] == ["b3"]
    assert params["start_0"]["parameterType"]["type"] == "DATE"
    assert params["start_0"]["parameterValue"]["value"] == "2026-10-01"
    assert params["end_0"]["parameterValue"]["value"] == "2026-10-03"
    assert params["start_1"]["parameterValue"]["value"] == "2026-10-03"
    assert params["ts_0"]["parameterType"]["type"] == "TIMESTAMP"
    assert params["run_id"]["parameterValue"]["value"] == HOSTILE


def test_an_added_column_default_fills_old_rows_as_a_parameter_never_as_sql_text() -> None:
    """A standard literal ('' for a quote) is not BigQuery's (backslash escapes): the value travels alone."""
    added = Column("scope_kind", pa.string(), "kind of scope", default=HOSTILE)
    spec = dataclasses.replace(MENTIONS, columns=(*MENTIONS.columns, added))
    fill = fill_added_column(TARGET, spec, "scope_kind", SqlType(Kind.VARCHAR))

    assert fill is not None
    sql, params = fill
    assert sql == (
        f"UPDATE {TARGET} SET `scope_kind` = CAST(@added_default AS STRING) WHERE `scope_kind` IS NULL"
    )
    assert HOSTILE not in sql
    assert params == {"added_default": HOSTILE}
    assert fill_added_column(TARGET, spec, MENTIONS.columns[0].name, SqlType(Kind.VARCHAR)) is None


# --- snapshot merge -------------------------------------------------------------------------------


def test_merge_upserts_by_key_and_retires_only_current_rows_of_the_scope() -> None:
    sql = merge_statement(
        TARGET, STAGING, COMPETITORS, _plan(COMPETITORS), SnapshotScope("brand_id", ("b1",))
    )
    lines = sql.splitlines()
    assert lines[0] == (
        "MERGE `p`.`d`.`t` AS tgt USING `p`.`d`.`s` AS src "
        "ON tgt.`brand_id` = src.`brand_id` AND tgt.`id` = src.`id`"
    )
    assert lines[1].startswith("WHEN MATCHED THEN UPDATE SET `name` = src.`name`, `domain` = src.`domain`")
    assert "`is_current` = TRUE, `last_seen_at` = @ts" in lines[1]
    assert "first_seen_at" not in lines[1]  # kept from the first sighting
    assert lines[2].startswith("WHEN NOT MATCHED BY TARGET THEN INSERT (")
    assert lines[2].endswith(
        "VALUES (src.`brand_id`, src.`id`, src.`name`, src.`domain`, @ts, @run_id, TRUE, @ts, @ts)"
    )
    assert lines[3] == (
        "WHEN NOT MATCHED BY SOURCE AND tgt.`is_current` AND tgt.`brand_id` IN UNNEST(@values) "
        "THEN UPDATE SET `is_current` = FALSE, `_loaded_at` = @ts, `_run_id` = @run_id"
    )
    assert len(lines) == 4


@pytest.mark.parametrize(
    ("scope", "retire_clause"),
    [
        (None, None),
        (SnapshotScope("brand_id", ()), None),
        (SnapshotScope(), "WHEN NOT MATCHED BY SOURCE AND tgt.`is_current` THEN"),
    ],
)
def test_merge_retires_nothing_without_scope_and_everything_absent_for_a_whole_table_scope(
    scope: SnapshotScope | None, retire_clause: str | None
) -> None:
    sql = merge_statement(TARGET, STAGING, COMPETITORS, _plan(COMPETITORS), scope)
    assert retires(scope) is (retire_clause is not None)
    if retire_clause is None:
        assert "NOT MATCHED BY SOURCE" not in sql
    else:
        assert retire_clause in sql


def test_merge_nulls_vanished_columns() -> None:
    spec = TableSpec(
        name="t",
        description="d",
        columns=(
            Column("id", pa.string(), "k", nullable=False),
            Column("gone", pa.string(), "vanished from the API"),
            Column("meta", pa.int64(), "kept"),
        ),
        key=("id",),
        kind="snapshot",
    )
    existing = existing_columns(table_schema(spec, _plan(spec), None))
    rows_schema = pa.schema([("id", pa.string()), ("meta", pa.int64())])
    plan = plan_load(spec, rows_schema, existing, table_label="p.d.t", type_name=type_name)
    sql = merge_statement(TARGET, STAGING, spec, plan, None)
    assert "`gone` = NULL" in sql
    assert "`meta` = src.`meta`" in sql


def test_merge_scope_values_are_parameters_typed_like_the_values() -> None:
    scope = SnapshotScope("n", (HOSTILE,))
    params = _params([query_parameter(k, v) for k, v in stamp_parameters(STAMP, scope).items()])
    assert params["values"]["parameterType"]["arrayType"]["type"] == "STRING"
    assert HOSTILE not in merge_statement(TARGET, STAGING, COMPETITORS, _plan(COMPETITORS), scope)


# --- parameters and Parquet -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "BOOL"),
        (3, "INT64"),
        (1.5, "FLOAT64"),
        ("s", "STRING"),
        (dt.date(2026, 1, 1), "DATE"),
        (dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "TIMESTAMP"),
        (dt.datetime(2026, 1, 1), "DATETIME"),
        (None, "STRING"),
    ],
)
def test_query_parameters_are_typed_from_the_python_value(value: object, expected: str) -> None:
    assert query_parameter("v", value).to_api_repr()["parameterType"]["type"] == expected


def test_list_query_parameters_become_arrays_of_the_item_type() -> None:
    param = query_parameter("v", [None, 2, 3]).to_api_repr()
    assert param["parameterType"] == {"type": "ARRAY", "arrayType": {"type": "INT64"}}
    with pytest.raises(TypeError, match="no BigQuery parameter type"):
        query_parameter("v", object())


def test_parquet_keeps_lists_utc_timestamps_and_truncates_to_microseconds() -> None:
    rows = mention_rows("b1", [dt.date(2026, 10, 1)], per_cell=1)
    ns = pa.array([1_700_000_000_123_456_789] * rows.num_rows, pa.timestamp("ns", tz="UTC"))
    rows = rows.append_column("precise", ns)
    buf = io.BytesIO()
    write_parquet(rows.drop_columns(["details"]), buf)
    back = pq.read_table(io.BytesIO(buf.getvalue()))
    assert back.schema.field("tags").type == pa.list_(pa.field("element", pa.string()))
    assert back.schema.field("precise").type == pa.timestamp("us", tz="UTC")
    assert back["tags"].to_pylist() == rows["tags"].to_pylist()


def test_warehouse_from_url_is_lazy_and_never_shows_credentials() -> None:
    from resources.warehouse.urls import warehouse_from_url

    wh = warehouse_from_url("bigquery://my-project/my_dataset")
    assert isinstance(wh, BigQueryWarehouse)
    assert (wh.project, wh.dataset) == ("my-project", "my_dataset")
    assert wh._client is None  # no client, no credential lookup until first use
    assert wh.table_ref("brands") == "`my-project`.`my_dataset`.`brands`"


def test_null_list_items_are_dropped_because_bigquery_arrays_cannot_hold_null() -> None:
    data = pa.table(
        {
            "tags": pa.array([["a", None, "b"], None, [], [None]], pa.list_(pa.string())),
            "clean": pa.array([[1], [2], None, []], pa.list_(pa.int64())),
            "name": ["x", None, "y", "z"],
        }
    )
    out = drop_null_list_items(data)
    assert out["tags"].to_pylist() == [["a", "b"], None, [], []]
    assert out["clean"] is data["clean"] or out["clean"].to_pylist() == data["clean"].to_pylist()
    assert out["name"].to_pylist() == ["x", None, "y", "z"]
    assert out.schema == data.schema


@pytest.mark.parametrize(
    ("message", "concurrent"),
    [
        ("Transaction is aborted due to concurrent update against table p:d.t", True),
        ("Could not serialize access to table p:d.t due to concurrent update", True),
        ("Syntax error: Unexpected keyword", False),
        ("injected between delete and insert", False),
    ],
)
def test_concurrent_update_errors_are_recognised(message: str, concurrent: bool) -> None:
    assert is_concurrent_update(RuntimeError(message)) is concurrent


def test_concurrent_updates_are_retried_with_backoff_and_other_errors_are_not() -> None:
    calls: list[int] = []
    waits: list[float] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("Transaction is aborted due to concurrent update against table t")
        return "landed"

    assert retry_concurrent(flaky, sleep=waits.append) == "landed"
    assert len(calls) == 3 and len(waits) == 2 and 0 <= waits[0] <= 1.0 and 0 <= waits[1] <= 2.0

    def broken() -> str:
        calls.append(1)
        raise ValueError("Syntax error")

    calls.clear()
    with pytest.raises(ValueError):
        retry_concurrent(broken, sleep=waits.append)
    assert len(calls) == 1

    def always_busy() -> str:
        calls.append(1)
        raise RuntimeError("concurrent update")

    calls.clear()
    with pytest.raises(RuntimeError):
        retry_concurrent(always_busy, sleep=waits.append)
    assert len(calls) == 5
