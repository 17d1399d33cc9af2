"""Engine-independent write steps (pure): validation, scope checks, dedupe, schema-evolution planning,
encoding, NUL cleaning and quoting."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from resources.warehouse.contract import EVOLVED_COLUMN_DESCRIPTION, Column, SchemaMismatchError, TableSpec
from resources.warehouse.encoding import clean_column, clean_scope, dedupe_by_key, encode_rows
from resources.warehouse.schema_evolution import ExistingColumn, plan_load
from resources.warehouse.sql import quote_identifier, quote_literal
from resources.warehouse.types import duckdb_type, from_duckdb_type, sql_type_or_default
from resources.warehouse.write_checks import check_rows_in_scope, validate_rows, validate_spec
from tests.warehouse.helpers import D1, D2, D3, MENTIONS, mention_rows, scope


def _existing(spec: TableSpec, **overrides: str) -> list[ExistingColumn]:
    """The columns a writer would have created for ``spec`` (DuckDB names), with overrides."""
    cols = [(c.name, overrides.get(c.name, duckdb_type(sql_type_or_default(c.type)))) for c in spec.columns]
    cols += [("_loaded_at", "TIMESTAMPTZ"), ("_run_id", "VARCHAR")]
    return [ExistingColumn(n, t, from_duckdb_type(t), "c") for n, t in cols]


def _plan(rows: pa.Table, existing: list[ExistingColumn] | None):
    return plan_load(MENTIONS, rows.schema, existing, table_label="s.mentions", type_name=duckdb_type)


def test_scope_accepts_rows_inside_and_names_the_first_row_outside() -> None:
    rows = mention_rows("b1", [D1, D2])
    check_rows_in_scope(MENTIONS, rows, scope(("b1",), D1, D3))
    with pytest.raises(ValueError, match=r"4 row\(s\).*checked_on=datetime.date\(2026, 10, 2\)"):
        check_rows_in_scope(MENTIONS, rows, scope(("b1",), D1, D2))
    with pytest.raises(ValueError, match="engine='claude'"):
        check_rows_in_scope(MENTIONS, rows, scope(("b1",), D1, D3, ("chatgpt",)))
    with pytest.raises(ValueError, match="empty partition scope"):
        check_rows_in_scope(MENTIONS, rows, scope(("b1",), D2, D2))


def test_null_scope_values_are_outside_the_scope() -> None:
    rows = mention_rows("b1", [D1])
    rows = rows.set_column(1, "brand_id", pa.array([None, "b1", "b1", "b1"], pa.string()))
    with pytest.raises(ValueError, match="brand_id=None"):
        check_rows_in_scope(MENTIONS, rows, scope(("b1",), D1, D2))


def test_dedupe_keeps_the_last_row_per_key_in_order() -> None:
    rows = pa.table({"id": ["a", "b", "a", "c", "b"], "v": [1, 2, 3, 4, 5]})
    out, dropped = dedupe_by_key(rows, ["id"])
    assert dropped == 2
    assert out.to_pylist() == [{"id": "a", "v": 3}, {"id": "c", "v": 4}, {"id": "b", "v": 5}]
    same, none = dedupe_by_key(rows.slice(0, 2), ["id"])
    assert none == 0 and same.num_rows == 2


def test_rows_must_carry_a_non_null_key_and_no_writer_columns() -> None:
    rows = mention_rows("b1", [D1])
    with pytest.raises(ValueError, match="key column 'id' is missing"):
        validate_rows(MENTIONS, rows.drop_columns(["id"]))
    with pytest.raises(ValueError, match="null"):
        validate_rows(MENTIONS, rows.set_column(0, "id", pa.array([None, "x", "y", "z"], pa.string())))
    with pytest.raises(ValueError, match="written by the warehouse"):
        validate_rows(MENTIONS, rows.append_column("_run_id", pa.array(["x"] * 4)))
    with pytest.raises(ValueError, match="differ only by case"):
        validate_rows(MENTIONS, rows.append_column("ID", pa.array(["x"] * 4)))


def test_spec_must_be_writable() -> None:
    validate_spec(MENTIONS)
    with pytest.raises(ValueError, match="date_column"):
        validate_spec(dataclasses.replace(MENTIONS, date_column="brand_name"))
    with pytest.raises(ValueError, match="reserved"):
        validate_spec(
            dataclasses.replace(MENTIONS, columns=(*MENTIONS.columns, Column("is_current", pa.bool_(), "x")))
        )


def test_plan_for_a_new_table_creates_spec_and_extra_columns_with_comments() -> None:
    rows = mention_rows("b1", [D1], extra={"novel": [1, 2, 3, 4]})
    plan = _plan(rows, None)
    assert plan.create and plan.columns_added == []
    assert [c.name for c in plan.columns][-1] == "novel"
    comments = dict(plan.comments)
    assert comments[None] == MENTIONS.description
    assert comments["novel"] == EVOLVED_COLUMN_DESCRIPTION and comments["_loaded_at"]


def test_plan_adds_new_columns_and_leaves_vanished_ones_null() -> None:
    rows = mention_rows("b1", [D1], extra={"novel": [1, 2, 3, 4]}).drop_columns(["brand_name"])
    plan = _plan(rows, _existing(MENTIONS))
    assert plan.columns_added == ["novel"]
    assert "brand_name" in plan.null_columns
    assert plan.table_columns[-1] == "novel"


def test_incompatible_change_raises_with_table_column_and_both_types() -> None:
    rows = mention_rows("b1", [D1])
    rows = rows.set_column(6, "mentions", pa.array(["x"] * 4))
    with pytest.raises(SchemaMismatchError) as err:
        _plan(rows, _existing(MENTIONS))
    assert (err.value.table, err.value.column, err.value.old_type, err.value.new_type) == (
        "s.mentions",
        "mentions",
        "BIGINT",
        "VARCHAR",
    )


def test_a_table_without_the_writer_columns_is_not_adopted() -> None:
    existing = [e for e in _existing(MENTIONS) if e.name != "_run_id"]
    with pytest.raises(SchemaMismatchError, match="not created by this connector"):
        _plan(mention_rows("b1", [D1]), existing)


def test_encode_rows_types_null_columns() -> None:
    rows = mention_rows("b1", [D1], per_cell=1, engines=("chatgpt",))
    rows = rows.append_column("later", pa.nulls(1))
    out = encode_rows(rows, _plan(rows, None))
    assert out.schema.field("later").type == pa.string()
    assert out["tags"].type == pa.list_(pa.string())  # lists stay Arrow lists


def test_quoting_doubles_quotes_and_refuses_nul() -> None:
    assert quote_identifier('a"b') == '"a""b"'
    assert quote_literal("it's") == "'it''s'"
    with pytest.raises(ValueError):
        quote_identifier("a\x00b")
    with pytest.raises(ValueError):
        quote_identifier("")


# --- NUL characters --------------------------------------------------------------------------------


def test_nul_in_text_and_list_items_becomes_the_replacement_character() -> None:
    rows = mention_rows("b1", [D1], engines=("chatgpt",), per_cell=2)
    rows = rows.set_column(
        rows.schema.get_field_index("brand_name"), "brand_name", pa.array(["A\x00c\x00me", None])
    )
    tags = pa.array([["a\x00", None, "b"], None], type=pa.list_(pa.string()))
    rows = rows.set_column(rows.schema.get_field_index("tags"), "tags", tags)
    out = encode_rows(rows, _plan(rows, None))
    assert out["brand_name"].to_pylist() == ["A\ufffdc\ufffdme", None]
    assert out["tags"].to_pylist() == [["a\ufffd", None, "b"], None]
    assert not any("\x00" in str(v) for col in out.columns for v in col.to_pylist())


def test_text_without_nul_is_loaded_as_it_came_without_a_copy() -> None:
    rows = mention_rows("b1", [D1, D2])
    out = encode_rows(rows, _plan(rows, None))
    for name in ("id", "brand_name", "tags"):
        assert out[name].chunks[0].buffers()[-1].address == rows[name].chunks[0].buffers()[-1].address


def test_a_sliced_list_column_keeps_its_rows_when_cleaned() -> None:
    tags = pa.array([["x\x00"], ["a", "b\x00"], None, ["c"]], type=pa.list_(pa.string())).slice(1, 3)
    cleaned = clean_column(pa.chunked_array([tags]))
    assert cleaned.to_pylist() == [["a", "b\ufffd"], None, ["c"]]


def test_scopes_are_cleaned_like_the_rows_they_replace() -> None:
    sc = scope(("b\x001", "b2"), D1, D2, ("chat\x00gpt",))
    assert clean_scope(sc) == scope(("b\ufffd1", "b2"), D1, D2, ("chat\ufffdgpt",))
    clean = scope(("b1",), D1, D2)
    assert clean_scope(clean) == clean
