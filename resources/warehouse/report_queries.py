"""Read queries of the visual report (``report/``), portable across the three engines.

Same rules as :mod:`resources.warehouse.queries`: the common SQL subset of DuckDB, Postgres and
BigQuery, names through ``table_ref``, every value a ``:name`` query parameter. Every query
reads the service's all-engine rollup (``engine = 'all'``) where the report shows a total: rollup
rates are not sums of per-engine rates (docs/ARCHITECTURE.md), and ``visibility-sync run`` lands the
rollup by default. Windows are ``[start, end)``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from resources.api.endpoints import ALL
from resources.warehouse.base import Warehouse
from resources.warehouse.queries import _rows


@dataclass(frozen=True)
class BrandRow:
    id: str
    name: str
    domain: str | None


@dataclass(frozen=True)
class CompetitorRow:
    brand_id: str
    name: str
    domains: tuple[str, ...]


@dataclass(frozen=True)
class SharePoint:
    brand_id: str
    entity: str
    is_own_brand: bool
    date: dt.date
    share_of_voice: float


@dataclass(frozen=True)
class EngineVisibility:
    brand_id: str
    entity: str
    is_own_brand: bool
    engine: str
    visibility: float


@dataclass(frozen=True)
class PageDay:
    brand_id: str
    url: str
    root_domain: str | None
    page_rank: int
    date: dt.date
    citations: int


def newest_trend_date(warehouse: Warehouse) -> dt.date | None:
    """The newest day with a daily competitor-trend point: where the report's window ends."""
    ref = warehouse.table_ref("competitor_trends")
    rows = _rows(warehouse, f"SELECT MAX(date) AS newest FROM {ref} WHERE granularity = 'day'")
    return rows[0]["newest"] if rows else None


def current_brands(warehouse: Warehouse) -> list[BrandRow]:
    ref = warehouse.table_ref("brands")
    sql = f"""
        SELECT id, COALESCE(name, id) AS name, domain FROM {ref} AS b
        WHERE is_current ORDER BY b.name, b.id
    """
    return [BrandRow(**r) for r in _rows(warehouse, sql)]


def current_competitors(warehouse: Warehouse) -> list[CompetitorRow]:
    """Tracked competitors with their domains (to tell whose page a cited URL is)."""
    ref = warehouse.table_ref("tracked_competitors")
    sql = f"SELECT brand_id, brand_name, domains FROM {ref} WHERE is_current ORDER BY brand_id, brand_name"
    return [
        CompetitorRow(
            brand_id=str(r["brand_id"]), name=str(r["brand_name"]), domains=tuple(r["domains"] or ())
        )
        for r in _rows(warehouse, sql)
    ]


def share_of_voice_points(warehouse: Warehouse, start: dt.date, end: dt.date) -> list[SharePoint]:
    """Daily share of voice (0-100, all engines) of each brand and its tracked competitors."""
    ref = warehouse.table_ref("competitor_trends")
    sql = f"""
        SELECT brand_id, brand_name AS entity,
               COALESCE(is_your_brand, competitor_id IS NULL) AS is_own_brand, date, share_of_voice
        FROM {ref}
        WHERE granularity = 'day' AND engine = :rollup AND share_of_voice IS NOT NULL
          AND date >= :start_day AND date < :end_day
        ORDER BY brand_id, brand_name, date
    """
    return [SharePoint(**r) for r in _rows(warehouse, sql, **_window(start, end))]


def visibility_by_engine(warehouse: Warehouse, start: dt.date, end: dt.date) -> list[EngineVisibility]:
    """Per brand, entity and engine: the window's visibility score (0-100), each day weighted by the
    answered responses it rests on, so a quiet day moves it less than a busy one."""
    ref = warehouse.table_ref("competitor_trends")
    sql = f"""
        SELECT brand_id, brand_name AS entity, COALESCE(is_your_brand, competitor_id IS NULL) AS is_own_brand,
               engine,
               COALESCE(
                   SUM(visibility_score * responses_answered)
                   / NULLIF(SUM(CASE WHEN visibility_score IS NOT NULL THEN responses_answered END), 0),
                   AVG(visibility_score)
               ) AS visibility
        FROM {ref}
        WHERE granularity = 'day' AND engine <> :rollup
          AND date >= :start_day AND date < :end_day
        GROUP BY brand_id, brand_name, COALESCE(is_your_brand, competitor_id IS NULL), engine
        ORDER BY brand_id, brand_name, engine
    """
    rows = _rows(warehouse, sql, **_window(start, end))
    return [EngineVisibility(**r) for r in rows if r["visibility"] is not None]


def top_cited_page_days(
    warehouse: Warehouse, start: dt.date, end: dt.date, *, per_brand: int
) -> list[PageDay]:
    """The daily citations (all engines) of each brand's ``per_brand`` most-cited pages of the window."""
    ref = warehouse.table_ref("cited_pages")

    def window(alias: str = "") -> str:
        return f"{alias}engine = :rollup AND {alias}date >= :start_day AND {alias}date < :end_day"

    sql = f"""
        WITH totals AS (
            SELECT brand_id, url, SUM(citation_count) AS citations
            FROM {ref} WHERE {window()}
            GROUP BY brand_id, url
        ), ranked AS (
            SELECT brand_id, url,
                   ROW_NUMBER() OVER (PARTITION BY brand_id ORDER BY citations DESC, url) AS page_rank
            FROM totals
        )
        SELECT c.brand_id AS brand_id, c.url AS url, MAX(c.root_domain) AS root_domain,
               r.page_rank AS page_rank, c.date AS date,
               CAST(COALESCE(SUM(c.citation_count), 0) AS BIGINT) AS citations
        FROM {ref} AS c
        JOIN ranked AS r ON r.brand_id = c.brand_id AND r.url = c.url
        WHERE r.page_rank <= :per_brand AND {window("c.")}
        GROUP BY c.brand_id, c.url, r.page_rank, c.date
        ORDER BY c.brand_id, r.page_rank, c.date
    """
    return [PageDay(**r) for r in _rows(warehouse, sql, **_window(start, end), per_brand=per_brand)]


def _window(start: dt.date, end: dt.date) -> dict[str, Any]:
    """The parameters of a window ``[start, end)`` of the all-engine rollup."""
    return {"rollup": ALL, "start_day": start, "end_day": end}
