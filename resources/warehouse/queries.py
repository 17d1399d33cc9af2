"""Read queries of the sensors, asset checks and report, in the SQL the three engines share.

Totals read the service's all-engine rollup (``engine = 'all'``): rollup rates are not sums of
per-engine rates. Windows are ``[start, end)``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from resources.api.endpoints import ALL
from resources.warehouse.base import Warehouse


def _rows(warehouse: Warehouse, sql: str, **params: Any) -> list[dict[str, Any]]:
    return warehouse.query(sql, params).to_pylist()


# --- sensors ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CitedPage:
    brand_id: str
    url: str
    first_cited: dt.date
    citations: int


def own_pages_first_cited_since(warehouse: Warehouse, since: dt.date, *, limit: int = 200) -> list[CitedPage]:
    """The brands' own pages first cited (ever, for that brand) on or after ``since``, most-cited first."""
    cited = warehouse.table_ref("cited_pages")
    brands = warehouse.table_ref("brands")
    sql = f"""
        SELECT c.brand_id AS brand_id, c.url AS url, MIN(c.date) AS first_cited,
               CAST(COALESCE(SUM(c.citation_count), 0) AS BIGINT) AS citations
        FROM {cited} AS c
        JOIN {brands} AS b ON b.id = c.brand_id
        WHERE b.is_current AND b.domain IS NOT NULL
          AND LOWER(c.root_domain) = LOWER(b.domain)
        GROUP BY c.brand_id, c.url
        HAVING MIN(c.date) >= :since
        ORDER BY citations DESC, url
        LIMIT :max_rows
    """
    return [CitedPage(**r) for r in _rows(warehouse, sql, since=since, max_rows=limit)]


def brand_domains(warehouse: Warehouse) -> dict[str, str]:
    """Current brands' ids -> their own domain, to tell which brand a configured URL belongs to."""
    return {b.id: b.domain for b in current_brands(warehouse) if b.domain is not None}


def row_count(warehouse: Warehouse, table: str) -> int | None:
    """Rows in ``table``, or None when it does not exist yet (the CLI's summary)."""
    try:
        rows = _rows(warehouse, f"SELECT COUNT(*) AS n FROM {warehouse.table_ref(table)}")
    except Exception:  # absent table or file: each engine raises its own error class
        return None
    return int(rows[0]["n"])


def audit_status(warehouse: Warehouse, audit_id: str) -> str | None:
    """The landed status of one audit, or None when it has no row yet."""
    table = warehouse.table_ref("audit_reports")
    rows = _rows(warehouse, f"SELECT status FROM {table} WHERE id = :audit_id", audit_id=audit_id)
    return None if not rows else rows[0]["status"]


# --- asset checks -------------------------------------------------------------------------------


def duplicate_keys(warehouse: Warehouse, table: str, key: tuple[str, ...]) -> tuple[int, list]:
    """How many key values occur more than once, and a few of them."""
    ref = warehouse.table_ref(table)
    cols = ", ".join(key)
    sql = f"""
        SELECT {cols}, COUNT(*) AS n FROM {ref}
        GROUP BY {cols} HAVING COUNT(*) > 1
        ORDER BY n DESC
    """
    return _counted(_rows(warehouse, sql))


def capped_cited_page_days(warehouse: Warehouse) -> tuple[int, list[dict[str, Any]]]:
    """Brand x date x engine slices of ``cited_pages`` whose response was truncated (capped)."""
    ref = warehouse.table_ref("cited_pages")
    sql = f"""
        SELECT brand_id, date, engine, MAX(total_count) AS total_count, COUNT(*) AS rows_landed
        FROM {ref} WHERE capped
        GROUP BY brand_id, date, engine
        ORDER BY date DESC, brand_id, engine
    """
    return _counted(_rows(warehouse, sql))


def share_of_voice_off(warehouse: Warehouse, *, tolerance: float) -> tuple[int, list[dict[str, Any]]]:
    """Brand x engine x granularity x date groups with mentions whose share of voice does not sum to 100
    (within rounding); periods without mentions are skipped.
    """
    ref = warehouse.table_ref("competitor_trends")
    sql = f"""
        SELECT brand_id, engine, granularity, date, SUM(share_of_voice) AS total,
               CAST(SUM(mention_count) AS BIGINT) AS mentions
        FROM {ref}
        GROUP BY brand_id, engine, granularity, date
        HAVING SUM(mention_count) > 0 AND ABS(SUM(share_of_voice) - 100) > :tolerance
        ORDER BY date DESC, brand_id, engine, granularity
    """
    return _counted(_rows(warehouse, sql, tolerance=tolerance))


def competitor_series_totals(
    warehouse: Warehouse, *, brand_id: str, engine: str, start: dt.date, end: dt.date
) -> dict[str, dict[str, float]]:
    """Per entity (brand_name): the counts summed over landed daily points in [start, end)."""
    ref = warehouse.table_ref("competitor_trends")
    sql = f"""
        SELECT brand_name, SUM(responses_answered) AS responses_answered,
               SUM(responses_with_brand) AS responses_with_brand,
               SUM(mention_count) AS mention_count, SUM(citation_count) AS citation_count
        FROM {ref}
        WHERE granularity = 'day' AND brand_id = :brand_id AND engine = :engine
          AND date >= :start_day AND date < :end_day
        GROUP BY brand_name
    """
    params = {"brand_id": brand_id, "engine": engine, "start_day": start, "end_day": end}
    return {
        str(r["brand_name"]): {k: float(v or 0) for k, v in r.items() if k != "brand_name"}
        for r in _rows(warehouse, sql, **params)
    }


def audits_timed_out_since(warehouse: Warehouse, since: dt.datetime) -> list[dict[str, Any]]:
    """Audits landed as timed out whose deadline passed after ``since``."""
    ref = warehouse.table_ref("audit_reports")
    sql = f"""
        SELECT id, brand_id, url, requested_at, timed_out_at FROM {ref}
        WHERE status = 'timed_out' AND timed_out_at >= :since
        ORDER BY timed_out_at DESC
    """
    return [_plain(r) for r in _rows(warehouse, sql, since=since)]


# --- helpers ------------------------------------------------------------------------------------


def _counted(rows: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    """How many rows, and the first few of them (check metadata's sample)."""
    return len(rows), [_plain(r) for r in rows[:5]]


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row with JSON-friendly values (dates as ISO text) for check metadata."""
    return {k: v.isoformat() if isinstance(v, dt.date) else v for k, v in row.items()}


@dataclass(frozen=True)
class ExpectedCells:
    """Where the API reported data for a (brand, engine, date) cell, so a table checked against it
    must have rows there: ``source_sql`` selects ``brand_id, engine, day`` from ``{src}``, the
    quoted ``source_table`` (code constants, never user input)."""

    source_table: str
    source_sql: str


#: Evidence of "no partition landed empty when the API reported rows", by name: a date x engine
#: entry names one as its ``evidence`` when it declares ``no_empty_partitions``.
EXPECTED_CELLS: dict[str, ExpectedCells] = {
    # The day's citation trend of the brand's own domain counts every citation in its answers:
    # a positive brand_total_citations means the citation URL list of that day is not empty (a
    # `window` summary's total covers its whole window, not its last day).
    "own_domain_citations": ExpectedCells(
        source_table="citation_trends",
        source_sql="SELECT DISTINCT brand_id, engine, date AS day FROM {src} "
        "WHERE is_own_domain AND brand_total_citations > 0 AND granularity = 'day'",
    ),
    # Mentions of the brand or a tracked competitor that day mean the prompts' mentions are not empty.
    "mentions": ExpectedCells(
        source_table="competitor_trends",
        source_sql="SELECT brand_id, engine, date AS day FROM {src} "
        "WHERE granularity = 'day' AND engine <> 'all' "
        "GROUP BY brand_id, engine, date HAVING SUM(mention_count) > 0",
    ),
    # Answered responses that day mean the answer list is not empty.
    "answered_responses": ExpectedCells(
        source_table="competitor_trends",
        source_sql="SELECT DISTINCT brand_id, engine, date AS day FROM {src} "
        "WHERE granularity = 'day' AND engine <> 'all' AND is_your_brand AND responses_answered > 0",
    ),
}


BrandDay = tuple[str, str, dt.date]  # brand_id, engine, day: a planner cell (day, engine) of one brand


def expected_cells(warehouse: Warehouse, rule: ExpectedCells, *, since: dt.date) -> set[BrandDay]:
    """(brand, engine, day) cells from ``since`` where the service reported data (per ``rule``)."""
    source = rule.source_sql.format(src=warehouse.table_ref(rule.source_table))
    sql = f"SELECT brand_id, engine, day FROM ({source}) AS e WHERE day >= :since"
    return {(str(r["brand_id"]), str(r["engine"]), r["day"]) for r in _rows(warehouse, sql, since=since)}


def landed_cells(warehouse: Warehouse, table: str, date_column: str, *, since: dt.date) -> set[BrandDay]:
    """(brand, engine, day) cells from ``since`` that have at least one row in ``table``."""
    landed = ExpectedCells(table, f"SELECT DISTINCT brand_id, engine, {date_column} AS day FROM {{src}}")
    return expected_cells(warehouse, landed, since=since)


def trend_windows(
    warehouse: Warehouse, *, end_before: dt.date, days: int
) -> list[tuple[str, dt.date, dt.date]]:
    """Per brand ``(brand_id, start, end)``: the last ``days`` landed days of the ``all`` competitor trend
    before ``end_before``, never before the first landed day (the service's totals cannot match there).
    """
    ref = warehouse.table_ref("competitor_trends")
    sql = f"""
        SELECT brand_id, MIN(date) AS first_day, MAX(date) AS last_day FROM {ref}
        WHERE granularity = 'day' AND engine = 'all' AND date < :end_before
        GROUP BY brand_id ORDER BY brand_id
    """
    out = []
    for r in _rows(warehouse, sql, end_before=end_before):
        end = r["last_day"] + dt.timedelta(days=1)
        out.append((str(r["brand_id"]), max(r["first_day"], end - dt.timedelta(days=days)), end))
    return out


def table_exists(warehouse: Warehouse, table: str) -> bool:
    """Whether ``table`` has landed yet (a check's evidence table may not have)."""
    try:
        _rows(warehouse, f"SELECT 1 AS one FROM {warehouse.table_ref(table)} LIMIT 0")
    except Exception:  # absent table or file: each engine raises its own error class
        return False
    return True


# --- the visual report (report/) ---------------------------------------------------------------


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
    return _rows(warehouse, f"SELECT MAX(date) AS newest FROM {ref} WHERE granularity = 'day'")[0]["newest"]


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
