"""Competitor trend responses -> rows: days, weeks owned by their Sunday, and the window's totals."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from sync.planning import Window
from sync.transforms import TransformError, competitor_trend_table

MONDAY = dt.date(2026, 10, 19)


def entity(name: str, series: list[dict[str, Any]], totals: Any) -> dict[str, Any]:
    return {
        "id": None if name == "Acme" else "c1",
        "brand_name": name,
        "is_your_brand": name == "Acme",
        "domains": [f"{name.lower()}.com"],
        "history_from": "2026-01-01",
        "totals": totals,
        "series": series,
    }


def response(granularity: str, dates: list[str], **extra: Any) -> dict[str, Any]:
    series = [{"date": d, "mention_count": 2, "share_of_voice": 50.0} for d in dates]
    totals = {"mention_count": 2 * len(dates), "share_of_voice": 50.0}
    return {
        "granularity": granularity,
        "from": dates[0],
        "to": "2026-10-26",
        "brand": entity("Acme", series, totals),
        "competitors": [entity("Rival", series, totals)],
        **extra,
    }


def periods(table: Any) -> list[tuple[str, str, dt.date, dt.date, int]]:
    return sorted(
        zip(
            table["granularity"].to_pylist(),
            table["brand_name"].to_pylist(),
            table["period_start"].to_pylist(),
            table["date"].to_pylist(),
            table["mention_count"].to_pylist(),
            strict=True,
        )
    )


def test_a_week_point_covers_monday_to_sunday_and_belongs_to_the_sunday() -> None:
    table = competitor_trend_table(response("week", ["2026-10-19"]), brand_id="b1", engine="all")
    sunday = MONDAY + dt.timedelta(days=6)
    assert periods(table) == [("week", "Acme", MONDAY, sunday, 2), ("week", "Rival", MONDAY, sunday, 2)]


def test_a_day_response_lands_its_points_and_with_totals_one_window_row_per_entity() -> None:
    data = response("day", ["2026-10-24", "2026-10-25"])
    table = competitor_trend_table(data, brand_id="b1", engine="claude", totals=True)
    day1, day2, first = dt.date(2026, 10, 24), dt.date(2026, 10, 25), dt.date(2026, 10, 24)
    assert periods(table) == [
        ("day", "Acme", day1, day1, 2),
        ("day", "Acme", day2, day2, 2),
        ("day", "Rival", day1, day1, 2),
        ("day", "Rival", day2, day2, 2),
        ("window", "Acme", first, day2, 4),  # `to` is exclusive: the window's last day is the 25th
        ("window", "Rival", first, day2, 4),
    ]
    assert set(table["engine"].to_pylist()) == {"claude"}
    assert "totals" not in table.column_names and "series" not in table.column_names


def test_without_totals_a_day_response_lands_its_points_only() -> None:
    table = competitor_trend_table(response("day", ["2026-10-25"]), brand_id="b1", engine="all")
    assert set(table["granularity"].to_pylist()) == {"day"}


def test_a_response_without_from_and_to_takes_the_requests_window() -> None:
    data = response("day", ["2026-10-25"])
    del data["from"], data["to"]
    window = Window(dt.date(2026, 10, 20), dt.date(2026, 10, 26))
    table = competitor_trend_table(data, brand_id="b1", engine="all", totals=True, window=window)
    windows = {(p[2], p[3]) for p in periods(table) if p[0] == "window"}
    assert windows == {(dt.date(2026, 10, 20), dt.date(2026, 10, 25))}


def test_a_week_that_does_not_start_on_monday_is_refused_naming_the_column() -> None:
    with pytest.raises(TransformError, match="period_start") as raised:
        competitor_trend_table(response("week", ["2026-10-20"]), brand_id="b1", engine="all")
    assert raised.value.column == "period_start" and raised.value.table == "competitor_trends"


def test_totals_that_are_not_an_object_are_refused() -> None:
    data = response("day", ["2026-10-25"])
    data["brand"]["totals"] = [1, 2]
    with pytest.raises(TransformError, match="totals"):
        competitor_trend_table(data, brand_id="b1", engine="all", totals=True)


def test_a_bucket_date_that_is_not_a_date_is_refused() -> None:
    with pytest.raises(TransformError, match="not a date"):
        competitor_trend_table(response("day", ["yesterday"]), brand_id="b1", engine="all")
