"""A key column added to a landed table: the existing rows take its default, and the key moves.

``citation_trends`` holds ``granularity`` and ``topic_id`` in its key (the summary's `window` rows,
topic-filtered trends). A table landed without them keeps its rows, read as `day` rows of every
prompt, and takes the new rows on the next landing (on Postgres its primary key moves).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

from resources.warehouse.contract import PartitionScope
from sync import tables
from sync.transforms import rows_to_table
from tests.fixtures_bigquery import BigQueryTarget
from tests.warehouse.conftest import Case

BRAND = "00000000-0000-4000-8000-000000000001"
DAY = dt.date(2026, 10, 20)
ADDED = ("granularity", "topic_id", "period_start", "change_absolute", "change_percentage")
#: citation_trends without the key columns ADDED
EARLIER = dataclasses.replace(
    tables.CITATION_TRENDS,
    columns=tuple(c for c in tables.CITATION_TRENDS.columns if c.name not in ADDED),
    key=("brand_id", "engine", "target_type", "target_value", "date"),
)


def point(day: dt.date, citations: int, **extra: Any) -> dict[str, Any]:
    return {
        "brand_id": BRAND,
        "engine": "all",
        "target_type": "domain",
        "target_value": "acme.com",
        "is_own_domain": True,
        "date": day,
        "citations": citations,
        **extra,
    }


def land_earlier_then_current(wh: Any) -> None:
    scope = PartitionScope((BRAND,), DAY, DAY + dt.timedelta(days=2), ("all",))
    wh.ensure_table(EARLIER)
    earlier = [point(DAY, 1), point(DAY + dt.timedelta(days=1), 2)]
    wh.replace_partitions(EARLIER, rows_to_table(EARLIER, earlier), scope, "r1")
    wh.ensure_table(tables.CITATION_TRENDS)
    # the next landing of the second day: its day row, a topic's day row, and the window's summary
    second = DAY + dt.timedelta(days=1)
    rows = [
        point(second, 3, granularity="day", topic_id="all", period_start=second),
        point(second, 1, granularity="day", topic_id="t1", period_start=second),
        point(second, 4, granularity="window", topic_id="all", period_start=DAY, change_absolute=1.0),
    ]
    later = PartitionScope((BRAND,), second, second + dt.timedelta(days=1), ("all",))
    wh.replace_partitions(tables.CITATION_TRENDS, rows_to_table(tables.CITATION_TRENDS, rows), later, "r2")


def landed(wh: Any) -> list[tuple[Any, ...]]:
    rows = wh.query(
        f"SELECT date, granularity, topic_id, citations FROM {wh.table_ref('citation_trends')} "
        "ORDER BY date, granularity, topic_id"
    ).to_pylist()
    return [(r["date"], r["granularity"], r["topic_id"], r["citations"]) for r in rows]


EXPECTED = [
    (DAY, "day", "all", 1),  # landed without the key columns: read as a `day` row of every prompt
    (DAY + dt.timedelta(days=1), "day", "all", 3),
    (DAY + dt.timedelta(days=1), "day", "t1", 1),
    (DAY + dt.timedelta(days=1), "window", "all", 4),
]


def test_rows_landed_before_a_key_column_existed_take_its_default_and_new_rows_land(case: Case) -> None:
    land_earlier_then_current(case.warehouse)
    assert landed(case.warehouse) == EXPECTED
    if case.keyed_partitions:
        assert case.primary_key("citation_trends") == list(tables.CITATION_TRENDS.key)


def test_bigquery_fills_an_added_key_column_of_the_existing_rows(bigquery_target: BigQueryTarget) -> None:
    dataset = f"keys_{uuid.uuid4().hex[:10]}"
    wh = dataclasses.replace(bigquery_target, dataset=dataset).warehouse()
    try:
        land_earlier_then_current(wh)
        assert landed(wh) == EXPECTED
    finally:
        bigquery_target.client.delete_dataset(
            f"{bigquery_target.project}.{dataset}", delete_contents=True, not_found_ok=True
        )
