"""The competitor history sensor's decisions, as pure functions."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.sensors.audit_cursor import CursorError
from pipelines.sensors.competitor_history import (
    HistoryState,
    ObservedCompetitor,
    advance,
    dump_cursor,
    parse_cursor,
    partition_keys_from,
)

D1 = dt.date(2026, 3, 1)


def comp(
    cid: str, history_from: dt.date | None, brand: str = "b1", since: str = "2026-04-01T00:00:00Z"
) -> ObservedCompetitor:
    return ObservedCompetitor(
        brand_id=brand, competitor_id=cid, history_from=history_from, tracked_since=since
    )


def test_first_tick_takes_a_baseline_and_fires_nothing() -> None:
    state, due = advance(HistoryState(), [comp("c1", D1), comp("c2", None)], listed_brands=["b1"])
    assert due == []
    assert state.initialized
    assert state.seen == {"b1:c1": D1.isoformat(), "b1:c2": None}


def test_null_to_date_fires_once() -> None:
    state, _ = advance(HistoryState(), [comp("c2", None)], listed_brands=["b1"])
    state, due = advance(state, [comp("c2", D1)], listed_brands=["b1"])
    assert [(d.competitor_id, d.history_from) for d in due] == [("c2", D1)]
    state, again = advance(state, [comp("c2", D1)], listed_brands=["b1"])
    assert again == []


def test_still_null_fires_nothing() -> None:
    state, _ = advance(HistoryState(), [comp("c2", None)], listed_brands=["b1"])
    _, due = advance(state, [comp("c2", None)], listed_brands=["b1"])
    assert due == []


def test_competitor_tracked_and_backfilled_between_ticks_fires() -> None:
    state, _ = advance(HistoryState(), [comp("c1", D1)], listed_brands=["b1"])
    _, due = advance(state, [comp("c1", D1), comp("c3", D1)], listed_brands=["b1"])
    assert [d.competitor_id for d in due] == ["c3"]


def test_retracking_is_a_new_episode_that_fires_again() -> None:
    state, _ = advance(HistoryState(), [comp("c2", None)], listed_brands=["b1"])
    state, first = advance(state, [comp("c2", D1)], listed_brands=["b1"])
    state, _ = advance(state, [], listed_brands=["b1"])  # untracked
    state, _ = advance(state, [comp("c2", None, since="2026-05-01T00:00:00Z")], listed_brands=["b1"])
    state, second = advance(state, [comp("c2", D1, since="2026-05-01T00:00:00Z")], listed_brands=["b1"])
    assert len(first) == 1 and len(second) == 1


def test_brand_that_failed_to_list_keeps_its_memory() -> None:
    state, _ = advance(HistoryState(), [comp("c2", None, brand="b2")], listed_brands=["b2"])
    state, _ = advance(state, [], listed_brands=["b1"])  # b2 not listed this tick
    _, due = advance(state, [comp("c2", D1, brand="b2")], listed_brands=["b2"])
    assert [d.competitor_id for d in due] == ["c2"]


def test_cursor_round_trips_and_refuses_other_versions() -> None:
    state, _ = advance(HistoryState(), [comp("c2", None)], listed_brands=["b1"])
    state, _ = advance(state, [comp("c2", D1)], listed_brands=["b1"])
    assert parse_cursor(dump_cursor(state)) == state
    assert parse_cursor(None) == HistoryState()
    with pytest.raises(CursorError):
        parse_cursor('{"version": 2}')


def test_partition_keys_from_keeps_the_date_and_later_in_order() -> None:
    keys = ["2026-02-28|all", "2026-03-01|chatgpt", "2026-03-01|all", "2026-03-02|chatgpt"]
    assert partition_keys_from(D1, keys) == keys[1:]
    assert partition_keys_from(dt.date(2027, 1, 1), keys) == []


def test_a_brand_that_failed_to_list_is_not_taken_for_new_when_it_lists_again() -> None:
    """Its competitors' history was known before the failed listing: seeing it again is no news."""
    state, _ = advance(HistoryState(), [comp("c1", D1, brand="b2")], listed_brands=["b2"])
    state, _ = advance(state, [comp("c9", None)], listed_brands=["b1"])  # b2's listing failed
    assert state.seen["b2:c1"] == D1.isoformat()
    _, due = advance(state, [comp("c1", D1, brand="b2")], listed_brands=["b2"])
    assert due == []
