"""The views analysts read, and how every writer keeps a view as its spec says.

A view's ``SELECT`` uses only the SQL the three engines share and reads base tables only, so any
writer may re-create any view alone. A view that cannot be created is a warning, never a failed
landing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from resources.warehouse.contract import (
    EVOLVED_COLUMN_DESCRIPTION,
    LOAD_COLUMNS,
    Column,
    TableSpec,
    system_columns,
)

STRING = pa.string()
INT = pa.int64()
FLOAT = pa.float64()
BOOL = pa.bool_()
DATE = pa.date32()
STRINGS = pa.list_(pa.string())


@dataclass(frozen=True)
class ViewSpec:
    """A view over landed tables: ``query`` names each source as ``{table}``."""

    name: str
    description: str
    columns: tuple[Column, ...]
    sources: tuple[str, ...]
    query: str

    def select(self, ref: Callable[[str], str]) -> str:
        """The view's query with each source named as the engine names it (``ref``)."""
        return self.query.format(**{source: ref(source) for source in self.sources}).strip()

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


# --- columns shared by several views --------------------------------------------------------------

# the naming rule of every view (docs/TABLES.md): `brand_id` / `brand` is the owning brand, whose
# answers were measured; `entity_name` / `competitor_id` / `is_your_brand` is the entity measured
_OWNER = (
    Column("brand_id", STRING, "The owning brand (uuid): the brand whose answers were measured."),
    Column("brand", STRING, "Name of the owning brand (brands.name; null if the brand never landed)."),
    Column("engine", STRING, "Answer engine, or `all` for the service's all-engine rollup."),
)
_ENTITY = (
    Column(
        "entity_name",
        STRING,
        "The entity measured: the owning brand itself or one of its tracked competitors (the API's "
        "brand_name).",
    ),
    Column("competitor_id", STRING, "Tracked competitor id (uuid); null for the brand itself."),
    Column("is_your_brand", BOOL, "True for the caller's brand."),
)
_ENTITY_SQL = "t.brand_name AS entity_name, t.competitor_id, t.is_your_brand"
_DAY = Column("date", DATE, "The day.")
_BRAND_SHARE_OF_VOICE = Column(
    "brand_share_of_voice",
    FLOAT,
    "0-100: the owning brand's own share of voice in the same period and engine, on every row: "
    "compare it with share_of_voice of a competitor's row.",
)
#: the owning brand's row of the same brand, engine and period (the window runs after the WHERE)
_BRAND_SHARE_OF_VOICE_SQL = (
    "MAX(CASE WHEN t.is_your_brand THEN t.share_of_voice END) "
    "OVER (PARTITION BY t.brand_id, t.engine, t.date) AS brand_share_of_voice"
)

#: The metrics of a competitor trend row (any granularity): columns of ``competitor_trends``
#: (sync/tables.py takes them from here) that the views pass through with the same description.
TREND_METRICS: tuple[Column, ...] = (
    Column(
        "responses_answered",
        INT,
        "The brand's answered responses over the row's period (visibility denominator).",
    ),
    Column("responses_with_brand", INT, "Answered responses that mention this entity."),
    Column("mention_count", INT, "Mentions of this entity."),
    Column("citation_count", INT, "Citations of this entity's own website in the same answers."),
    Column("detection_rate", FLOAT, "0-100: share of answers that mention the entity."),
    Column("visibility_score", FLOAT, "0-100: detection weighted by position and top-3 share."),
    Column("avg_position", FLOAT, "Average position of the entity's mentions; null without mentions."),
    Column("avg_sentiment", FLOAT, "Average sentiment of the entity's mentions; null without mentions."),
    Column("top3_visibility", FLOAT, "Share of answers naming the entity in the top 3; null if none."),
    Column("win_rate", FLOAT, "0-100: share of answers where the entity is named first."),
    Column("share_of_voice", FLOAT, "0-100: the entity's mentions over the brand plus tracked competitors."),
)
_METRIC_LIST = ", ".join(f"t.{c.name}" for c in TREND_METRICS)


def _trend_view(
    name: str,
    description: str,
    columns: tuple[Column, ...],
    select: str,
    *,
    granularity: str = "day",
    source: str = "competitor_trends",
    join: str = "",
    also_reads: tuple[str, ...] = (),
) -> ViewSpec:
    """The rows of one granularity (``t``) of a trend table, with the owning brand's name;
    ``columns`` and ``select`` follow the owner's, ``join`` the trend table."""
    return ViewSpec(
        name=name,
        description=description,
        columns=(*_OWNER, *columns),
        sources=(source, "brands", *also_reads),
        query=f"""
SELECT t.brand_id, b.name AS brand, t.engine, {select}
FROM {{{source}}} AS t{join}
LEFT JOIN {{brands}} AS b ON b.id = t.brand_id
WHERE t.granularity = '{granularity}'
""",
    )


def _trend_period_view(
    name: str, granularity: str, start: Column, last: Column, description: str
) -> ViewSpec:
    """The rows of one granularity of ``competitor_trends``, their period named for what it is."""
    return _trend_view(
        name,
        description,
        (
            *_ENTITY,
            Column("domains", STRINGS, "The entity's website domains."),
            Column("history_from", DATE, "Earliest date with complete history for the entity."),
            start,
            last,
            *TREND_METRICS,
            _BRAND_SHARE_OF_VOICE,
            *LOAD_COLUMNS,
        ),
        f"""{_ENTITY_SQL},
       t.domains, t.history_from, t.period_start AS {start.name}, t.date AS {last.name}, {_METRIC_LIST},
       {_BRAND_SHARE_OF_VOICE_SQL}, t._loaded_at, t._run_id""",
        granularity=granularity,
    )


COMPETITOR_TRENDS_WEEKLY = _trend_period_view(
    "competitor_trends_weekly",
    "week",
    Column("week_start", DATE, "Monday of the ISO week (the API's bucket date)."),
    Column("week_end", DATE, "Sunday of the week: the date partition that owns the row."),
    "Weekly metrics of each brand and its tracked competitors (competitor_trends rows of granularity "
    "`week`): one row per brand, engine, entity and ISO week. Landed when the week's Sunday is synced, "
    "so the running week is absent: read share_of_voice_daily for it.",
)

COMPETITOR_TREND_TOTALS = _trend_period_view(
    "competitor_trend_totals",
    "window",
    Column("window_start", DATE, "First day of the request window (the API's `from`)."),
    Column(
        "window_last_day",
        DATE,
        "Last day of the request window (the API's `to` minus one day): the date partition that owns "
        "the row.",
    ),
    "The service's totals over each request window of competitor_trends (rows of granularity "
    "`window`): exact where a sum of rounded daily rates is not. One window per brand, engine and last "
    "day: the window of the latest sync whose newest day it was.",
)

SHARE_OF_VOICE_DAILY = _trend_view(
    "share_of_voice_daily",
    "Share of voice of each brand and its tracked competitors, per brand, engine and day "
    "(competitor_trends rows of granularity `day`, with the brand's name).",
    (
        _DAY,
        *_ENTITY,
        Column("mention_count", INT, "Mentions of this entity that day."),
        Column(
            "share_of_voice",
            FLOAT,
            "0-100: the entity's mentions over the brand plus tracked competitors; sums to 100 per "
            "brand, engine and day with mentions.",
        ),
        _BRAND_SHARE_OF_VOICE,
    ),
    f"t.date, {_ENTITY_SQL}, t.mention_count, t.share_of_voice, {_BRAND_SHARE_OF_VOICE_SQL}",
)

LATEST_DAY_PER_BRAND = _trend_view(
    "latest_day_per_brand",
    "Each brand's newest landed day, per engine: the metrics of the brand and of each "
    "tracked competitor that day (competitor_trends rows of granularity `day`).",
    (Column("date", DATE, "The newest day landed for this brand and engine."), *_ENTITY, *TREND_METRICS),
    f"t.date, {_ENTITY_SQL}, {_METRIC_LIST}",
    join="""
JOIN (
    SELECT brand_id, engine, MAX(date) AS newest FROM {competitor_trends}
    WHERE granularity = 'day' GROUP BY brand_id, engine
) AS n ON n.brand_id = t.brand_id AND n.engine = t.engine AND n.newest = t.date""",
)

_CITED_PAGE_COLUMNS = (
    Column("url", STRING, "Cited page."),
    Column("domain", STRING, "Host of the cited page."),
    Column("root_domain", STRING, "Registrable root domain of the page."),
    Column("is_own_domain", BOOL, "True when the page's root domain is the brand's own domain."),
)
_CITED_PAGE_SUMS = """c.url, c.domain, c.root_domain,
       COALESCE(LOWER(c.root_domain) = LOWER(b.domain), FALSE) AS is_own_domain,
       CAST(SUM(c.citation_count) AS BIGINT) AS citations, CAST(COUNT(*) AS BIGINT) AS days_cited,
       MIN(c.date) AS first_cited, MAX(c.date) AS last_cited,
       CAST(SUM(CASE WHEN c.capped THEN 1 ELSE 0 END) AS BIGINT) AS capped_days,
       CAST(RANK() OVER (PARTITION BY c.brand_id, c.engine ORDER BY SUM(c.citation_count) DESC) AS BIGINT)
           AS citation_rank"""


def _cited_page_sums(days: str) -> tuple[Column, ...]:
    return (
        Column("citations", INT, f"Citations of the page, summed over {days}."),
        Column("days_cited", INT, f"Days of {days} on which the page was cited."),
        Column("first_cited", DATE, f"First day of {days} the page was cited."),
        Column("last_cited", DATE, f"Last day of {days} the page was cited."),
        Column("capped_days", INT, "Of those days, the ones whose page list the service truncated."),
        Column(
            "citation_rank", INT, "1 for the most-cited page of the brand and engine (ties share a rank)."
        ),
    )


TOP_CITED_PAGES = ViewSpec(
    name="top_cited_pages",
    description="Pages cited in each brand's answers over every landed day, per engine, with their "
    "domain, ranked by citations (cited_pages summed). A day's list is top-N: capped_days says how "
    "many of the page's days were truncated, so its citations may be undercounted. For a recent window: "
    "top_cited_pages_7d and top_cited_pages_28d.",
    columns=(*_OWNER, *_CITED_PAGE_COLUMNS, *_cited_page_sums("the landed days")),
    sources=("cited_pages", "brands"),
    query=f"""
SELECT c.brand_id, b.name AS brand, c.engine, {_CITED_PAGE_SUMS}
FROM {{cited_pages}} AS c
LEFT JOIN {{brands}} AS b ON b.id = c.brand_id
GROUP BY c.brand_id, b.name, b.domain, c.engine, c.url, c.domain, c.root_domain
""",
)


def _top_cited_pages_of_recent_days(days: int) -> ViewSpec:
    """top_cited_pages over each brand and engine's ``days`` newest landed days (portable: no date
    arithmetic; a day counts once the brand's cited pages of that engine landed)."""
    window = f"the brand and engine's {days} newest landed days"
    return ViewSpec(
        name=f"top_cited_pages_{days}d",
        description=f"Pages cited in each brand's answers over its {days} newest landed days, per engine "
        "(window_start to window_end; days without a landing, e.g. not synced yet, are skipped, not "
        "counted), ranked by citations. Otherwise as top_cited_pages.",
        columns=(
            *_OWNER,
            Column("window_start", DATE, f"First day of {window}."),
            Column("window_end", DATE, f"Last day of {window} (its newest landed day)."),
            Column("days_landed", INT, f"Days in the window: {days}, or fewer when fewer have landed."),
            *_CITED_PAGE_COLUMNS,
            *_cited_page_sums("the window"),
        ),
        sources=("cited_pages", "brands"),
        query=f"""
WITH landed_days AS (
    SELECT brand_id, engine, date,
           DENSE_RANK() OVER (PARTITION BY brand_id, engine ORDER BY date DESC) AS days_back
    FROM (SELECT DISTINCT brand_id, engine, date FROM {{cited_pages}}) AS d
), recent AS (
    SELECT brand_id, engine, date FROM landed_days WHERE days_back <= {days}
), spans AS (
    SELECT brand_id, engine, MIN(date) AS window_start, MAX(date) AS window_end,
           CAST(COUNT(*) AS BIGINT) AS days_landed
    FROM recent GROUP BY brand_id, engine
)
SELECT c.brand_id, b.name AS brand, c.engine, s.window_start, s.window_end, s.days_landed,
       {_CITED_PAGE_SUMS}
FROM {{cited_pages}} AS c
JOIN recent AS r ON r.brand_id = c.brand_id AND r.engine = c.engine AND r.date = c.date
JOIN spans AS s ON s.brand_id = c.brand_id AND s.engine = c.engine
LEFT JOIN {{brands}} AS b ON b.id = c.brand_id
GROUP BY c.brand_id, b.name, b.domain, c.engine, s.window_start, s.window_end, s.days_landed,
         c.url, c.domain, c.root_domain
""",
    )


TOP_CITED_PAGES_7D = _top_cited_pages_of_recent_days(7)
TOP_CITED_PAGES_28D = _top_cited_pages_of_recent_days(28)

_TOPIC = Column(
    "topic",
    STRING,
    "Name of the topic (topics.name); null for topic_id `all` (every prompt) or a topic that never landed.",
)

CITATION_TRENDS_DAILY = _trend_view(
    "citation_trends_daily",
    "Daily citations of each tracked domain or page in each brand's answers, per engine, "
    "with the brand's and the topic's names (citation_trends rows of granularity `day`).",
    (
        _DAY,
        Column("target_type", STRING, "What is trended: `domain` or `url`."),
        Column("target_value", STRING, "The domain or page trended."),
        Column("is_own_domain", BOOL, "True when the target is the brand's own domain."),
        Column(
            "topic_id", STRING, "Topic (uuid) whose prompts the citations count over; `all`: every prompt."
        ),
        _TOPIC,
        Column("citations", INT, "Citations of the target that day."),
        Column("avg_position", FLOAT, "Average position of those citations."),
        Column("brand_total_citations", INT, "All citations in the brand's answers that day."),
        Column("share", FLOAT, "citations over brand_total_citations (scale as the API gives it)."),
        *LOAD_COLUMNS,
    ),
    """t.date, t.target_type, t.target_value, t.is_own_domain, t.topic_id, tp.name AS topic,
       t.citations, t.avg_position, t.brand_total_citations, t.share, t._loaded_at, t._run_id""",
    source="citation_trends",
    join="\nLEFT JOIN {topics} AS tp ON tp.id = t.topic_id AND tp.brand_id = t.brand_id",
    also_reads=("topics",),
)

CITED_PAGES_DAILY = ViewSpec(
    name="cited_pages_daily",
    description="The pages cited in each brand's answers, per day and engine, ranked, with the brand's "
    "name and whether the page is on its own site (cited_pages). Top-N: check capped.",
    columns=(
        *_OWNER,
        _DAY,
        Column("rank", INT, "1-based rank by citation count within brand, day and engine."),
        *_CITED_PAGE_COLUMNS,
        Column("citation_count", INT, "Citations of the page that day."),
        Column("avg_position", FLOAT, "Average position of the citation in answers."),
        Column(
            "citation_share", FLOAT, "citation_count over the day's citations (scale as the API gives it)."
        ),
        Column("capped", BOOL, "True when more pages matched that day than were listed."),
        *LOAD_COLUMNS,
    ),
    sources=("cited_pages", "brands"),
    query="""
SELECT c.brand_id, b.name AS brand, c.engine, c.date, c.rank, c.url, c.domain, c.root_domain,
       COALESCE(LOWER(c.root_domain) = LOWER(b.domain), FALSE) AS is_own_domain,
       c.citation_count, c.avg_position, c.citation_share, c.capped, c._loaded_at, c._run_id
FROM {cited_pages} AS c
LEFT JOIN {brands} AS b ON b.id = c.brand_id
""",
)

#: Every analyst view, in creation order.
ANALYST_VIEWS: tuple[ViewSpec, ...] = (
    SHARE_OF_VOICE_DAILY,
    LATEST_DAY_PER_BRAND,
    COMPETITOR_TRENDS_WEEKLY,
    COMPETITOR_TREND_TOTALS,
    TOP_CITED_PAGES,
    TOP_CITED_PAGES_7D,
    TOP_CITED_PAGES_28D,
    CITATION_TRENDS_DAILY,
    CITED_PAGES_DAILY,
)


def views_reading(table: str) -> tuple[ViewSpec, ...]:
    """The analyst views ``table`` is a source of (ensured with it)."""
    return tuple(v for v in ANALYST_VIEWS if table in v.sources)


# --- how a writer keeps a view ----------------------------------------------------------------


def current_view_name(spec: TableSpec) -> str:
    return f"{spec.name}_current"


def current_view_description(spec: TableSpec) -> str:
    return f"Rows of {spec.name} still present in the API (is_current). {spec.description}"


def column_descriptions(spec: TableSpec, table_columns: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Each column of the table (in table order) and the comment the writer gives it: the spec's, the
    writer's own columns', or the one of a column the API added. A ``_current`` view carries the same."""
    known = {c.name: c.description for c in (*spec.columns, *system_columns(spec))}
    return tuple((name, known.get(name, EVOLVED_COLUMN_DESCRIPTION)) for name in table_columns)


@dataclass(frozen=True)
class ViewShape:
    """A view as the catalog shows it: its comment, and its columns' names and comments in order."""

    comment: str | None
    columns: tuple[tuple[str, str | None], ...]


#: What a view needs: nothing, new comments only, or to be (re)created (then commented).
ViewWork = Literal["create", "comment"] | None


def view_work(existing: ViewShape | None, description: str, columns: Sequence[tuple[str, str]]) -> ViewWork:
    """``create`` when the view is missing or its columns differ from ``columns`` (names, in order);
    ``comment`` when only its comment or a column's differs; None when it is as wanted."""
    if existing is None or [n for n, _ in existing.columns] != [n for n, _ in columns]:
        return "create"
    if existing.comment != description or [c for _, c in existing.columns] != [c for _, c in columns]:
        return "comment"
    return None
