"""Metric formulas: pure functions from raw answers to daily counts, and from counts to metrics.

Every metric is a ratio of *counts*, and counts add up. Rolling up (engines into ``all``, days into
weeks, a window into totals) therefore sums counts first and computes ratios last, so a rollup is
never an average or a sum of per-engine rates.

Counts of one entity (the brand or a competitor) over a set of answers of the brand:

- ``responses_answered``: the brand's answered responses (the same for every entity: it is the
  denominator of detection, visibility, win rate and top-3).
- ``responses_with_brand``: answers naming the entity; ``mention_count``: its mentions (an answer
  names an entity at most once, so the two are equal in the sandbox).
- ``citation_count``: citations of the entity's own website (any subdomain) in those answers.
- ``sum_position``, ``sum_inverse_position``, ``top3_count``, ``win_count``, ``sum_sentiment``.

Formulas (0-100 unless noted; ``A`` = responses_answered, ``W`` = responses_with_brand):

- ``detection_rate = 100 * W / A``
- ``top3_visibility = 100 * top3_count / A`` (null when ``A`` is 0)
- ``visibility_score = 100 * (0.5 * sum_inverse_position + 0.5 * top3_count) / A``: detection where
  each mention is weighted half by ``1/position`` and half by whether it is in the top 3; named
  first in every answer gives 100.
- ``win_rate = 100 * win_count / A`` (named first)
- ``avg_position = sum_position / W``, ``avg_sentiment = sum_sentiment / mention_count`` (null
  when 0); sentiment is in -1..1, positions start at 1.
- ``share_of_voice = 100 * mention_count / (mentions of the brand + its tracked competitors)``,
  0 when nobody was named; over the listed entities it sums to 100 on every bucket with mentions.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sandbox.world import Block

COUNT_FIELDS: tuple[str, ...] = (
    "responses_answered",
    "responses_with_brand",
    "mention_count",
    "citation_count",
    "sum_position",
    "sum_inverse_position",
    "top3_count",
    "win_count",
    "sum_sentiment",
)
N_COUNTS = len(COUNT_FIELDS)
_A, _W, _M, _C, _SP, _SIP, _T3, _WIN, _SS = range(N_COUNTS)

_DIGITS = 4


def block_counts(block: Block, page_owner: np.ndarray, prompt_mask: np.ndarray | None = None) -> np.ndarray:
    """Counts (C x COUNT_FIELDS) of every cast member over the answers of one block."""
    answered, position, sentiment, cited = block.answered, block.position, block.sentiment, block.cited_page
    if prompt_mask is not None:
        answered, position, sentiment, cited = (
            answered[prompt_mask],
            position[prompt_mask],
            sentiment[prompt_mask],
            cited[prompt_mask],
        )
    n_cast = position.shape[1]
    pos = position.astype(np.int16)
    named = pos > 0
    out = np.zeros((n_cast, N_COUNTS))
    out[:, _A] = int(answered.sum())
    out[:, _W] = named.sum(axis=0)
    out[:, _M] = out[:, _W]
    owners = page_owner[cited[cited >= 0]]
    out[:, _C] = np.bincount(owners[owners >= 0], minlength=n_cast)[:n_cast]
    out[:, _SP] = pos.sum(axis=0)
    out[:, _SIP] = np.where(named, 1.0 / np.maximum(pos, 1), 0.0).sum(axis=0)
    out[:, _T3] = (named & (pos <= 3)).sum(axis=0)
    out[:, _WIN] = (pos == 1).sum(axis=0)
    out[:, _SS] = sentiment.sum(axis=0, dtype=np.int64) / 100.0
    return out


def _ratio(numerator: float, denominator: float, scale: float = 100.0) -> float:
    return round(scale * numerator / denominator, _DIGITS) if denominator else 0.0


def _nullable(numerator: float, denominator: float, scale: float = 1.0) -> float | None:
    return round(scale * numerator / denominator, _DIGITS) if denominator else None


def entity_metrics(counts: Sequence[float], sov_mentions: float) -> dict[str, Any]:
    """CompetitorTrendMetrics of one entity from its counts and the share-of-voice denominator."""
    answered, with_brand, mentions = counts[_A], counts[_W], counts[_M]
    return {
        "responses_answered": int(answered),
        "responses_with_brand": int(with_brand),
        "mention_count": int(mentions),
        "citation_count": int(counts[_C]),
        "detection_rate": _ratio(with_brand, answered),
        "visibility_score": _ratio(0.5 * counts[_SIP] + 0.5 * counts[_T3], answered),
        "avg_position": _nullable(counts[_SP], with_brand),
        "avg_sentiment": _nullable(counts[_SS], mentions),
        "top3_visibility": _nullable(counts[_T3], answered, 100.0),
        "win_rate": _ratio(counts[_WIN], answered),
        "share_of_voice": _ratio(mentions, sov_mentions),
    }


def bucket_start(day: dt.date, granularity: str) -> dt.date:
    """The day itself, or the Monday of its ISO week."""
    return day if granularity == "day" else day - dt.timedelta(days=day.weekday())


def group_by_bucket(
    daily: Iterable[tuple[dt.date, np.ndarray]], granularity: str
) -> list[tuple[dt.date, np.ndarray]]:
    """Sum daily count matrices into buckets, in date order."""
    buckets: dict[dt.date, np.ndarray] = {}
    for day, counts in daily:
        start = bucket_start(day, granularity)
        buckets[start] = buckets[start] + counts if start in buckets else counts.copy()
    return sorted(buckets.items(), key=lambda item: item[0])


def entities_metrics(counts: np.ndarray) -> list[dict[str, Any]]:
    """Metrics of every row of an (entities x COUNT_FIELDS) matrix; share of voice over those rows."""
    sov_total = float(counts[:, _M].sum())
    return [entity_metrics(row, sov_total) for row in counts]


# -- citations ----------------------------------------------------------------------------------


def citation_point(day: dt.date, citations: int, sum_position: float, brand_total: int) -> dict[str, Any]:
    """One day of a citation trend; ``avg_position`` is 0 on a day without citations of the target."""
    return {
        "date": day.isoformat(),
        "citations": int(citations),
        "avg_position": round(sum_position / citations, _DIGITS) if citations else 0.0,
        "brand_total_citations": int(brand_total),
        "share": round(citations / brand_total, _DIGITS) if brand_total else 0.0,
    }


def citation_change(earlier: int, later: int) -> dict[str, float]:
    """``summary.change``: citations of the later half of the window against the earlier half.

    The window ``[from, to)`` is split at ``from + (to - from) // 2`` days; days without a run count
    as nothing. ``absolute = later - earlier``; ``percentage = 100 * absolute / earlier``, or 0 when
    both are 0 and 100 when only ``earlier`` is 0.
    """
    absolute = later - earlier
    if earlier:
        return {"absolute": float(absolute), "percentage": round(100.0 * absolute / earlier, _DIGITS)}
    percentage = 0.0 if absolute == 0 else 100.0
    return {"absolute": float(absolute), "percentage": percentage}


def citation_summary(points: Sequence[tuple[dt.date, int, float, int]], midpoint: dt.date) -> dict[str, Any]:
    """Window totals of a citation trend from its daily ``(date, citations, sum_position, total)``."""
    citations = sum(p[1] for p in points)
    sum_position = sum(p[2] for p in points)
    total = sum(p[3] for p in points)
    earlier = sum(p[1] for p in points if p[0] < midpoint)
    later = citations - earlier
    return {
        "citations": int(citations),
        "avg_position": round(sum_position / citations, _DIGITS) if citations else 0.0,
        "share": round(citations / total, _DIGITS) if total else 0.0,
        "brand_total_citations": int(total),
        "change": citation_change(earlier, later),
    }


def rank_pages(counts: np.ndarray, position_sums: np.ndarray, limit: int) -> tuple[list[int], int, int]:
    """Indices of the ``limit`` most-cited pages (count desc, then page index), the number of pages
    cited at all (``total_count``) and the citations across all of them (``total_citations``)."""
    cited = np.flatnonzero(counts)
    order = cited[np.lexsort((cited, -counts[cited]))]
    return [int(i) for i in order[:limit]], int(cited.size), int(counts.sum())
