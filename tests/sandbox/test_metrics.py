"""Metric formulas as pure functions: ratios of summed counts, Monday weeks, citation change."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from sandbox import metrics
from sandbox.world import Block


def counts(
    answered: int,
    with_brand: int,
    citations: int,
    sum_pos: float,
    sum_inv: float,
    top3: int,
    wins: int,
    sum_sent: float,
) -> np.ndarray:
    return np.array(
        [answered, with_brand, with_brand, citations, sum_pos, sum_inv, top3, wins, sum_sent], float
    )


def test_metrics_follow_the_documented_formulas() -> None:
    m = metrics.entity_metrics(counts(10, 4, 3, 8.0, 2.0, 3, 1, 1.2), sov_mentions=8)
    assert m["detection_rate"] == 40.0
    assert m["visibility_score"] == pytest.approx(100 * (0.5 * 2.0 + 0.5 * 3) / 10)
    assert m["avg_position"] == 2.0
    assert m["avg_sentiment"] == pytest.approx(0.3)
    assert m["top3_visibility"] == 30.0
    assert m["win_rate"] == 10.0
    assert m["share_of_voice"] == 50.0
    assert m["citation_count"] == 3


def test_named_first_in_every_answer_scores_full_visibility() -> None:
    m = metrics.entity_metrics(counts(5, 5, 0, 5.0, 5.0, 5, 5, 0.0), sov_mentions=5)
    assert m["visibility_score"] == 100.0 and m["win_rate"] == 100.0 and m["detection_rate"] == 100.0


def test_entity_never_named_has_null_averages_and_zero_rates() -> None:
    m = metrics.entity_metrics(counts(7, 0, 0, 0.0, 0.0, 0, 0, 0.0), sov_mentions=0)
    assert m["avg_position"] is None and m["avg_sentiment"] is None
    assert m["detection_rate"] == 0.0 and m["share_of_voice"] == 0.0 and m["top3_visibility"] == 0.0


def test_rollup_is_computed_from_summed_counts_not_averaged_rates() -> None:
    small = counts(2, 2, 0, 2.0, 2.0, 2, 2, 0.0)  # 100% detection on 2 answers
    large = counts(98, 0, 0, 0.0, 0.0, 0, 0, 0.0)  # 0% detection on 98 answers
    rollup = metrics.entity_metrics(small + large, sov_mentions=2)
    assert rollup["detection_rate"] == 2.0
    average = (
        metrics.entity_metrics(small, 2)["detection_rate"]
        + metrics.entity_metrics(large, 0)["detection_rate"]
    ) / 2
    assert rollup["detection_rate"] != average


def test_share_of_voice_over_the_listed_entities_sums_to_100() -> None:
    matrix = np.stack([counts(10, w, 0, w, w, 0, 0, 0.0) for w in (3, 5, 1)])
    assert sum(m["share_of_voice"] for m in metrics.entities_metrics(matrix)) == pytest.approx(
        100.0, abs=1e-3
    )


@pytest.mark.parametrize("day", [dt.date(2026, 10, 5) + dt.timedelta(days=i) for i in range(7)])
def test_week_buckets_start_on_the_monday_of_the_week(day: dt.date) -> None:
    start = metrics.bucket_start(day, "week")
    assert start.weekday() == 0 and start <= day < start + dt.timedelta(days=7)
    assert metrics.bucket_start(day, "day") == day


def test_grouping_by_week_sums_the_days_of_each_week() -> None:
    days = [
        (dt.date(2026, 10, 4) + dt.timedelta(days=i), np.full((1, metrics.N_COUNTS), float(i)))
        for i in range(9)
    ]
    weeks = metrics.group_by_bucket(days, "week")
    assert [w for w, _ in weeks] == [dt.date(2026, 9, 28), dt.date(2026, 10, 5), dt.date(2026, 10, 12)]
    assert [float(c[0, 0]) for _, c in weeks] == [0.0, sum(range(1, 8)), 8.0]


def test_block_counts_read_positions_sentiment_and_own_site_citations() -> None:
    position = np.array([[1, 2, 0], [0, 1, 3], [0, 0, 0]], dtype=np.int8)
    sentiment = np.array([[50, -20, 0], [0, 10, 30], [0, 0, 0]], dtype=np.int8)
    cited = np.array([[0, 2, -1], [1, -1, -1], [-1, -1, -1]], dtype=np.int16)
    block = Block(np.array([True, True, False]), position, sentiment, cited)
    page_owner = np.array([0, -1, 1], dtype=np.int16)  # page 0 is the brand's, page 2 competitor 1's
    out = metrics.block_counts(block, page_owner)
    assert out[:, 0].tolist() == [2, 2, 2]  # answered, for every entity
    assert out[:, 1].tolist() == [1, 2, 1]  # answers naming each
    assert out[:, 3].tolist() == [1, 1, 0]  # own-site citations
    assert out[:, 4].tolist() == [1, 3, 3]  # sum of positions
    assert out[:, 6].tolist() == [1, 2, 1]  # top 3
    assert out[:, 7].tolist() == [1, 1, 0]  # named first
    assert out[:, 8].tolist() == pytest.approx([0.5, -0.1, 0.3])


def test_citation_change_compares_the_later_half_with_the_earlier_half() -> None:
    assert metrics.citation_change(10, 15) == {"absolute": 5.0, "percentage": 50.0}
    assert metrics.citation_change(0, 0) == {"absolute": 0.0, "percentage": 0.0}
    assert metrics.citation_change(0, 3) == {"absolute": 3.0, "percentage": 100.0}
    points = [(dt.date(2026, 10, d), c, float(c), 10) for d, c in ((1, 2), (2, 4), (3, 1), (4, 5))]
    summary = metrics.citation_summary(points, midpoint=dt.date(2026, 10, 3))
    assert summary["change"] == {"absolute": 0.0, "percentage": 0.0}
    assert summary["citations"] == 12 and summary["brand_total_citations"] == 40 and summary["share"] == 0.3


def test_pages_rank_by_count_then_index_with_totals_over_all_pages() -> None:
    order, total_count, total_citations = metrics.rank_pages(np.array([3, 0, 5, 3]), np.zeros(4), limit=2)
    assert order == [2, 0] and total_count == 3 and total_citations == 11
