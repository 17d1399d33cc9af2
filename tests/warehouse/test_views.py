"""Views on real DuckDB files and a real Postgres server: `_current` views and the analyst views.

The BigQuery emulator's side is at the end: it creates and answers the same views, but derives no
schema for a view, so view column descriptions are checked on real BigQuery only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import uuid
from typing import Any

import pyarrow as pa
import pytest

from resources.warehouse.contract import EVOLVED_COLUMN_DESCRIPTION, PartitionScope, SnapshotScope
from resources.warehouse.types import from_duckdb_type, from_postgres_type, sql_type
from resources.warehouse.views import (
    ANALYST_VIEWS,
    CITATION_TRENDS_DAILY,
    CITED_PAGES_DAILY,
    COMPETITOR_TREND_TOTALS,
    COMPETITOR_TRENDS_WEEKLY,
    LATEST_DAY_PER_BRAND,
    SHARE_OF_VOICE_DAILY,
    TOP_CITED_PAGES,
    TOP_CITED_PAGES_7D,
    TOP_CITED_PAGES_28D,
    ViewSpec,
    column_descriptions,
)
from sync import tables
from sync.transforms import rows_to_table
from tests.fixtures_bigquery import BigQueryTarget
from tests.warehouse.conftest import Case

BRAND = "00000000-0000-4000-8000-000000000001"
OTHER = "00000000-0000-4000-8000-000000000002"
RIVAL = "00000000-0000-4000-8000-0000000000aa"
MON = dt.date(2026, 10, 19)
SUN = MON + dt.timedelta(days=6)


def view_names(case: Case) -> set[str]:
    if case.engine == "duckdb":
        sql = f"SELECT view_name AS name FROM duckdb_views() WHERE schema_name = '{case.schema}'"
    else:
        sql = f"SELECT table_name AS name FROM information_schema.views WHERE table_schema = '{case.schema}'"
    return {r["name"] for r in case.warehouse.query(sql).to_pylist()}


def read(case: Case, view: str, order: str) -> list[dict[str, Any]]:
    return case.warehouse.query(
        f"SELECT * FROM {case.warehouse.table_ref(view)} ORDER BY {order}"
    ).to_pylist()


def brands_rows() -> pa.Table:
    rows = [
        {"id": BRAND, "name": "Acme", "domain": "acme.com", "engines": ["chatgpt"]},
        {"id": OTHER, "name": "Other", "domain": "other.io", "engines": ["chatgpt"]},
    ]
    return rows_to_table(tables.BRANDS, rows)


def trend(
    granularity: str, name: str, first: dt.date, last: dt.date, mentions: int, sov: float
) -> dict[str, Any]:
    return {
        "brand_id": BRAND,
        "engine": "all",
        "granularity": granularity,
        "competitor_id": None if name == "Acme" else RIVAL,
        "brand_name": name,
        "is_your_brand": name == "Acme",
        "domains": [f"{name.lower()}.com"],
        "period_start": first,
        "date": last,
        "responses_answered": 10,
        "mention_count": mentions,
        "share_of_voice": sov,
    }


def trend_rows() -> pa.Table:
    """Two days, the week they end, and the request window's totals: the brand and one rival."""
    rows = []
    for day, (acme, rival) in ((SUN - dt.timedelta(days=1), (3, 1)), (SUN, (1, 1))):
        rows.append(trend("day", "Acme", day, day, acme, 100 * acme / (acme + rival)))
        rows.append(trend("day", "Rival", day, day, rival, 100 * rival / (acme + rival)))
    rows += [trend("week", "Acme", MON, SUN, 20, 60.0), trend("week", "Rival", MON, SUN, 13, 40.0)]
    window_start = SUN - dt.timedelta(days=1)
    rows += [
        trend("window", "Acme", window_start, SUN, 4, 66.6667),
        trend("window", "Rival", window_start, SUN, 2, 33.3333),
    ]
    return rows_to_table(tables.COMPETITOR_TRENDS, rows)


def page(day: dt.date, url: str, root: str, citations: int, *, capped: bool = False) -> dict[str, Any]:
    return {
        "brand_id": BRAND,
        "date": day,
        "engine": "chatgpt",
        "rank": 1,
        "url": url,
        "domain": url.split("/")[2],
        "root_domain": root,
        "citation_count": citations,
        "capped": capped,
    }


def cited_rows() -> pa.Table:
    own, rival = "https://www.acme.com/guide", "https://rival.com/compare"
    rows = [
        page(SUN - dt.timedelta(days=1), own, "ACME.com", 2),
        page(SUN, own, "ACME.com", 3, capped=True),
        page(SUN, rival, "rival.com", 4),
    ]
    return rows_to_table(tables.CITED_PAGES, rows)


TOPIC = "00000000-0000-4000-8000-0000000000t1"


def citation_rows() -> pa.Table:
    """The brand's own domain over every prompt and within one topic, on one day, and a window row."""

    def point(topic: str, citations: int, granularity: str = "day") -> dict[str, Any]:
        return {
            "brand_id": BRAND,
            "engine": "all",
            "granularity": granularity,
            "target_type": "domain",
            "target_value": "acme.com",
            "topic_id": topic,
            "is_own_domain": True,
            "date": SUN,
            "citations": citations,
            "brand_total_citations": 10,
        }

    rows = [point(tables.ALL_TOPICS, 4), point(TOPIC, 3), point(tables.ALL_TOPICS, 9, "window")]
    return rows_to_table(tables.CITATION_TRENDS, rows)


def land_all(case: Case) -> None:
    wh = case.warehouse
    for spec, rows in (
        (tables.BRANDS, brands_rows()),
        (tables.TOPICS, rows_to_table(tables.TOPICS, [{"id": TOPIC, "brand_id": BRAND, "name": "Pricing"}])),
    ):
        wh.ensure_table(spec)
        wh.upsert_snapshot(spec, rows, "run-1", SnapshotScope())
    for spec, rows, engine in (
        (tables.COMPETITOR_TRENDS, trend_rows(), "all"),
        (tables.CITED_PAGES, cited_rows(), "chatgpt"),
        (tables.CITATION_TRENDS, citation_rows(), "all"),
    ):
        wh.ensure_table(spec)
        scope = PartitionScope((BRAND,), MON, SUN + dt.timedelta(days=1), (engine,))
        wh.replace_partitions(spec, rows, scope, "run-1")


def described(view: ViewSpec) -> dict[str | None, str | None]:
    return {None: view.description} | {c.name: c.description for c in view.columns}


# --- `_current` views ----------------------------------------------------------------------------


def test_current_views_carry_the_comments_of_their_tables_columns(case: Case) -> None:
    case.warehouse.ensure_table(tables.BRANDS)
    view, table = case.comments("brands_current"), case.comments("brands")
    assert {k: v for k, v in view.items() if k is not None} == {
        k: v for k, v in table.items() if k is not None
    }
    assert all(view.values())


def test_a_column_the_api_adds_reaches_the_current_view_with_its_comment(case: Case) -> None:
    case.warehouse.ensure_table(tables.BRANDS)
    rows = brands_rows().append_column("tier", pa.array(["gold", "silver"]))
    case.warehouse.upsert_snapshot(tables.BRANDS, rows, "run-1", SnapshotScope())
    assert case.comments("brands_current")["tier"] == EVOLVED_COLUMN_DESCRIPTION
    assert {r["tier"] for r in read(case, "brands_current", "id")} == {"gold", "silver"}


def test_a_current_view_created_without_column_comments_gets_them_on_the_next_landing(case: Case) -> None:
    case.warehouse.ensure_table(tables.BRANDS)
    ref = case.warehouse.table_ref("brands_current")
    with case.warehouse._transaction() as con:  # a view with only its own comment
        con.execute(f'COMMENT ON COLUMN {ref}."name" IS NULL')
    assert case.comments("brands_current")["name"] is None
    case.warehouse.ensure_table(tables.BRANDS)
    assert case.comments("brands_current")["name"] == tables.BRANDS.column("name").description


def test_column_descriptions_name_every_column_in_table_order() -> None:
    names = ["id", "name", "_loaded_at", "is_current", "tier"]
    described_columns = dict(column_descriptions(tables.BRANDS, names))
    assert list(described_columns) == names
    assert described_columns["tier"] == EVOLVED_COLUMN_DESCRIPTION
    assert described_columns["id"] == tables.BRANDS.column("id").description


# --- analyst views -------------------------------------------------------------------------------


def test_a_view_is_created_once_all_its_tables_exist(case: Case) -> None:
    case.warehouse.ensure_table(tables.COMPETITOR_TRENDS)
    assert view_names(case) == set()  # every trend view names the owning brand: it needs brands
    case.warehouse.ensure_table(tables.BRANDS)
    assert view_names(case) == {
        "brands_current",
        COMPETITOR_TRENDS_WEEKLY.name,
        COMPETITOR_TREND_TOTALS.name,
        SHARE_OF_VOICE_DAILY.name,
        LATEST_DAY_PER_BRAND.name,
    }
    case.warehouse.ensure_table(tables.CITED_PAGES)
    assert {TOP_CITED_PAGES.name, TOP_CITED_PAGES_7D.name, TOP_CITED_PAGES_28D.name} <= view_names(case)


@pytest.mark.parametrize("view", ANALYST_VIEWS, ids=lambda v: v.name)
def test_every_analyst_view_has_its_specs_columns_and_comments(case: Case, view: ViewSpec) -> None:
    land_all(case)
    comments = case.comments(view.name)
    selected = case.warehouse.query(f"SELECT * FROM {case.warehouse.table_ref(view.name)} LIMIT 0")
    assert selected.column_names == list(view.column_names)
    parse = from_duckdb_type if case.engine == "duckdb" else from_postgres_type
    assert {n: parse(t) for n, t in case.column_types(view.name).items()} == {
        c.name: sql_type(c.type) for c in view.columns
    }
    assert comments == described(view)


def test_share_of_voice_daily_holds_the_day_rows_with_the_brands_name(case: Case) -> None:
    land_all(case)
    rows = read(case, SHARE_OF_VOICE_DAILY.name, "date, entity_name")
    assert [(r["date"], r["entity_name"], r["mention_count"]) for r in rows] == [
        (SUN - dt.timedelta(days=1), "Acme", 3),
        (SUN - dt.timedelta(days=1), "Rival", 1),
        (SUN, "Acme", 1),
        (SUN, "Rival", 1),
    ]
    assert {r["brand"] for r in rows} == {"Acme"}
    assert [r["share_of_voice"] for r in rows if r["date"] == SUN] == [50.0, 50.0]


def test_latest_day_per_brand_holds_each_entity_on_the_newest_day(case: Case) -> None:
    land_all(case)
    rows = read(case, LATEST_DAY_PER_BRAND.name, "entity_name")
    assert [(r["date"], r["entity_name"], r["is_your_brand"]) for r in rows] == [
        (SUN, "Acme", True),
        (SUN, "Rival", False),
    ]


def test_weekly_and_totals_views_name_their_periods(case: Case) -> None:
    land_all(case)
    weeks = read(case, COMPETITOR_TRENDS_WEEKLY.name, "entity_name")
    assert [(r["entity_name"], r["week_start"], r["week_end"], r["mention_count"]) for r in weeks] == [
        ("Acme", MON, SUN, 20),
        ("Rival", MON, SUN, 13),
    ]
    totals = read(case, COMPETITOR_TREND_TOTALS.name, "entity_name")
    assert [(r["window_start"], r["window_last_day"], r["mention_count"]) for r in totals] == [
        (SUN - dt.timedelta(days=1), SUN, 4),
        (SUN - dt.timedelta(days=1), SUN, 2),
    ]


@pytest.mark.parametrize("view", [SHARE_OF_VOICE_DAILY, COMPETITOR_TRENDS_WEEKLY, COMPETITOR_TREND_TOTALS])
def test_trend_views_carry_the_owning_brand_and_its_share_of_voice_on_every_entitys_row(
    case: Case, view: ViewSpec
) -> None:
    land_all(case)
    rows = read(case, view.name, "1")
    assert {r["brand"] for r in rows} == {"Acme"} and {r["brand_id"] for r in rows} == {BRAND}
    assert {r["entity_name"] for r in rows} == {"Acme", "Rival"}
    for r in rows:  # the rival's row holds the brand's figure of the same period, so no join is needed
        period = r.get("date") or r.get("week_end") or r.get("window_last_day")
        own = next(
            o
            for o in rows
            if o["is_your_brand"]
            and (o.get("date") or o.get("week_end") or o.get("window_last_day")) == period
        )
        assert r["brand_share_of_voice"] == own["share_of_voice"]


def test_recent_top_cited_pages_cover_the_newest_landed_days_of_each_brand_and_engine(case: Case) -> None:
    land_all(case)
    # nine more days of one page, the newest five days ago (a window is landed days, not calendar days)
    days = [SUN - dt.timedelta(days=n) for n in range(14, 5, -1)]
    rows = rows_to_table(tables.CITED_PAGES, [page(d, "https://rival.com/old", "rival.com", 1) for d in days])
    scope = PartitionScope((BRAND,), days[0], days[-1] + dt.timedelta(days=1), ("chatgpt",))
    case.warehouse.replace_partitions(tables.CITED_PAGES, rows, scope, "run-2")
    landed = sorted({*days, SUN - dt.timedelta(days=1), SUN})
    week = read(case, TOP_CITED_PAGES_7D.name, "citation_rank, url")
    assert {(r["window_start"], r["window_end"], r["days_landed"]) for r in week} == {(landed[-7], SUN, 7)}
    assert [(r["url"], r["citations"], r["days_cited"], r["citation_rank"]) for r in week] == [
        ("https://rival.com/old", 5, 5, 1),  # its five newest days only
        ("https://www.acme.com/guide", 5, 2, 1),
        ("https://rival.com/compare", 4, 1, 3),
    ]
    month = read(case, TOP_CITED_PAGES_28D.name, "citation_rank, url")
    assert {(r["window_start"], r["days_landed"]) for r in month} == {(landed[0], len(landed))}
    assert {r["url"]: r["citations"] for r in month}["https://rival.com/old"] == len(days)


def test_citation_trends_daily_names_the_brand_and_the_topic_of_each_day_row(case: Case) -> None:
    land_all(case)
    rows = read(case, CITATION_TRENDS_DAILY.name, "citations")
    assert [(r["brand"], r["date"], r["topic_id"], r["topic"], r["citations"]) for r in rows] == [
        ("Acme", SUN, TOPIC, "Pricing", 3),
        ("Acme", SUN, tables.ALL_TOPICS, None, 4),  # every prompt: no topic; the window row is left out
    ]


def test_cited_pages_daily_names_the_brand_and_flags_its_own_pages(case: Case) -> None:
    land_all(case)
    rows = read(case, CITED_PAGES_DAILY.name, "date, url")
    assert [(r["brand"], r["date"], r["url"], r["is_own_domain"], r["capped"]) for r in rows] == [
        ("Acme", SUN - dt.timedelta(days=1), "https://www.acme.com/guide", True, False),
        ("Acme", SUN, "https://rival.com/compare", False, False),
        ("Acme", SUN, "https://www.acme.com/guide", True, True),
    ]


def test_top_cited_pages_sums_the_days_ranks_and_flags_own_and_capped_pages(case: Case) -> None:
    land_all(case)
    rows = read(case, TOP_CITED_PAGES.name, "citation_rank, url")
    assert [
        (
            r["url"],
            r["domain"],
            r["citations"],
            r["days_cited"],
            r["capped_days"],
            r["citation_rank"],
            r["is_own_domain"],
        )
        for r in rows
    ] == [
        ("https://www.acme.com/guide", "www.acme.com", 5, 2, 1, 1, True),
        ("https://rival.com/compare", "rival.com", 4, 1, 0, 2, False),
    ]
    assert (rows[0]["first_cited"], rows[0]["last_cited"]) == (SUN - dt.timedelta(days=1), SUN)


def test_a_changed_view_spec_re_creates_the_view_on_the_next_landing(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    land_all(case)
    import resources.warehouse.views as views

    narrower = dataclasses.replace(
        COMPETITOR_TRENDS_WEEKLY,
        columns=(COMPETITOR_TRENDS_WEEKLY.columns[0], COMPETITOR_TRENDS_WEEKLY.columns[2]),  # id, engine
        query="SELECT t.brand_id, t.engine FROM {competitor_trends} AS t WHERE t.granularity = 'week'",
    )
    monkeypatch.setattr(views, "ANALYST_VIEWS", (narrower,))
    case.warehouse.ensure_table(tables.COMPETITOR_TRENDS)
    assert set(case.column_types(narrower.name)) == {"brand_id", "engine"}
    assert case.comments(narrower.name) == described(narrower)


def test_a_view_that_cannot_be_created_is_logged_and_the_landing_goes_on(
    case: Case, caplog: pytest.LogCaptureFixture
) -> None:
    case.warehouse.ensure_table(tables.BRANDS)
    ref = case.warehouse.table_ref(SHARE_OF_VOICE_DAILY.name)
    with case.warehouse._transaction() as con:  # a table of the user's where the view belongs
        con.execute(f"CREATE TABLE {ref} (x BIGINT)")
    with caplog.at_level(logging.WARNING, logger="visibility.warehouse"):
        assert case.warehouse.ensure_table(tables.COMPETITOR_TRENDS) == []
    assert any(SHARE_OF_VOICE_DAILY.name in r.getMessage() for r in caplog.records)
    assert COMPETITOR_TRENDS_WEEKLY.name in view_names(case)  # the other views were created
    scope = PartitionScope((BRAND,), MON, SUN + dt.timedelta(days=1), ("all",))
    assert (
        case.warehouse.replace_partitions(tables.COMPETITOR_TRENDS, trend_rows(), scope, "run-1").rows_written
        == 8
    )


# --- BigQuery (emulator; real BigQuery when configured) ----------------------------------------


@pytest.mark.timeout(180)
def test_bigquery_creates_every_view_and_answers_it(bigquery_target: BigQueryTarget) -> None:
    """Views name fixed tables, so this test lands in a dataset of its own (dropped afterwards)."""
    client = bigquery_target.client
    dataset = f"views_{uuid.uuid4().hex[:10]}"
    wh = dataclasses.replace(bigquery_target, dataset=dataset).warehouse()
    try:
        land_all(Case("bigquery", wh, dataset))
        for view in (*ANALYST_VIEWS,):
            table = client.get_table(f"{bigquery_target.project}.{dataset}.{view.name}")
            assert table.table_type == "VIEW" and table.description == view.description
            answered = wh.query(f"SELECT * FROM {wh.table_ref(view.name)}")
            assert answered.column_names == list(view.column_names) and answered.num_rows > 0
            if table.schema:  # real BigQuery derives the view's schema; the emulator does not
                assert {f.name: f.description for f in table.schema} == {
                    c.name: c.description for c in view.columns
                }
        current = client.get_table(f"{bigquery_target.project}.{dataset}.brands_current")
        if current.schema:
            assert all(f.description for f in current.schema)
        top = wh.query(
            f"SELECT url, citations, citation_rank FROM {wh.table_ref(TOP_CITED_PAGES.name)} ORDER BY 3"
        )
        assert top.to_pylist() == [
            {"url": "https://www.acme.com/guide", "citations": 5, "citation_rank": 1},
            {"url": "https://rival.com/compare", "citations": 4, "citation_rank": 2},
        ]
    finally:
        client.delete_dataset(f"{bigquery_target.project}.{dataset}", delete_contents=True, not_found_ok=True)
