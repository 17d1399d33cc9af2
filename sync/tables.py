"""The warehouse contract: one :class:`TableSpec` per landed table, typed and described.

Column names are the API's field names plus the keys the connector adds (README.md, "Tables"). The
descriptions land as column comments (DuckDB, Postgres) or descriptions (BigQuery), in Dagster's
``dagster/column_schema`` and in docs/TABLES.md, so BI users read them where they query; a file a
description names must exist (tests/warehouse/test_dictionary.py). Every field the spec types is a
declared column with its real type, so a value of another type is an error, never a column of
another type that later runs would fail on (docs/OPERATIONS.md, *Table decisions*).
"""

from __future__ import annotations

import pyarrow as pa

from resources.warehouse.contract import Column, TableSpec
from resources.warehouse.views import TREND_METRICS

STRING = pa.string()
INT = pa.int64()
FLOAT = pa.float64()
BOOL = pa.bool_()
DATE = pa.date32()
TIMESTAMP = pa.timestamp("us", tz="UTC")
STRINGS = pa.list_(pa.string())

# Columns shared by several tables, described once.
_BRAND_ID = Column("brand_id", STRING, "Brand (uuid) the row was fetched for.", nullable=False)
_ENGINE = Column(
    "engine",
    STRING,
    "Answer engine: chatgpt, claude, perplexity, gemini, google_ai_overviews, google_ai_mode, copilot; "
    "`all` for the service's all-engine rollup (fetched, never summed from engines).",
    nullable=False,
)
_CHECKED_ON = Column("checked_on", DATE, "Day the prompt was run on the engine.", nullable=False)


BRANDS = TableSpec(
    name="brands",
    description="Brands the API key can reach (GET /v1/brands). Snapshot: brands that leave the key's "
    "scope stay with is_current = false.",
    columns=(
        Column("id", STRING, "Brand id (uuid).", nullable=False),
        Column("name", STRING, "Brand name."),
        Column("domain", STRING, "The brand's own website domain."),
        Column("category", STRING, "Category the brand is measured in."),
        Column("aliases", STRINGS, "Other names the service recognises as this brand in answers."),
        Column("engines", STRINGS, "Answer engines the brand is measured on."),
        Column("country", STRING, "Country the brand is measured in."),
        Column("created_at", TIMESTAMP, "When the brand was created (UTC)."),
    ),
    key=("id",),
    kind="snapshot",
    brand_column="id",
    cluster_by=("id",),
)

TOPICS = TableSpec(
    name="topics",
    description="Topics each brand groups its prompts under (GET /v1/brands/{id}/topics). Snapshot.",
    columns=(
        Column("id", STRING, "Topic id (uuid).", nullable=False),
        _BRAND_ID,
        Column("name", STRING, "Topic name (renaming keeps the id)."),
        Column("prompt_count", INT, "Number of prompts filed under the topic."),
        Column("created_at", TIMESTAMP, "When the topic was created (UTC)."),
        Column("updated_at", TIMESTAMP, "When the topic was last changed (UTC)."),
    ),
    key=("id",),
    kind="snapshot",
    cluster_by=("brand_id",),
)

PROMPTS = TableSpec(
    name="prompts",
    description="Prompts (questions tracked across engines) of each brand (GET /v1/brands/{id}/prompts). "
    "Snapshot.",
    columns=(
        Column("id", STRING, "Prompt id (uuid).", nullable=False),
        _BRAND_ID,
        Column("text", STRING, "The question put to the answer engines."),
        Column("topic_id", STRING, "Topic the prompt is filed under; null when it has none."),
        Column("created_at", TIMESTAMP, "When the prompt was created (UTC)."),
    ),
    key=("id",),
    kind="snapshot",
    cluster_by=("brand_id",),
)

TRACKED_COMPETITORS = TableSpec(
    name="tracked_competitors",
    description="Each brand's tracked competitors (GET /v1/brands/{id}/tracked-competitors): the set share "
    "of voice and trends are computed over. Snapshot: untracked competitors stay with is_current = false.",
    columns=(
        _BRAND_ID,
        Column("id", STRING, "Tracked competitor id (uuid).", nullable=False),
        Column("brand_name", STRING, "The competitor's name."),
        Column("aliases", STRINGS, "Other names of the competitor."),
        Column("domains", STRINGS, "The competitor's website domains (its citation trends use them)."),
        Column(
            "history_from",
            DATE,
            "Earliest date with complete history; null while the service backfills a newly tracked "
            "competitor.",
        ),
        Column("tracked_since", TIMESTAMP, "When tracking started (UTC)."),
    ),
    key=("brand_id", "id"),
    kind="snapshot",
    cluster_by=("brand_id",),
)

GENERATIONS = TableSpec(
    name="generations",
    description="Generated articles of each brand (GET /v1/brands/{id}/generations, summary rows). "
    "Snapshot. The list omits brief_md, draft_md, slug, meta_title and meta_description: they stay "
    "null here.",
    columns=(
        Column("id", STRING, "Generation id (uuid).", nullable=False),
        _BRAND_ID,
        Column("content_type", STRING, "Kind of content, e.g. blog_post."),
        Column("status", STRING, "Workflow status, e.g. generating_brief."),
        Column("topic", STRING, "Topic the article is about."),
        Column("title", STRING, "Article title."),
        Column("slug", STRING, "URL slug (single-record fetch only; null in list rows)."),
        Column("meta_title", STRING, "HTML meta title (single-record fetch only)."),
        Column("meta_description", STRING, "HTML meta description (single-record fetch only)."),
        Column("brief_md", STRING, "Research brief, Markdown (single-record fetch only)."),
        Column("draft_md", STRING, "Article draft, Markdown (single-record fetch only)."),
        Column("source_recommendation_id", STRING, "Recommendation (uuid) the article was generated from."),
        Column("created_at", TIMESTAMP, "When the generation was created (UTC)."),
        Column("updated_at", TIMESTAMP, "When the generation last changed (UTC)."),
    ),
    key=("id",),
    kind="snapshot",
    cluster_by=("brand_id",),
)

AUDIT_REPORTS = TableSpec(
    name="audit_reports",
    description="URL audits requested through POST /v1/audit-reports and their finished reports. "
    "Upserted by id with no retirement (scope None): an audit's row moves from pending to complete "
    "or timed_out.",
    columns=(
        Column("id", STRING, "Audit report id (uuid).", nullable=False),
        _BRAND_ID,
        Column("url", STRING, "The audited URL."),
        Column(
            "status",
            STRING,
            "pending, complete, or timed_out (set by the connector when polling passed its deadline).",
        ),
        Column("poll", STRING, "Path the report is polled on."),
        Column("requested_at", TIMESTAMP, "When the connector requested the audit (UTC)."),
        Column("completed_at", TIMESTAMP, "When the connector saw the audit complete (UTC); null if not."),
        Column("report", STRING, "The finished report's body as JSON text (its fields are not specified)."),
        Column(
            "timed_out_at",
            TIMESTAMP,
            "When the connector gave up polling the audit (UTC); null unless status is timed_out.",
        ),
    ),
    key=("id",),
    kind="snapshot",
    cluster_by=("brand_id",),
)

PROMPT_MENTIONS = TableSpec(
    name="prompt_mentions",
    description="Brands named in engines' answers to each prompt (GET /v1/prompts/{id}/mentions), "
    "including brands that are not the caller's. Partitioned by checked_on and engine.",
    columns=(
        Column("id", STRING, "Mention id (uuid).", nullable=False),
        _BRAND_ID,
        Column("prompt_id", STRING, "Prompt (uuid) whose answer named the brand.", nullable=False),
        Column("response_id", STRING, "Answer (uuid) the mention is in; joins answers.id."),
        Column("brand_name", STRING, "Brand named in the answer (any brand, not only the caller's)."),
        Column(
            "position", FLOAT, "Position of the brand in the answer (scale not specified by the service)."
        ),
        Column("sentiment", FLOAT, "Sentiment towards the brand in the answer (scale not specified)."),
        _ENGINE,
        _CHECKED_ON,
    ),
    key=("id",),
    kind="partitioned",
    date_column="checked_on",
)

ANSWERS = TableSpec(
    name="answers",
    description="Answers engines returned to each brand's prompts (GET /v1/brands/{id}/answers; shape "
    "assumed, see README.md: fields beyond these land as extra columns). Partitioned by checked_on and "
    "engine.",
    columns=(
        Column("id", STRING, "Answer id (uuid); prompt_mentions.response_id refers to it.", nullable=False),
        _BRAND_ID,
        Column("prompt_id", STRING, "Prompt (uuid) the answer responds to."),
        _ENGINE,
        _CHECKED_ON,
        Column("brand_mentioned", BOOL, "True when the answer names the brand itself (assumed field)."),
        Column(
            "brand_position",
            INT,
            "Position of the brand in the answer; null when it is not named (assumed field).",
        ),
        Column("mention_count", INT, "Brands named in the answer, the brand included (assumed field)."),
        Column("citation_count", INT, "Pages cited in the answer (assumed field)."),
    ),
    key=("id",),
    kind="partitioned",
    date_column="checked_on",
)

CITED_PAGES = TableSpec(
    name="cited_pages",
    description="Most-cited pages per brand, day and engine (GET /v1/brands/{id}/citations/urls with a "
    "one-day window), ranked by citation count. Top-N: check capped.",
    columns=(
        _BRAND_ID,
        Column(
            "date",
            DATE,
            "The day the citations were counted over (the request's one-day window).",
            nullable=False,
        ),
        _ENGINE,
        Column(
            "rank",
            INT,
            "1-based rank by citation count within brand, day and engine (API order).",
            nullable=False,
        ),
        Column("url", STRING, "Cited page.", nullable=False),
        Column("domain", STRING, "Host of the cited page."),
        Column("root_domain", STRING, "Registrable root domain of the page (subdomains roll up to it)."),
        Column("citation_count", INT, "Citations of the page that day."),
        Column("avg_position", FLOAT, "Average position of the citation in answers."),
        Column("citation_share", FLOAT, "citation_count over total_citations (scale as the API gives it)."),
        Column("total_count", INT, "Pages matched that day before the limit (response envelope)."),
        Column("total_citations", INT, "Citations across all matching pages that day (share denominator)."),
        Column("capped", BOOL, "True when more pages matched than were returned (total_count > rows)."),
    ),
    key=("brand_id", "date", "engine", "url"),
    kind="partitioned",
    date_column="date",
)

#: ``competitor_trends.granularity`` and ``citation_trends.granularity`` values: the API's series
#: buckets, and the request window's totals (competitor trends) or summary (citation trends).
DAY, WEEK, WINDOW = "day", "week", "window"
#: ``citation_trends.topic_id`` of a trend over every prompt (no topic filter).
ALL_TOPICS = "all"

CITATION_TRENDS = TableSpec(
    name="citation_trends",
    description="Citations of a domain or page by each brand's answers "
    "(GET /v1/brands/{id}/citations/trends), "
    "per engine and `all`: the brand's own domain, each tracked competitor's domains, the pages of "
    "VISIBILITY_CITATION_URLS, and the own domain within each topic of VISIBILITY_CITATION_TOPICS. "
    "granularity `day`: the series (days the brand did not run are absent; days it ran without citing "
    "the target have 0); `window`: the response's summary over the request window, with its change, "
    "owned by the window's last day (like competitor_trends' window totals).",
    columns=(
        _BRAND_ID,
        _ENGINE,
        Column(
            "granularity",
            STRING,
            "`day`: a series point; `window`: the summary over the whole request window (period_start "
            "to date).",
            nullable=False,
            default=DAY,
        ),
        Column(
            "target_type",
            STRING,
            "What is trended: `domain` or `url` (the API's target.type).",
            nullable=False,
        ),
        Column("target_value", STRING, "The domain or page trended.", nullable=False),
        Column(
            "topic_id",
            STRING,
            "Topic (uuid) whose prompts the citations are counted over; `all` for every prompt.",
            nullable=False,
            default=ALL_TOPICS,
        ),
        Column("is_own_domain", BOOL, "True when the target is the brand's own domain."),
        Column(
            "date",
            DATE,
            "Day of the series point (`day`); the request window's last day (`window`).",
            nullable=False,
        ),
        Column(
            "period_start",
            DATE,
            "First day the row covers: the day (`day`), the request's `from` (`window`). Null on rows "
            "landed before this column existed.",
        ),
        Column("citations", INT, "Citations of the target over the row's period."),
        Column("avg_position", FLOAT, "Average position of those citations."),
        Column("brand_total_citations", INT, "All citations in the brand's answers over the row's period."),
        Column("share", FLOAT, "citations over brand_total_citations (scale as the API gives it)."),
        Column(
            "change_absolute",
            FLOAT,
            "`window` rows: the summary's change.absolute (how the service measures it is not specified); "
            "null on `day` rows.",
        ),
        Column(
            "change_percentage",
            FLOAT,
            "`window` rows: the summary's change.percentage; null on `day` rows.",
        ),
    ),
    key=("brand_id", "engine", "granularity", "target_type", "target_value", "topic_id", "date"),
    kind="partitioned",
    date_column="date",
)

COMPETITOR_TRENDS = TableSpec(
    name="competitor_trends",
    description="Metrics of each brand and its tracked competitors (GET /v1/brands/{id}/competitors/trends), "
    "per engine and `all`, one row per entity and period: granularity `day` (daily series points), "
    "`week` (weekly series points, Monday to Sunday) and `window` (the response's totals over the "
    "request window). A row covers period_start to date (inclusive) and belongs to the date partition "
    "of its last day, `date`. Filter on granularity, or read the views share_of_voice_daily, "
    "competitor_trends_weekly and competitor_trend_totals (docs/TABLES.md).",
    columns=(
        _BRAND_ID,
        _ENGINE,
        Column(
            "granularity",
            STRING,
            "`day`: a daily series point; `week`: a weekly series point (ISO week, Monday to Sunday); "
            "`window`: the totals over the whole request window.",
            nullable=False,
        ),
        Column("competitor_id", STRING, "Tracked competitor id (uuid); null for the brand itself."),
        Column("brand_name", STRING, "Name of the entity (the brand or a competitor).", nullable=False),
        Column("is_your_brand", BOOL, "True for the caller's brand."),
        Column("domains", STRINGS, "The entity's website domains."),
        Column(
            "history_from",
            DATE,
            "Earliest date with complete history for the entity; null while backfilling.",
        ),
        Column(
            "date",
            DATE,
            "Last day the row covers, and the date partition it belongs to: the day (`day`), the Sunday "
            "ending the week (`week`), the last day of the request window (`window`).",
            nullable=False,
        ),
        Column(
            "period_start",
            DATE,
            "First day the row covers: the day (`day`), the Monday of the week (`week`; the API's bucket "
            "date), the request's `from` (`window`). Null on day rows landed before this column existed.",
        ),
        *TREND_METRICS,  # shared with the views that pass them through
    ),
    key=("brand_id", "engine", "granularity", "brand_name", "date"),
    kind="partitioned",
    date_column="date",
)
