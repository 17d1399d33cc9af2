"""The warehouse contract, on a real DuckDB file and a real Postgres server."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from resources.warehouse.contract import (
    FIRST_SEEN_AT,
    IS_CURRENT,
    LAST_SEEN_AT,
    LOADED_AT,
    RUN_ID,
    Column,
    SchemaMismatchError,
    SnapshotScope,
    TableSpec,
)
from tests.warehouse.conftest import Case
from tests.warehouse.helpers import (
    COMPETITORS,
    D1,
    D2,
    D3,
    EXPECTED_NUL_VALUES,
    MENTIONS,
    NUL_BRAND,
    landed_nul_values,
    mention_rows,
    nul_rows,
    nul_scope,
    scope,
)


class Boom(RuntimeError):
    pass


def _raise() -> None:
    raise Boom("injected between delete and insert")


# --- create ---------------------------------------------------------------------------------------


def test_ensure_table_creates_typed_columns_key_and_comments(case: Case) -> None:
    assert case.warehouse.ensure_table(MENTIONS) == []
    types = case.column_types("mentions")
    expected = {
        "duckdb": {
            "id": "VARCHAR",
            "checked_on": "DATE",
            "position": "DOUBLE",
            "mentions": "BIGINT",
            "is_top": "BOOLEAN",
            "observed_at": "TIMESTAMP WITH TIME ZONE",
            "tags": "VARCHAR[]",
            "details": "VARCHAR",
            LOADED_AT: "TIMESTAMP WITH TIME ZONE",
            RUN_ID: "VARCHAR",
        },
        "postgres": {
            "id": "text",
            "checked_on": "date",
            "position": "double precision",
            "mentions": "bigint",
            "is_top": "boolean",
            "observed_at": "timestamp with time zone",
            "tags": "text[]",
            "details": "text",
            LOADED_AT: "timestamp with time zone",
            RUN_ID: "text",
        },
    }[case.engine]
    assert {k: types[k] for k in expected} == expected
    assert IS_CURRENT not in types  # snapshot-only columns
    # DuckDB partitioned tables do without the key index (its memory grows with the table);
    # the writer keeps keys unique there (test_keys_landed_outside_the_scope_are_refused_not_moved)
    assert case.primary_key("mentions") == (["id"] if case.keyed_partitions else [])
    comments = case.comments("mentions")
    assert comments[None] == MENTIONS.description
    for col in MENTIONS.columns:
        assert comments[col.name] == col.description
    assert comments[LOADED_AT] and comments[RUN_ID]


def test_snapshot_table_gets_history_columns_and_current_view(case: Case) -> None:
    case.warehouse.ensure_table(COMPETITORS)
    types = case.column_types("competitors")
    for col in (IS_CURRENT, FIRST_SEEN_AT, LAST_SEEN_AT, LOADED_AT, RUN_ID):
        assert col in types
    assert case.primary_key("competitors") == ["brand_id", "id"]
    assert case.rows("competitors_current") == []
    assert case.comments("competitors_current")[None]


def test_ensure_table_twice_is_a_no_op(case: Case) -> None:
    case.warehouse.ensure_table(MENTIONS)
    assert case.warehouse.ensure_table(MENTIONS) == []
    assert case.comments("mentions")[None] == MENTIONS.description


# --- partition replace ----------------------------------------------------------------------------


def test_partition_replace_lands_rows_with_their_values(case: Case) -> None:
    rows = mention_rows("b1", [D1])
    result = case.warehouse.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-1")
    assert (result.rows_written, result.rows_deleted) == (4, 0)
    landed = case.warehouse.query(f"SELECT * FROM {case.warehouse.table_ref('mentions')}").to_pylist()
    assert {r[RUN_ID] for r in landed} == {"run-1"}
    assert all(r[LOADED_AT].tzinfo is not None for r in landed)
    first = next(r for r in landed if r["id"] == "b1-2026-10-01-chatgpt-0")
    assert first["checked_on"] == D1
    assert first["position"] == 1.0 and first["mentions"] == 0 and first["is_top"] is True
    assert first["observed_at"] == dt.datetime(2026, 10, 1, 12, tzinfo=dt.UTC)
    assert first["tags"] == ["a", "b"]
    assert json.loads(first["details"]) == {"score": 0, "label": "chatgpt"}


def test_partition_replace_swaps_exactly_the_scope(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1, D2]), scope(("b1",), D1, D3), "run-1")
    new = mention_rows("b1", [D2], engines=("chatgpt",), per_cell=1, name="Renamed")
    result = wh.replace_partitions(MENTIONS, new, scope(("b1",), D2, D3, ("chatgpt",)), "run-2")
    assert (result.rows_written, result.rows_deleted) == (1, 2)
    rows = case.rows("mentions")
    by_cell: dict[tuple[dt.date, str], list[str]] = {}
    for r in rows:
        by_cell.setdefault((r["checked_on"], r["engine"]), []).append(r["brand_name"])
    assert by_cell == {
        (D1, "chatgpt"): ["Acme", "Acme"],
        (D1, "claude"): ["Acme", "Acme"],
        (D2, "chatgpt"): ["Renamed"],
        (D2, "claude"): ["Acme", "Acme"],
    }


def test_empty_rows_clear_the_scope(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    empty = mention_rows("b1", [D1]).slice(0, 0)
    result = wh.replace_partitions(MENTIONS, empty, scope(("b1",), D1, D2), "run-2")
    assert (result.rows_written, result.rows_deleted) == (0, 4)
    assert case.rows("mentions") == []


def test_rerun_gives_an_identical_table(case: Case) -> None:
    wh = case.warehouse
    rows = mention_rows("b1", [D1, D2])
    wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D3), "run-1")
    first = case.rows("mentions")
    wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D3), "run-2")
    assert case.rows("mentions") == first
    landed = wh.query(f"SELECT * FROM {wh.table_ref('mentions')}").to_pylist()
    assert {r[RUN_ID] for r in landed} == {"run-2"}


def test_other_brands_are_never_touched(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b2", [D1]), scope(("b2",), D1, D2), "run-b2")
    before = [r for r in case.rows("mentions", drop_meta=False) if r["brand_id"] == "b2"]
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]).slice(0, 0), scope(("b1",), D1, D2), "run-2")
    after = [r for r in case.rows("mentions", drop_meta=False) if r["brand_id"] == "b2"]
    assert after == before and len(after) == 4


def test_rows_outside_the_scope_are_refused_and_nothing_is_written(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    before = case.rows("mentions", drop_meta=False)
    cases = [
        (mention_rows("b1", [D2]), scope(("b1",), D1, D2)),  # date past the end
        (mention_rows("b9", [D1]), scope(("b1",), D1, D2)),  # another brand
        (mention_rows("b1", [D1], engines=("gemini",)), scope(("b1",), D1, D2)),  # another engine
    ]
    for rows, sc in cases:
        with pytest.raises(ValueError, match="outside the partition scope"):
            wh.replace_partitions(MENTIONS, rows, sc, "run-bad")
    assert case.rows("mentions", drop_meta=False) == before


def test_keys_landed_outside_the_scope_are_refused_not_moved(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    before = case.rows("mentions", drop_meta=False)
    same_ids = mention_rows("b1", [D1]).set_column(1, "brand_id", pa.array(["b2"] * 4))
    with pytest.raises(ValueError, match="already exist outside the partition scope"):
        wh.replace_partitions(MENTIONS, same_ids, scope(("b2",), D1, D2), "run-2")  # new partition
    assert case.rows("mentions", drop_meta=False) == before
    wh.replace_partitions(MENTIONS, mention_rows("b2", [D1]), scope(("b2",), D1, D2), "run-3")
    before = case.rows("mentions", drop_meta=False)
    mixed = pa.concat_tables([mention_rows("b2", [D1]), same_ids.slice(0, 1).cast(MENTIONS.arrow_schema)])
    with pytest.raises(ValueError, match="already exist outside the partition scope"):
        wh.replace_partitions(MENTIONS, mixed, scope(("b2",), D1, D2), "run-4")  # re-run of a partition
    assert case.rows("mentions", drop_meta=False) == before


def test_duplicate_keys_keep_the_last_row(case: Case) -> None:
    rows = mention_rows("b1", [D1], engines=("chatgpt",), per_cell=1)
    later = mention_rows("b1", [D1], engines=("chatgpt",), per_cell=1, name="Later")
    result = case.warehouse.replace_partitions(
        MENTIONS, pa.concat_tables([rows, later]), scope(("b1",), D1, D2), "run-1"
    )
    assert (result.rows_written, result.duplicates_dropped) == (1, 1)
    assert [r["brand_name"] for r in case.rows("mentions")] == ["Later"]


# --- atomicity ------------------------------------------------------------------------------------


def test_error_between_delete_and_insert_leaves_the_old_rows(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1, D2]), scope(("b1",), D1, D3), "run-1")
    before = case.rows("mentions", drop_meta=False)
    wh._between_delete_and_insert = _raise
    with pytest.raises(Boom):
        wh.replace_partitions(
            MENTIONS,
            mention_rows("b1", [D1], name="New", extra={"novel": [1] * 4}),
            scope(("b1",), D1, D2),
            "run-2",
        )
    wh._between_delete_and_insert = None
    assert case.rows("mentions", drop_meta=False) == before
    assert "novel" not in case.column_types("mentions")  # the DDL rolled back too


def test_error_on_first_write_leaves_no_table(case: Case) -> None:
    wh = case.warehouse
    wh._between_delete_and_insert = _raise
    with pytest.raises(Boom):
        wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    assert case.column_types("mentions") == {}


# --- snapshots ------------------------------------------------------------------------------------


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


def test_snapshot_retires_missing_rows_in_scope_and_keeps_history(case: Case) -> None:
    wh = case.warehouse
    wh.upsert_snapshot(
        COMPETITORS, _competitors("b1", ["x", "y"]), "run-1", SnapshotScope("brand_id", ("b1",))
    )
    wh.upsert_snapshot(COMPETITORS, _competitors("b2", ["z"]), "run-1", SnapshotScope("brand_id", ("b2",)))
    first = {(r["brand_id"], r["id"]): r for r in case.rows("competitors")}

    result = wh.upsert_snapshot(
        COMPETITORS, _competitors("b1", ["x"], name="N"), "run-2", SnapshotScope("brand_id", ("b1",))
    )
    assert (result.rows_written, result.rows_deleted) == (1, 1)
    rows = {(r["brand_id"], r["id"]): r for r in case.rows("competitors")}
    x, y, z = rows[("b1", "x")], rows[("b1", "y")], rows[("b2", "z")]
    assert x[IS_CURRENT] is True and x["name"] == "Nx"
    assert x[FIRST_SEEN_AT] == first[("b1", "x")][FIRST_SEEN_AT]
    assert x[LAST_SEEN_AT] > first[("b1", "x")][LAST_SEEN_AT]
    assert y[IS_CURRENT] is False and y["name"] == "Cy"  # kept, not deleted
    assert y[LAST_SEEN_AT] == first[("b1", "y")][LAST_SEEN_AT]  # when it was last seen
    assert z == first[("b2", "z")]  # outside the scope: untouched
    current = {(r["brand_id"], r["id"]) for r in case.rows("competitors_current")}
    assert current == {("b1", "x"), ("b2", "z")}

    # it comes back: current again, first_seen_at unchanged
    wh.upsert_snapshot(
        COMPETITORS, _competitors("b1", ["x", "y"]), "run-3", SnapshotScope("brand_id", ("b1",))
    )
    y3 = {(r["brand_id"], r["id"]): r for r in case.rows("competitors")}[("b1", "y")]
    assert y3[IS_CURRENT] is True and y3[FIRST_SEEN_AT] == first[("b1", "y")][FIRST_SEEN_AT]


def test_snapshot_without_scope_retires_nothing_and_whole_table_scope_retires_all_absent(case: Case) -> None:
    wh = case.warehouse
    wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x", "y"]), "run-1", None)
    assert wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x"]), "run-2", None).rows_deleted == 0
    assert len(case.rows("competitors_current")) == 2
    assert (
        wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x"]), "run-3", SnapshotScope()).rows_deleted == 1
    )
    assert [r["id"] for r in case.rows("competitors_current")] == ["x"]


def test_snapshot_rerun_changes_only_load_metadata(case: Case) -> None:
    wh = case.warehouse
    sc = SnapshotScope("brand_id", ("b1",))
    wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x", "y"]), "run-1", sc)
    wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x"]), "run-2", sc)
    strip = (LAST_SEEN_AT,)
    before = [{k: v for k, v in r.items() if k not in strip} for r in case.rows("competitors")]
    assert wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x"]), "run-3", sc).rows_deleted == 0
    after = [{k: v for k, v in r.items() if k not in strip} for r in case.rows("competitors")]
    assert after == before


# --- schema evolution -----------------------------------------------------------------------------


def test_new_field_becomes_a_nullable_column(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    rows = mention_rows("b1", [D2], extra={"new_score": [1.5, None, 2.5, 3.5]})
    result = wh.replace_partitions(MENTIONS, rows, scope(("b1",), D2, D3), "run-2")
    assert result.columns_added == ["new_score"]
    assert case.column_types("mentions")["new_score"] in ("DOUBLE", "double precision")
    values = {r["checked_on"]: [] for r in case.rows("mentions")}
    for r in case.rows("mentions"):
        values[r["checked_on"]].append(r["new_score"])
    assert values[D1] == [None] * 4  # old rows: null
    assert sorted(v for v in values[D2] if v is not None) == [1.5, 2.5, 3.5]
    assert case.comments("mentions")["new_score"]


def test_new_field_on_snapshot_table_reaches_the_current_view(case: Case) -> None:
    wh = case.warehouse
    wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x"]), "run-1", None)
    rows = _competitors("b1", ["x"]).append_column("tier", pa.array(["gold"]))
    assert wh.upsert_snapshot(COMPETITORS, rows, "run-2", None).columns_added == ["tier"]
    assert case.rows("competitors_current")[0]["tier"] == "gold"


def test_vanished_field_stays_as_a_column_of_nulls(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    rows = mention_rows("b1", [D1]).drop_columns(["brand_name", "tags"])
    result = wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-2")
    assert result.columns_added == []
    assert "brand_name" in case.column_types("mentions")
    landed = case.rows("mentions")
    assert len(landed) == 4 and all(r["brand_name"] is None and r["tags"] is None for r in landed)
    # snapshot upsert: the vanished field is nulled on update, as a fresh insert would be
    wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x"]), "run-1", None)
    wh.upsert_snapshot(COMPETITORS, _competitors("b1", ["x"]).drop_columns(["domain"]), "run-2", None)
    assert case.rows("competitors")[0]["domain"] is None


def test_integers_land_in_a_double_column(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    rows = mention_rows("b1", [D1])
    rows = rows.set_column(
        rows.schema.get_field_index("position"), "position", pa.array([1, 2, 3, 4], pa.int64())
    )
    wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-2")
    assert sorted(r["position"] for r in case.rows("mentions")) == [1.0, 2.0, 3.0, 4.0]


def test_incompatible_type_change_names_table_column_and_types_and_writes_nothing(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    before = case.rows("mentions", drop_meta=False)
    rows = mention_rows("b1", [D1], extra={"brand_new": [1, 2, 3, 4]})
    rows = rows.set_column(
        rows.schema.get_field_index("mentions"), "mentions", pa.array(["one", "two", "three", "four"])
    )
    with pytest.raises(SchemaMismatchError) as err:
        wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-2")
    message = str(err.value)
    old_name, new_name = {"duckdb": ("BIGINT", "VARCHAR"), "postgres": ("bigint", "text")}[case.engine]
    assert "mentions" in message and f"{case.schema}.mentions" in message
    assert "'mentions'" in message and old_name in message and new_name in message
    assert (err.value.table, err.value.column) == (f"{case.schema}.mentions", "mentions")
    assert (err.value.old_type, err.value.new_type) == (old_name, new_name)
    assert case.rows("mentions", drop_meta=False) == before
    assert "brand_new" not in case.column_types("mentions")


def test_double_into_bigint_column_is_incompatible(case: Case) -> None:
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    rows = mention_rows("b1", [D1])
    rows = rows.set_column(rows.schema.get_field_index("mentions"), "mentions", pa.array([0.5] * 4))
    with pytest.raises(SchemaMismatchError, match="mentions"):
        wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-2")


# --- hostile names and values ---------------------------------------------------------------------

HOSTILE_TABLE = "we\"ird tab'le; DROP TABLE x;--"
HOSTILE_SPEC = TableSpec(
    name=HOSTILE_TABLE,
    description='It\'s a "hostile" table; DROP TABLE x;-- 日本語',
    columns=(
        Column("select", pa.string(), "A keyword as a name; 'quoted'.", nullable=False),
        Column("order", pa.string(), "Brand, also a keyword."),
        Column("from", pa.string(), "Engine."),
        Column("date", pa.date32(), "Day."),
        Column('naïve "quote"', pa.string(), "Unicode and quotes in the name."),
        Column("日本語", pa.list_(pa.string()), "Non-Latin name."),
    ),
    key=("select",),
    kind="partitioned",
    date_column="date",
    brand_column="order",
    engine_column="from",
)
HOSTILE_VALUES = [
    "Robert'); DROP TABLE students;--",
    'double "quotes" and \\ backslash',
    "newline\nand\ttab, comma",
    "ünïcödé ✓ 日本語 🎉",
    "",
    "\\.",
    "$1 ? :name %s %(x)s",
]


def test_hostile_names_and_values_round_trip(case: Case) -> None:
    wh = case.warehouse
    brand = "b'; DROP TABLE x;--"
    n = len(HOSTILE_VALUES)
    rows = pa.table(
        {
            "select": [f"k{i}" for i in range(n)],
            "order": [brand] * n,
            "from": ["chat\"gpt'"] * n,
            "date": [D1] * n,
            'naïve "quote"': HOSTILE_VALUES,
            "日本語": [[v, None, "x"] for v in HOSTILE_VALUES],
        },
        schema=HOSTILE_SPEC.arrow_schema,
    )
    sc = scope((brand,), D1, D2, ("chat\"gpt'",))
    wh.replace_partitions(HOSTILE_SPEC, rows, sc, "run-'1\"")
    wh.replace_partitions(HOSTILE_SPEC, rows, sc, "run-'2\"")
    landed = sorted(case.rows(HOSTILE_TABLE), key=lambda r: r["select"])
    assert [r['naïve "quote"'] for r in landed] == HOSTILE_VALUES
    assert [r["日本語"] for r in landed] == [[v, None, "x"] for v in HOSTILE_VALUES]
    assert {r["order"] for r in landed} == {brand}
    comments = case.comments(HOSTILE_TABLE)
    assert comments[None] == HOSTILE_SPEC.description
    assert comments["select"] == "A keyword as a name; 'quoted'."
    # a hostile evolved column and a hostile snapshot scope value
    more = rows.append_column('new "col"; --', pa.array(HOSTILE_VALUES))
    assert wh.replace_partitions(HOSTILE_SPEC, more, sc, "run-3").columns_added == ['new "col"; --']
    snap = TableSpec(
        name="group \"by\" 'x'",
        description="keyword table",
        columns=(Column("user", pa.string(), "k", nullable=False), Column("where", pa.string(), "v")),
        key=("user",),
        kind="snapshot",
    )
    wh.upsert_snapshot(snap, pa.table({"user": HOSTILE_VALUES, "where": HOSTILE_VALUES}), "r1", None)
    kept = pa.table({"user": HOSTILE_VALUES[:1], "where": HOSTILE_VALUES[:1]})
    assert (
        wh.upsert_snapshot(snap, kept, "r2", SnapshotScope("where", tuple(HOSTILE_VALUES[1:3]))).rows_deleted
        == 2
    )
    assert len(case.rows("group \"by\" 'x'_current")) == n - 2


def test_typed_lists_round_trip(case: Case) -> None:
    spec = TableSpec(
        name="lists",
        description="lists of every scalar type",
        columns=(
            Column("id", pa.string(), "k", nullable=False),
            Column("ints", pa.list_(pa.int64()), "i"),
            Column("floats", pa.list_(pa.float64()), "f"),
            Column("flags", pa.list_(pa.bool_()), "b"),
            Column("days", pa.list_(pa.date32()), "d"),
            Column("stamps", pa.list_(pa.timestamp("us", tz="UTC")), "t"),
        ),
        key=("id",),
        kind="snapshot",
    )
    stamp = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    data = {
        "id": ["a", "b", "c"],
        "ints": [[1, None, -(2**62)], [], None],
        "floats": [[0.1, 1e300, None], [], None],
        "flags": [[True, False, None], [], None],
        "days": [[D1, None], [], None],
        "stamps": [[stamp, None], [], None],
    }
    case.warehouse.upsert_snapshot(spec, pa.table(data, schema=spec.arrow_schema), "run-1", None)
    landed = {r["id"]: r for r in case.rows("lists")}
    for i, key in enumerate(data["id"]):
        for col in ("ints", "floats", "flags", "days", "stamps"):
            assert landed[key][col] == data[col][i], (key, col)


# --- NUL characters -------------------------------------------------------------------------------


def test_nul_characters_land_as_the_replacement_character_and_rerun_in_place(case: Case) -> None:
    """Postgres refuses NUL in text: every engine lands U+FFFD instead, and
    a re-run of the same scope (whose brand id holds a NUL too) replaces its rows."""
    wh = case.warehouse
    wh.replace_partitions(MENTIONS, nul_rows(), nul_scope(), "run-1")
    result = wh.replace_partitions(MENTIONS, nul_rows(), nul_scope(), "run-2")
    assert (result.rows_written, result.rows_deleted) == (2, 2)
    assert landed_nul_values(case.rows("mentions")) == EXPECTED_NUL_VALUES


def test_nul_characters_in_snapshot_rows_and_scope_values(case: Case) -> None:
    rows = pa.table(
        {"brand_id": [NUL_BRAND] * 2, "id": ["c\x001", "c2"], "name": ["N\x00", "M"], "domain": [None, None]},
        schema=COMPETITORS.arrow_schema,
    )
    wh = case.warehouse
    wh.upsert_snapshot(COMPETITORS, rows, "run-1", SnapshotScope("brand_id", (NUL_BRAND,)))
    result = wh.upsert_snapshot(COMPETITORS, rows.slice(1), "run-2", SnapshotScope("brand_id", (NUL_BRAND,)))
    assert result.rows_deleted == 1  # the scope value matched the landed (cleaned) brand id
    landed = sorted((r["id"], r["name"], r[IS_CURRENT]) for r in case.rows("competitors"))
    assert landed == [("c2", "M", True), ("c\ufffd1", "N\ufffd", False)]
