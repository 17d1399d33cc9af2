"""Transforms: API rows to typed Arrow tables, unknown fields kept, rows split by partition."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from resources.warehouse.contract import Column, TableSpec
from sync import tables
from sync.planning import Box, Window
from sync.transforms import (
    TooManyFieldsError,
    TransformError,
    _converter,
    check_new_columns,
    citation_trend_table,
    cited_pages_table,
    competitor_trend_table,
    concat,
    filter_cells,
    keep_rows,
    mentions_table,
    rows_to_table,
    select_box,
)

D = dt.date(2024, 3, 1)


def mention(i: int, day: str = "2024-03-01", engine: str = "chatgpt", **extra: object) -> dict:
    return {
        "id": f"m{i}",
        "response_id": f"r{i}",
        "brand_name": "Acme",
        "position": 1,
        "sentiment": 0.5,
        "prompt_id": "p1",
        "engine": engine,
        "checked_on": day,
        **extra,
    }


def test_known_fields_get_the_spec_types() -> None:
    table = mentions_table([mention(1)], "b1")
    assert table.schema.field("checked_on").type == pa.date32()
    assert table.schema.field("position").type == pa.float64()
    assert table.column("checked_on").to_pylist() == [D]
    assert table.column("brand_id").to_pylist() == ["b1"]


def test_timestamps_are_utc_and_lists_stay_lists() -> None:
    table = rows_to_table(
        tables.BRANDS,
        [
            {
                "id": "b1",
                "name": "Acme",
                "aliases": ["A"],
                "engines": ["claude"],
                "created_at": "2024-01-02T03:04:05Z",
            }
        ],
    )
    assert table.column("created_at").to_pylist()[0] == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert table.column("aliases").to_pylist() == [["A"]]
    assert table.schema.field("created_at").type == tables.TIMESTAMP


def test_unknown_fields_are_kept_scalars_typed_and_nested_as_json() -> None:
    table = mentions_table([mention(1, score=3, meta={"k": [1]}), mention(2)], "b1")
    assert table.column_names[-2:] == ["meta", "score"]
    assert table.column("score").to_pylist() == [3, None]
    assert table.column("meta").to_pylist() == ['{"k": [1]}', None]


def test_a_wrong_type_in_a_known_field_names_table_and_column() -> None:
    with pytest.raises(TransformError, match=r"prompt_mentions\.checked_on"):
        mentions_table([mention(1, day="yesterday")], "b1")


def test_a_missing_required_value_is_an_error() -> None:
    row = mention(1)
    del row["prompt_id"]
    with pytest.raises(TransformError, match="prompt_id"):
        mentions_table([row], "b1")


def test_cited_pages_are_ranked_in_api_order_with_the_envelope() -> None:
    rows = [{"url": "https://a/x", "citation_count": 5}, {"url": "https://b/y", "citation_count": 2}]
    table = cited_pages_table(
        rows, brand_id="b1", day=D, engine="all", total_count=9, total_citations=20, capped=True
    )
    assert table.column("rank").to_pylist() == [1, 2]
    assert table.column("engine").to_pylist() == ["all", "all"]
    assert table.column("capped").to_pylist() == [True, True]


def test_citation_trend_points_carry_the_flattened_target() -> None:
    data = {
        "target": {"type": "domain", "value": "rival.com", "is_own_domain": False},
        "series": [
            {
                "date": "2024-03-01",
                "citations": 2,
                "avg_position": 1.5,
                "brand_total_citations": 10,
                "share": 20.0,
            }
        ],
        "summary": {"citations": 2},
    }
    table = citation_trend_table(data, brand_id="b1", engine="all")
    assert table.to_pylist() == [  # without the request's window the summary cannot be dated: day rows only
        {
            "brand_id": "b1",
            "engine": "all",
            "granularity": "day",
            "target_type": "domain",
            "target_value": "rival.com",
            "topic_id": "all",
            "is_own_domain": False,
            "date": D,
            "period_start": D,
            "citations": 2,
            "avg_position": 1.5,
            "brand_total_citations": 10,
            "share": 20.0,
            "change_absolute": None,
            "change_percentage": None,
        }
    ]


def test_the_citation_trend_summary_lands_as_a_window_row_on_the_windows_last_day() -> None:
    data = {
        "target": {"type": "url", "value": "https://acme.com/guide", "is_own_domain": True},
        "series": [{"date": "2024-03-01", "citations": 2, "avg_position": 1.5, "brand_total_citations": 10}],
        "summary": {
            "citations": 7,
            "avg_position": 2.25,
            "share": 14.0,
            "brand_total_citations": 50,
            "change": {"absolute": -3, "percentage": -30.0},
        },
    }
    window = Window(D - dt.timedelta(days=6), D + dt.timedelta(days=1))
    table = citation_trend_table(data, brand_id="b1", engine="claude", topic_id="t1", window=window)
    day, summary = table.to_pylist()
    assert (day["granularity"], day["topic_id"], day["target_type"]) == ("day", "t1", "url")
    assert summary == {
        "brand_id": "b1",
        "engine": "claude",
        "granularity": "window",
        "target_type": "url",
        "target_value": "https://acme.com/guide",
        "topic_id": "t1",
        "is_own_domain": True,
        "date": D,
        "period_start": window.start,
        "citations": 7,
        "avg_position": 2.25,
        "brand_total_citations": 50,
        "share": 14.0,
        "change_absolute": -3.0,
        "change_percentage": -30.0,
    }


def test_competitor_trends_land_every_entity_series() -> None:
    point = {"date": "2024-03-01", "responses_answered": 10, "mention_count": 3, "share_of_voice": 60.0}
    data = {
        "granularity": "day",
        "engine": None,
        "brand": {
            "id": None,
            "brand_name": "Acme",
            "is_your_brand": True,
            "domains": ["acme.com"],
            "history_from": None,
            "totals": {},
            "series": [point],
        },
        "competitors": [
            {
                "id": "c1",
                "brand_name": "Rival",
                "is_your_brand": False,
                "domains": [],
                "history_from": "2024-01-01",
                "totals": {},
                "series": [point, point],
            }
        ],
    }
    table = competitor_trend_table(data, brand_id="b1", engine="all")
    assert table.column("competitor_id").to_pylist() == [None, "c1", "c1"]
    assert table.column("granularity").to_pylist() == ["day"] * 3
    assert "totals" not in table.column_names


def test_filter_cells_keeps_only_the_runs_date_engine_cells() -> None:
    rows = [
        mention(1, "2024-03-01", "chatgpt"),
        mention(2, "2024-03-02", "chatgpt"),
        mention(3, "2024-03-01", "claude"),
    ]
    table = filter_cells(mentions_table(rows, "b1"), "checked_on", {(D, "chatgpt")})
    assert table.column("id").to_pylist() == ["m1"]


def test_select_box_is_half_open_in_dates() -> None:
    rows = [mention(1, "2024-03-01"), mention(2, "2024-03-02"), mention(3, "2024-03-03")]
    box = Box(Window(D, D + dt.timedelta(days=2)), ("chatgpt",))
    assert select_box(mentions_table(rows, "b1"), "checked_on", box).column("id").to_pylist() == ["m1", "m2"]


def test_concat_tolerates_parts_with_different_extra_columns() -> None:
    table = concat(
        tables.PROMPT_MENTIONS, [mentions_table([mention(1, x=1)], "b1"), mentions_table([mention(2)], "b1")]
    )
    assert table.num_rows == 2 and table.column("x").to_pylist() == [1, None]


def test_concat_lands_the_parts_in_one_contiguous_piece_in_order() -> None:
    parts = [mentions_table([mention(i)], "b1") for i in range(50)]
    table = concat(tables.PROMPT_MENTIONS, parts)
    assert {table.column(name).num_chunks for name in table.column_names} == {1}
    assert table.column("id").to_pylist() == pa.concat_tables(parts).column("id").to_pylist()


def test_keep_rows_returns_the_table_itself_when_every_row_is_kept() -> None:
    table = mentions_table([mention(1), mention(2)], "b1")
    assert keep_rows(table, pa.array([True, True])) is table  # no copy of the rows
    assert keep_rows(table, pa.array([True, None])).column("id").to_pylist() == ["m1"]  # null drops
    assert keep_rows(table, pa.array([False, True])).column("id").to_pylist() == ["m2"]
    empty = table.slice(0, 0)
    assert keep_rows(empty, pa.array([], pa.bool_())) is empty


def test_filter_cells_handles_engines_with_different_dates() -> None:
    rows = [
        mention(1, "2024-03-01", "chatgpt"),
        mention(2, "2024-03-02", "chatgpt"),
        mention(3, "2024-03-01", "claude"),
        mention(4, "2024-03-02", "claude"),
    ]
    cells = {(D, "chatgpt"), (D, "claude"), (D + dt.timedelta(days=1), "claude")}
    table = filter_cells(mentions_table(rows, "b1"), "checked_on", cells)
    assert sorted(table.column("id").to_pylist()) == ["m1", "m3", "m4"]


def one_column(arrow_type: pa.DataType) -> TableSpec:
    return TableSpec(
        name="t", description="t", columns=(Column("c", arrow_type, "c"),), key=("c",), kind="snapshot"
    )


@pytest.mark.parametrize(
    ("arrow_type", "values"),
    [
        (pa.date32(), ["2024-03-01", None, "2024-03-02T10:00:00Z", dt.date(2024, 3, 3)]),
        (
            tables.TIMESTAMP,
            ["2024-03-01T10:00:00Z", "2024-03-01T10:00:00+02:00", "2024-03-01T10:00:00", None],
        ),
        (pa.int64(), [1, None, 2.0, 3]),
        (pa.float64(), [1, 2.5, None]),
        (pa.bool_(), [True, None, False]),
        (pa.string(), ["a", None, "b"]),
        (pa.list_(pa.string()), [["a"], None, ["b", "c"]]),
    ],
)
def test_arrows_fast_conversion_gives_the_python_converters_values(
    arrow_type: pa.DataType, values: list[object]
) -> None:
    expected = pa.array([_converter(arrow_type)(v) for v in values], type=arrow_type)
    spec = one_column(arrow_type)
    # each value alone (Arrow's cast takes it or leaves it to the converters), then all together
    for value in values:
        alone = rows_to_table(spec, [{"c": value}])["c"].combine_chunks().to_pylist()
        assert alone == pa.array([_converter(arrow_type)(value)], type=arrow_type).to_pylist()
    assert (
        rows_to_table(spec, [{"c": v} for v in values])["c"].combine_chunks().to_pylist()
        == expected.to_pylist()
    )


@pytest.mark.parametrize(
    ("arrow_type", "value"), [(pa.int64(), True), (pa.int64(), 2.5), (pa.float64(), False)]
)
def test_a_value_arrow_would_coerce_silently_is_still_an_error(
    arrow_type: pa.DataType, value: object
) -> None:
    spec = one_column(arrow_type)
    with pytest.raises(TransformError, match=r"t\.c"):
        rows_to_table(spec, [{"c": 1}, {"c": value}])


def test_more_unknown_fields_than_the_bound_are_refused_naming_table_count_and_setting() -> None:
    """1,500 unknown fields a row: refused, not 1,500 columns (nor one JSON column of them)."""
    spec = tables.PROMPT_MENTIONS
    table = mentions_table([mention(1, **{f"f{i:04d}": i for i in range(1500)})], "b1")
    with pytest.raises(TooManyFieldsError) as caught:
        check_new_columns(spec, table.column_names, 50)
    assert str(caught.value).startswith("prompt_mentions: the service sent 1500 unknown fields (f0000, ")
    assert "VISIBILITY_MAX_NEW_COLUMNS=50" in str(caught.value) and caught.value.table == "prompt_mentions"
    check_new_columns(spec, table.column_names, 1500)  # the bound itself is allowed
    check_new_columns(spec, [c.name for c in spec.columns], 0)  # declared columns never count
    with pytest.raises(TooManyFieldsError, match="1 unknown fields"):
        check_new_columns(spec, [*table.column_names[:-1500], "f0000"], 0)
