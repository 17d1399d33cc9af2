"""The warehouse contract on BigQuery: the local emulator always, real BigQuery when configured.

The data and specs are the ones the DuckDB and Postgres tests use (tests/warehouse/conftest.py).
Where BigQuery differs by design, the test says so: REPEATED fields read back NULL as ``[]``,
JSON reads back as text, and DDL (table creation, added columns) cannot run inside a BigQuery
transaction, so a failed write may leave a new, empty nullable column (never rows).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

import pyarrow as pa
import pytest

from resources.warehouse.bigquery import STAGING_PREFIX, BigQueryWarehouse
from resources.warehouse.contract import (
    FIRST_SEEN_AT,
    IS_CURRENT,
    LAST_SEEN_AT,
    LOADED_AT,
    RUN_ID,
    Column,
    PartitionWrite,
    SchemaMismatchError,
    SnapshotScope,
    TableSpec,
)
from tests.fixtures_bigquery import BigQueryTarget
from tests.warehouse.conftest import COMPETITORS, D1, D2, D3, MENTIONS, mention_rows, scope
from tests.warehouse.helpers import EXPECTED_NUL_VALUES, landed_nul_values, nul_rows, nul_scope

pytestmark = pytest.mark.timeout(120)


@dataclasses.dataclass
class BQ:
    """A warehouse on one target, with this test's own table names."""

    target: BigQueryTarget
    wh: BigQueryWarehouse

    def spec(self, spec: TableSpec) -> TableSpec:
        return dataclasses.replace(spec, name=self.target.prefix + spec.name)

    def rows(self, table: str, *, drop_meta: bool = True) -> list[dict[str, Any]]:
        out = self.wh.query(f"SELECT * FROM {self.wh.table_ref(table)}").to_pylist()
        if drop_meta:
            out = [{k: v for k, v in r.items() if k not in (LOADED_AT, RUN_ID)} for r in out]
        return sorted(out, key=lambda r: tuple(str(r[k]) for k in sorted(r)))

    def table(self, name: str) -> Any:
        return self.target.client.get_table(f"{self.target.project}.{self.target.dataset}.{name}")

    def fields(self, name: str) -> dict[str, tuple[str, str, str | None]]:
        """name -> (type, mode, description); legacy type names normalised."""
        legacy = {"INTEGER": "INT64", "FLOAT": "FLOAT64", "BOOLEAN": "BOOL"}
        return {
            f.name: (legacy.get(f.field_type, f.field_type), f.mode, f.description)
            for f in self.table(name).schema
        }

    def staging_tables(self) -> list[str]:
        """This test's staging tables (a shared live dataset may hold other runs' ones)."""
        names = self.target.table_names()
        return [n for n in names if n.startswith(STAGING_PREFIX) and self.target.prefix in n]


@pytest.fixture
def bq(bigquery_target: BigQueryTarget) -> BQ:
    wh = bigquery_target.warehouse()
    return BQ(bigquery_target, wh)


def _competitors(brand: str, ids: list[str], name: str = "C") -> pa.Table:
    return pa.table(
        {
            "brand_id": [brand] * len(ids),
            "id": ids,
            "name": [f"{name}{i}" for i in ids],
            "domain": [f"{i}.example" for i in ids],
        },
        schema=COMPETITORS.arrow_schema,
    )


# --- create ---------------------------------------------------------------------------------------


def test_ensure_table_creates_typed_partitioned_clustered_described_table(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    assert bq.wh.ensure_table(spec) == []
    fields = bq.fields(spec.name)
    assert {k: v[:2] for k, v in fields.items()} == {
        "id": ("STRING", "NULLABLE"),
        "brand_id": ("STRING", "NULLABLE"),
        "engine": ("STRING", "NULLABLE"),
        "checked_on": ("DATE", "NULLABLE"),
        "brand_name": ("STRING", "NULLABLE"),
        "position": ("FLOAT64", "NULLABLE"),
        "mentions": ("INT64", "NULLABLE"),
        "is_top": ("BOOL", "NULLABLE"),
        "observed_at": ("TIMESTAMP", "NULLABLE"),
        "tags": ("STRING", "REPEATED"),
        "details": ("STRING", "NULLABLE"),
        LOADED_AT: ("TIMESTAMP", "NULLABLE"),
        RUN_ID: ("STRING", "NULLABLE"),
    }
    for col in spec.columns:
        assert fields[col.name][2] == col.description
    assert fields[LOADED_AT][2] and fields[RUN_ID][2]
    table = bq.table(spec.name)
    assert table.description == spec.description
    assert table.time_partitioning.field == "checked_on"
    assert table.time_partitioning.type_ == "DAY"
    assert table.clustering_fields == ["brand_id", "engine"]
    assert bq.wh.ensure_table(spec) == []  # twice: no change


def test_snapshot_table_gets_history_columns_and_described_current_view(bq: BQ) -> None:
    spec = bq.spec(COMPETITORS)
    bq.wh.ensure_table(spec)
    fields = bq.fields(spec.name)
    assert fields[IS_CURRENT][0] == "BOOL"
    assert fields[FIRST_SEEN_AT][0] == fields[LAST_SEEN_AT][0] == "TIMESTAMP"
    assert bq.table(spec.name).time_partitioning is None  # snapshots have no date column
    view = bq.table(f"{spec.name}_current")
    assert view.table_type == "VIEW"
    assert view.view_query is None or "is_current" in view.view_query  # the emulator omits the query
    assert view.description and spec.description in view.description
    assert bq.rows(f"{spec.name}_current") == []


def test_changed_descriptions_are_rewritten_on_the_existing_table(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.ensure_table(spec)
    columns = tuple(
        dataclasses.replace(c, description=f"{c.description} (v2)") if c.name == "engine" else c
        for c in spec.columns
    )
    changed = dataclasses.replace(spec, description="Mentions, v2.", columns=columns)
    assert bq.wh.ensure_table(changed) == []
    assert bq.table(spec.name).description == "Mentions, v2."
    assert bq.fields(spec.name)["engine"][2] == "Answer engine. (v2)"
    assert bq.fields(spec.name)["brand_id"][2] == spec.column("brand_id").description


# --- partition replace ----------------------------------------------------------------------------


def test_partition_replace_lands_rows_with_their_values(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    result = bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    assert (result.rows_written, result.rows_deleted) == (4, 0)
    landed = bq.wh.query(f"SELECT * FROM {bq.wh.table_ref(spec.name)}").to_pylist()
    assert {r[RUN_ID] for r in landed} == {"run-1"}
    assert all(r[LOADED_AT].tzinfo is not None for r in landed)
    first = next(r for r in landed if r["id"] == "b1-2026-10-01-chatgpt-0")
    assert first["checked_on"] == D1
    assert first["position"] == 1.0 and first["mentions"] == 0 and first["is_top"] is True
    assert first["observed_at"] == dt.datetime(2026, 10, 1, 12, tzinfo=dt.UTC)
    assert first["tags"] == ["a", "b"]
    assert json.loads(first["details"]) == {"score": 0, "label": "chatgpt"}
    second = next(r for r in landed if r["id"] == "b1-2026-10-01-chatgpt-1")
    assert second["tags"] == []  # BigQuery stores a NULL array as []
    assert bq.staging_tables() == []


def test_partition_replace_swaps_exactly_the_scope(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1, D2]), scope(("b1",), D1, D3), "run-1")
    new = mention_rows("b1", [D2], engines=("chatgpt",), per_cell=1, name="Renamed")
    result = bq.wh.replace_partitions(spec, new, scope(("b1",), D2, D3, ("chatgpt",)), "run-2")
    assert (result.rows_written, result.rows_deleted) == (1, 2)
    by_cell: dict[tuple[dt.date, str], list[str]] = {}
    for r in bq.rows(spec.name):
        by_cell.setdefault((r["checked_on"], r["engine"]), []).append(r["brand_name"])
    assert by_cell == {
        (D1, "chatgpt"): ["Acme", "Acme"],
        (D1, "claude"): ["Acme", "Acme"],
        (D2, "chatgpt"): ["Renamed"],
        (D2, "claude"): ["Acme", "Acme"],
    }


def test_empty_rows_clear_the_scope(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    empty = mention_rows("b1", [D1]).slice(0, 0)
    result = bq.wh.replace_partitions(spec, empty, scope(("b1",), D1, D2), "run-2")
    assert (result.rows_written, result.rows_deleted) == (0, 4)
    assert bq.rows(spec.name) == []


def test_rerun_gives_an_identical_table(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    rows = mention_rows("b1", [D1, D2])
    bq.wh.replace_partitions(spec, rows, scope(("b1",), D1, D3), "run-1")
    first = bq.rows(spec.name)
    result = bq.wh.replace_partitions(spec, rows, scope(("b1",), D1, D3), "run-2")
    assert (result.rows_written, result.rows_deleted) == (8, 8)
    assert bq.rows(spec.name) == first
    landed = bq.wh.query(f"SELECT * FROM {bq.wh.table_ref(spec.name)}").to_pylist()
    assert {r[RUN_ID] for r in landed} == {"run-2"}


def test_other_brands_dates_and_engines_are_never_touched(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b2", [D1]), scope(("b2",), D1, D2), "run-b2")
    bq.wh.replace_partitions(spec, mention_rows("b1", [D2]), scope(("b1",), D2, D3), "run-d2")
    bq.wh.replace_partitions(
        spec, mention_rows("b1", [D1], engines=("gemini",)), scope(("b1",), D1, D2, ("gemini",)), "g"
    )

    def untouched() -> list[dict[str, Any]]:
        in_scope = ("b1", D1, ("chatgpt", "claude"))
        return [
            r
            for r in bq.rows(spec.name, drop_meta=False)
            if not (
                r["brand_id"] == in_scope[0] and r["checked_on"] == in_scope[1] and r["engine"] in in_scope[2]
            )
        ]

    before = untouched()
    assert len(before) == 4 + 4 + 2  # other brand, other date, other engine
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]).slice(0, 0), scope(("b1",), D1, D2), "run-2")
    assert untouched() == before


def test_rows_outside_the_scope_are_refused_and_nothing_is_written(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    before = bq.rows(spec.name, drop_meta=False)
    for rows, sc in [
        (mention_rows("b1", [D2]), scope(("b1",), D1, D2)),
        (mention_rows("b9", [D1]), scope(("b1",), D1, D2)),
        (mention_rows("b1", [D1], engines=("gemini",)), scope(("b1",), D1, D2)),
    ]:
        with pytest.raises(ValueError, match="outside the partition scope"):
            bq.wh.replace_partitions(spec, rows, sc, "run-bad")
    assert bq.rows(spec.name, drop_meta=False) == before


def test_duplicate_keys_keep_the_last_row(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    rows = mention_rows("b1", [D1], engines=("chatgpt",), per_cell=1)
    later = mention_rows("b1", [D1], engines=("chatgpt",), per_cell=1, name="Later")
    result = bq.wh.replace_partitions(spec, pa.concat_tables([rows, later]), scope(("b1",), D1, D2), "run-1")
    assert (result.rows_written, result.duplicates_dropped) == (1, 1)
    assert [r["brand_name"] for r in bq.rows(spec.name)] == ["Later"]


# --- atomicity ------------------------------------------------------------------------------------


def test_error_between_delete_and_insert_leaves_the_old_rows_and_no_staging(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1, D2]), scope(("b1",), D1, D3), "run-1")
    before = bq.rows(spec.name, drop_meta=False)
    bq.wh._between_delete_and_insert_sql = "SELECT ERROR('injected between delete and insert')"
    with pytest.raises(Exception, match="injected between delete and insert"):
        bq.wh.replace_partitions(spec, mention_rows("b1", [D1], name="New"), scope(("b1",), D1, D2), "run-2")
    bq.wh._between_delete_and_insert_sql = None
    assert bq.rows(spec.name, drop_meta=False) == before
    assert bq.staging_tables() == []
    # and the next write goes through
    assert (
        bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-3").rows_deleted
        == 4
    )


def test_failed_write_leaves_no_rows_but_ddl_it_ran_stays(bq: BQ) -> None:
    """BigQuery runs no DDL inside a transaction: a failed first write leaves an empty table, and a
    failed write with a new field leaves that nullable column (all NULL). Never rows."""
    spec = bq.spec(MENTIONS)
    bq.wh._between_delete_and_insert_sql = "SELECT ERROR('injected')"
    with pytest.raises(Exception, match="injected"):
        bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    assert bq.rows(spec.name) == []
    bq.wh._between_delete_and_insert_sql = None
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-2")
    before = bq.rows(spec.name)
    bq.wh._between_delete_and_insert_sql = "SELECT ERROR('injected')"
    with pytest.raises(Exception, match="injected"):
        rows = mention_rows("b1", [D1], extra={"novel": [1] * 4})
        bq.wh.replace_partitions(spec, rows, scope(("b1",), D1, D2), "run-3")
    after = bq.rows(spec.name)
    assert [{k: v for k, v in r.items() if k != "novel"} for r in after] == before
    assert {r["novel"] for r in after} == {None}


def _weekly_writes(name: str) -> list[PartitionWrite]:
    """Three writes of b1, one per week, as a landing of three chunks sends them."""
    out = []
    for week in range(3):
        days = [D1 + dt.timedelta(days=7 * week + i) for i in range(7)]
        out.append(
            PartitionWrite(
                mention_rows("b1", days, per_cell=1, name=name),
                scope(("b1",), days[0], days[-1] + dt.timedelta(days=1)),
            )
        )
    return out


def test_a_landing_of_several_chunks_is_one_transaction_and_leaves_no_staging(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    results = bq.wh.replace_partitions_together(spec, _weekly_writes("Old"), "run-1")
    assert [(r.rows_written, r.rows_deleted) for r in results] == [(14, 0)] * 3
    results = bq.wh.replace_partitions_together(spec, _weekly_writes("New"), "run-2")
    assert [(r.rows_written, r.rows_deleted) for r in results] == [(14, 14)] * 3
    assert {r["brand_name"] for r in bq.rows(spec.name)} == {"New"}
    assert bq.staging_tables() == []


def test_a_failure_in_the_last_chunk_leaves_exactly_the_previous_rows_and_no_staging(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions_together(spec, _weekly_writes("Old"), "run-1")
    before = bq.rows(spec.name, drop_meta=False)
    bq.wh._between_delete_and_insert_sql = "SELECT ERROR('injected in the last chunk')"
    with pytest.raises(Exception, match="injected in the last chunk"):
        bq.wh.replace_partitions_together(spec, _weekly_writes("New"), "run-2")
    bq.wh._between_delete_and_insert_sql = None
    assert bq.rows(spec.name, drop_meta=False) == before
    assert bq.staging_tables() == []


# --- NUL characters and the connection check ----------------------------------------------------------


def test_nul_characters_land_as_the_replacement_character_like_every_engine(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, nul_rows(), nul_scope(), "run-1")
    result = bq.wh.replace_partitions(spec, nul_rows(), nul_scope(), "run-2")
    assert (result.rows_written, result.rows_deleted) == (2, 2)
    assert landed_nul_values(bq.rows(spec.name)) == EXPECTED_NUL_VALUES


def test_a_reachable_dataset_passes_the_connection_check(bq: BQ) -> None:
    bq.wh.check_connection()


# --- snapshots ------------------------------------------------------------------------------------


def test_snapshot_retires_missing_rows_in_scope_and_keeps_history(bq: BQ) -> None:
    spec = bq.spec(COMPETITORS)
    in_b1, in_b2 = SnapshotScope("brand_id", ("b1",)), SnapshotScope("brand_id", ("b2",))
    bq.wh.upsert_snapshot(spec, _competitors("b1", ["x", "y"]), "run-1", in_b1)
    bq.wh.upsert_snapshot(spec, _competitors("b2", ["z"]), "run-1", in_b2)
    first = {(r["brand_id"], r["id"]): r for r in bq.rows(spec.name)}

    result = bq.wh.upsert_snapshot(spec, _competitors("b1", ["x"], name="N"), "run-2", in_b1)
    assert (result.rows_written, result.rows_deleted) == (1, 1)
    rows = {(r["brand_id"], r["id"]): r for r in bq.rows(spec.name)}
    x, y, z = rows[("b1", "x")], rows[("b1", "y")], rows[("b2", "z")]
    assert x[IS_CURRENT] is True and x["name"] == "Nx"
    assert x[FIRST_SEEN_AT] == first[("b1", "x")][FIRST_SEEN_AT]
    assert x[LAST_SEEN_AT] > first[("b1", "x")][LAST_SEEN_AT]
    assert y[IS_CURRENT] is False and y["name"] == "Cy"  # kept, not deleted
    assert y[LAST_SEEN_AT] == first[("b1", "y")][LAST_SEEN_AT]
    assert z == first[("b2", "z")]  # outside the scope: untouched
    current = {(r["brand_id"], r["id"]) for r in bq.rows(f"{spec.name}_current")}
    assert current == {("b1", "x"), ("b2", "z")}

    bq.wh.upsert_snapshot(spec, _competitors("b1", ["x", "y"]), "run-3", in_b1)
    y3 = {(r["brand_id"], r["id"]): r for r in bq.rows(spec.name)}[("b1", "y")]
    assert y3[IS_CURRENT] is True and y3[FIRST_SEEN_AT] == first[("b1", "y")][FIRST_SEEN_AT]
    assert bq.staging_tables() == []


def test_snapshot_without_scope_retires_nothing_and_whole_table_scope_retires_all_absent(bq: BQ) -> None:
    spec = bq.spec(COMPETITORS)
    bq.wh.upsert_snapshot(spec, _competitors("b1", ["x", "y"]), "run-1", None)
    assert bq.wh.upsert_snapshot(spec, _competitors("b1", ["x"]), "run-2", None).rows_deleted == 0
    assert len(bq.rows(f"{spec.name}_current")) == 2
    assert bq.wh.upsert_snapshot(spec, _competitors("b1", ["x"]), "run-3", SnapshotScope()).rows_deleted == 1
    assert [r["id"] for r in bq.rows(f"{spec.name}_current")] == ["x"]
    # a column scope with no values retires nothing
    assert (
        bq.wh.upsert_snapshot(
            spec, _competitors("b1", []), "run-4", SnapshotScope("brand_id", ())
        ).rows_deleted
        == 0
    )


# --- schema evolution -----------------------------------------------------------------------------


def test_new_field_becomes_a_described_nullable_column(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    rows = mention_rows("b1", [D2], extra={"new_score": [1.5, None, 2.5, 3.5]})
    result = bq.wh.replace_partitions(spec, rows, scope(("b1",), D2, D3), "run-2")
    assert result.columns_added == ["new_score"]
    kind, mode, description = bq.fields(spec.name)["new_score"]
    assert (kind, mode) == ("FLOAT64", "NULLABLE") and description
    values: dict[dt.date, list[Any]] = {D1: [], D2: []}
    for r in bq.rows(spec.name):
        values[r["checked_on"]].append(r["new_score"])
    assert values[D1] == [None] * 4
    assert sorted(v for v in values[D2] if v is not None) == [1.5, 2.5, 3.5]
    # the table keeps its partitioning and clustering
    assert bq.table(spec.name).time_partitioning.field == "checked_on"


def test_new_field_on_snapshot_table_reaches_the_current_view(bq: BQ) -> None:
    spec = bq.spec(COMPETITORS)
    bq.wh.upsert_snapshot(spec, _competitors("b1", ["x"]), "run-1", None)
    rows = _competitors("b1", ["x"]).append_column("tier", pa.array(["gold"]))
    assert bq.wh.upsert_snapshot(spec, rows, "run-2", None).columns_added == ["tier"]
    assert bq.rows(f"{spec.name}_current")[0]["tier"] == "gold"


def test_vanished_field_stays_as_a_column_of_nulls(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    rows = mention_rows("b1", [D1]).drop_columns(["brand_name", "details"])
    assert bq.wh.replace_partitions(spec, rows, scope(("b1",), D1, D2), "run-2").columns_added == []
    landed = bq.rows(spec.name)
    assert len(landed) == 4 and all(r["brand_name"] is None and r["details"] is None for r in landed)
    snap = bq.spec(COMPETITORS)
    bq.wh.upsert_snapshot(snap, _competitors("b1", ["x"]), "run-1", None)
    bq.wh.upsert_snapshot(snap, _competitors("b1", ["x"]).drop_columns(["domain"]), "run-2", None)
    assert bq.rows(snap.name)[0]["domain"] is None


def test_integers_land_in_a_double_column(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    rows = mention_rows("b1", [D1])
    rows = rows.set_column(
        rows.schema.get_field_index("position"), "position", pa.array([1, 2, 3, 4], pa.int64())
    )
    bq.wh.replace_partitions(spec, rows, scope(("b1",), D1, D2), "run-2")
    assert sorted(r["position"] for r in bq.rows(spec.name)) == [1.0, 2.0, 3.0, 4.0]


def test_incompatible_type_change_names_table_column_and_types_and_writes_nothing(bq: BQ) -> None:
    spec = bq.spec(MENTIONS)
    bq.wh.replace_partitions(spec, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    before = bq.rows(spec.name, drop_meta=False)
    fields_before = bq.fields(spec.name)
    rows = mention_rows("b1", [D1], extra={"brand_new": [1, 2, 3, 4]})
    rows = rows.set_column(
        rows.schema.get_field_index("mentions"), "mentions", pa.array(["1", "2", "3", "4"])
    )
    with pytest.raises(SchemaMismatchError) as err:
        bq.wh.replace_partitions(spec, rows, scope(("b1",), D1, D2), "run-2")
    label = f"{bq.target.project}.{bq.target.dataset}.{spec.name}"
    assert (err.value.table, err.value.column) == (label, "mentions")
    assert (err.value.old_type, err.value.new_type) == ("INT64", "STRING")
    assert label in str(err.value) and "INT64" in str(err.value) and "STRING" in str(err.value)
    assert bq.rows(spec.name, drop_meta=False) == before
    assert bq.fields(spec.name) == fields_before  # no column added either
    assert bq.staging_tables() == []


# --- hostile names and values ---------------------------------------------------------------------

HOSTILE_VALUES = [
    "Robert'); DROP TABLE students;--",
    'double "quotes" and \\ backslash and `backtick`',
    "newline\nand\ttab, comma",
    "ünïcödé ✓ 日本語 🎉",
    "",
    "@brands $1 ? :name %s",
]


def _hostile_spec(prefix: str) -> TableSpec:
    # BigQuery names cannot hold quotes or semicolons at all; column names may hold keywords and
    # unicode. (BigQuery allows unicode table names too, the emulator only ASCII: the table is ASCII.)
    return TableSpec(
        name=f"{prefix}select",
        description='It\'s a "hostile" table; DROP TABLE x;-- 日本語 `tick`',
        columns=(
            Column(
                "select", pa.string(), "A keyword as a name; 'quoted' \"doubly\" `ticked`.", nullable=False
            ),
            Column("order", pa.string(), "Brand, also a keyword."),
            Column("from", pa.string(), "Engine."),
            Column("date", pa.date32(), "Day."),
            Column("naïve", pa.string(), "Unicode in the name."),
            Column("日本語", pa.list_(pa.string()), "Non-Latin name."),
        ),
        key=("select",),
        kind="partitioned",
        date_column="date",
        brand_column="order",
        engine_column="from",
        cluster_by=("order", "from"),
    )


def test_hostile_names_and_values_round_trip(bq: BQ) -> None:
    spec = _hostile_spec(bq.target.prefix)
    brand, engine = "b'; DROP TABLE x;--", "chat\"gpt'`"
    n = len(HOSTILE_VALUES)
    rows = pa.table(
        {
            "select": [f"k{i}" for i in range(n)],
            "order": [brand] * n,
            "from": [engine] * n,
            "date": [D1] * n,
            "naïve": HOSTILE_VALUES,
            "日本語": [[v, None, "x"] for v in HOSTILE_VALUES],
        },
        schema=spec.arrow_schema,
    )
    sc = scope((brand,), D1, D2, (engine,))
    bq.wh.replace_partitions(spec, rows, sc, "run-'1\"")
    assert bq.wh.replace_partitions(spec, rows, sc, "run-'2\"`").rows_deleted == n
    landed = sorted(bq.rows(spec.name, drop_meta=False), key=lambda r: r["select"])
    assert [r["naïve"] for r in landed] == HOSTILE_VALUES
    # BigQuery arrays cannot hold NULL: the writer drops null items (docs/BIGQUERY.md)
    assert [r["日本語"] for r in landed] == [[v, "x"] for v in HOSTILE_VALUES]
    assert {r["order"] for r in landed} == {brand}
    assert {r[RUN_ID] for r in landed} == {"run-'2\"`"}
    assert bq.table(spec.name).description == spec.description
    assert bq.fields(spec.name)["select"][2] == spec.column("select").description
    # query() takes values as parameters too
    hit = bq.wh.query(
        f"SELECT `select` FROM {bq.wh.table_ref(spec.name)} WHERE `naïve` = @v", {"v": HOSTILE_VALUES[0]}
    )
    assert hit.column("select").to_pylist() == ["k0"]
    # a keyword-named evolved column and a hostile snapshot scope value
    more = rows.append_column("where", pa.array(HOSTILE_VALUES))
    assert bq.wh.replace_partitions(spec, more, sc, "run-3").columns_added == ["where"]
    snap = TableSpec(
        name=f"{bq.target.prefix}group",
        description="keyword table",
        columns=(Column("user", pa.string(), "k", nullable=False), Column("where", pa.string(), "v")),
        key=("user",),
        kind="snapshot",
        brand_column="where",
        cluster_by=("user",),
    )
    bq.wh.upsert_snapshot(snap, pa.table({"user": HOSTILE_VALUES, "where": HOSTILE_VALUES}), "r1", None)
    result = bq.wh.upsert_snapshot(
        snap,
        pa.table({"user": HOSTILE_VALUES[:1], "where": HOSTILE_VALUES[:1]}),
        "r2",
        SnapshotScope("where", tuple(HOSTILE_VALUES[:2])),
    )
    assert result.rows_deleted == 1  # only the second hostile value was in scope and absent
    assert sorted(r["user"] for r in bq.rows(f"{snap.name}_current")) == sorted(
        [HOSTILE_VALUES[0], *HOSTILE_VALUES[2:]]
    )
