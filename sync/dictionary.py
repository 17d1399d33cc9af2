"""The data dictionary, docs/TABLES.md, generated from the specs the writers use.

    python -m sync.dictionary > docs/TABLES.md

Tables come from the :class:`~resources.warehouse.base.TableSpec` list given (``sync.tables`` for
the file; read at the command line only, so this module stays below the assets layer), views from
:mod:`resources.warehouse.views`, and the example queries from :data:`EXAMPLES`. A test renders it
again and fails when the file differs (tests/warehouse/test_dictionary.py), and runs every example
on a synced DuckDB file and Postgres schema.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from resources.warehouse.contract import LOAD_COLUMNS, SNAPSHOT_COLUMNS, Column, TableSpec
from resources.warehouse.types import Kind, SqlType, bigquery_type, duckdb_type, postgres_type, sql_type
from resources.warehouse.views import ANALYST_VIEWS, ViewSpec, current_view_name
from sync.catalog import ALL_TABLES

COMMAND = "python -m sync.dictionary > docs/TABLES.md"


@dataclass(frozen=True)
class Example:
    """An example query; ``postgres`` or ``bigquery`` None: the DuckDB SQL runs there as it is."""

    title: str
    duckdb: str
    postgres: str | None = None
    bigquery: str | None = None

    def sql(self, engine: str) -> str:
        """The query for ``engine`` (``duckdb``, ``postgres``, ``bigquery``)."""
        own = {"postgres": self.postgres, "bigquery": self.bigquery}.get(engine)
        return (own or self.duckdb).strip()


EXAMPLES: tuple[Example, ...] = (
    Example(
        "Which engine mentions us most this week (the last 7 days)",
        """
SELECT brand, engine, SUM(mention_count) AS mentions_7d
FROM share_of_voice_daily
WHERE is_your_brand AND engine <> 'all'
  AND date > (SELECT MAX(date) FROM share_of_voice_daily) - 7
GROUP BY brand_id, brand, engine
ORDER BY brand, mentions_7d DESC
""",
        bigquery="""
SELECT brand, engine, SUM(mention_count) AS mentions_7d
FROM share_of_voice_daily
WHERE is_your_brand AND engine <> 'all'
  AND date > DATE_SUB((SELECT MAX(date) FROM share_of_voice_daily), INTERVAL 7 DAY)
GROUP BY brand_id, brand, engine
ORDER BY brand, mentions_7d DESC
""",
    ),
    Example(
        "Are we gaining on a competitor? Our lead in share of voice, week by week (all engines)",
        """
SELECT brand, entity_name AS competitor, week_start,
       brand_share_of_voice AS our_share_of_voice, share_of_voice AS their_share_of_voice,
       brand_share_of_voice - share_of_voice AS our_lead,
       brand_share_of_voice - share_of_voice
           - LAG(brand_share_of_voice - share_of_voice)
                 OVER (PARTITION BY brand_id, entity_name ORDER BY week_start) AS lead_change
FROM competitor_trends_weekly
WHERE engine = 'all' AND NOT is_your_brand  -- AND entity_name = 'Tandemio'
ORDER BY brand, competitor, week_start
""",
    ),
    Example(
        "Share of voice over the last 7 landed days, per brand and engine",
        """
SELECT brand, engine, entity_name,
       ROUND(100.0 * SUM(mention_count)
             / NULLIF(SUM(SUM(mention_count)) OVER (PARTITION BY brand_id, engine), 0), 1)
           AS share_of_voice_7d
FROM share_of_voice_daily
WHERE date > (SELECT MAX(date) FROM share_of_voice_daily) - 7
GROUP BY brand_id, brand, engine, entity_name
ORDER BY brand, engine, share_of_voice_7d DESC
""",
        bigquery="""
SELECT brand, engine, entity_name,
       ROUND(100.0 * SUM(mention_count)
             / NULLIF(SUM(SUM(mention_count)) OVER (PARTITION BY brand_id, engine), 0), 1)
           AS share_of_voice_7d
FROM share_of_voice_daily
WHERE date > DATE_SUB((SELECT MAX(date) FROM share_of_voice_daily), INTERVAL 7 DAY)
GROUP BY brand_id, brand, engine, entity_name
ORDER BY brand, engine, share_of_voice_7d DESC
""",
    ),
    Example(
        "Where each brand stands on its newest day (all engines)",
        """
SELECT brand, date, entity_name, visibility_score, share_of_voice, avg_position
FROM latest_day_per_brand
WHERE engine = 'all'
ORDER BY brand, share_of_voice DESC
""",
    ),
    Example(
        "Weekly visibility of each brand, per engine (complete ISO weeks)",
        """
SELECT brand, engine, week_start, week_end, visibility_score, share_of_voice, mention_count
FROM competitor_trends_weekly
WHERE is_your_brand
ORDER BY brand, engine, week_start
""",
    ),
    Example(
        "The service's own totals over the newest synced window",
        """
SELECT brand, entity_name, engine, window_start, window_last_day, detection_rate, visibility_score,
       share_of_voice
FROM competitor_trend_totals
WHERE window_last_day = (SELECT MAX(window_last_day) FROM competitor_trend_totals)
ORDER BY brand, engine, share_of_voice DESC
""",
    ),
    Example(
        "Totals of any window, recomputed from the daily points (docs/OPERATIONS.md gives each rule)",
        """
SELECT brand_id, brand_name,
       SUM(mention_count) AS mentions,
       100.0 * SUM(responses_with_brand) / NULLIF(SUM(responses_answered), 0) AS detection_rate
FROM competitor_trends
WHERE granularity = 'day' AND engine = 'all'
  AND date > (SELECT MAX(date) FROM competitor_trends WHERE granularity = 'day') - 14
GROUP BY brand_id, brand_name
ORDER BY brand_id, mentions DESC
""",
        bigquery="""
SELECT brand_id, brand_name,
       SUM(mention_count) AS mentions,
       100.0 * SUM(responses_with_brand) / NULLIF(SUM(responses_answered), 0) AS detection_rate
FROM competitor_trends
WHERE granularity = 'day' AND engine = 'all'
  AND date > DATE_SUB((SELECT MAX(date) FROM competitor_trends WHERE granularity = 'day'), INTERVAL 14 DAY)
GROUP BY brand_id, brand_name
ORDER BY brand_id, mentions DESC
""",
    ),
    Example(
        "The 3 most-cited pages of each brand's own domain over its last 28 landed days, per engine",
        """
SELECT brand, engine, window_start, window_end, url, citations, days_cited, capped_days
FROM top_cited_pages_28d
WHERE is_own_domain
QUALIFY ROW_NUMBER() OVER (PARTITION BY brand_id, engine ORDER BY citations DESC, url) <= 3
ORDER BY brand, engine, citations DESC
""",
        """
SELECT brand, engine, window_start, window_end, url, citations, days_cited, capped_days
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY brand_id, engine ORDER BY citations DESC, url) AS n
    FROM top_cited_pages_28d
    WHERE is_own_domain
) AS pages
WHERE n <= 3
ORDER BY brand, engine, citations DESC
""",
    ),
    Example(
        "How often each brand's answers cite its own site and its competitors' sites, per topic "
        "(all engines, every landed day; topic null: every prompt)",
        """
SELECT brand, topic, target_value AS domain, is_own_domain, SUM(citations) AS citations,
       SUM(brand_total_citations) AS all_citations
FROM citation_trends_daily
WHERE engine = 'all' AND target_type = 'domain'
GROUP BY brand_id, brand, topic_id, topic, target_value, is_own_domain
ORDER BY brand, topic, citations DESC
""",
    ),
)

ENGINE_NAMES = {"duckdb": "DuckDB", "postgres": "Postgres", "bigquery": "BigQuery"}


# --- rendering ------------------------------------------------------------------------------------

_INTRO = f"""# Tables and views

Generated by `{COMMAND}` from the table specs the writers use (`sync/tables.py`) and the view
specs (`resources/warehouse/views.py`); `tests/warehouse/test_dictionary.py` fails when this file
and the specs differ. Every description below is also the comment (DuckDB, Postgres) or description
(BigQuery) of its table, view or column, so a BI tool shows the same text.

Names: DuckDB names a file's catalog after the file, so with the defaults (`data/visibility.duckdb`,
schema `visibility`) run `USE visibility.visibility;` first or write `visibility.visibility.<name>`.
On Postgres, `SET search_path TO visibility;` or write `visibility.<name>`. On BigQuery the tables
and views are in the dataset of `VISIBILITY_WAREHOUSE`.
"""

_CONVENTIONS = """## Conventions

Types: one logical type per column, spelled by each engine as follows. Nested values of fields the
API adds later land as JSON.

| DuckDB | Postgres | BigQuery |
|---|---|---|
{types}

Every table also has these columns, written by the connector:

{load}

Snapshot tables (upserted by key, below) keep rows that disappear from the API, and have these
columns too:

{snapshot}

Each snapshot table has a view `<table>_current` of its rows still in the API (`is_current`), with the
table's columns and column comments. Partitioned tables are written per date partition and engine
(`all` for the all-engine rollup): a sync replaces exactly the rows of the dates and engines it
fetched, in one transaction per table.

Fields the API adds later land as extra nullable columns described as such, at most
`VISIBILITY_MAX_NEW_COLUMNS` (default 50) in one table's fetch: more refuse that table, which keeps
its columns and rows (docs/OPERATIONS.md, *Table decisions*).
"""

_TRENDS = """## Competitor trends: days, weeks and windows

`competitor_trends` holds three kinds of rows, told apart by `granularity`; each row covers
`period_start` to `date` (both included) and belongs to the date partition of `date`, its last day:

- `day`: a daily series point; `period_start` = `date` = the day. One `granularity=day` call per
  brand and engine over the run's dates.
- `week`: a weekly series point; `period_start` = the Monday (the API's bucket date), `date` = the
  Sunday. One more call per brand and engine, in runs that hold a Sunday.
- `window`: the response's `totals` over the request window; `period_start` = the request's `from`,
  `date` = its last day (`to` minus one day). No request of their own: they come with the day series.

- **A week belongs to its Sunday.** Only once the Sunday is synced are all seven days in, so the run
  that holds the Sunday asks for the whole week (Monday to Sunday), even days outside the run (and
  before `VISIBILITY_START_DATE`). The daily sync's dates (yesterday and the
  `VISIBILITY_LOOKBACK_DAYS` before it, default 3) hold a Sunday on four days out of seven, so a week
  restated within the lookback is fetched again with its days. The running week has no row yet: read
  the day rows (`share_of_voice_daily`) for it.
- **Cost.** The week call is one request per brand and engine (the `all` rollup included) of a run
  holding a Sunday, whatever the number of weeks it covers: four daily syncs in seven make it, a
  backfill makes it once. The totals cost nothing: they are in the day response.
- **Window totals are the service's own numbers** over the exact request window (a sum of rounded
  daily rates is not), one window per brand, engine and last day: a later sync whose newest day is
  the same replaces it, and a sync whose dates include that day without ending on it removes it. In
  steady state that is the daily sync's window (the newest day and its lookback days); backfills
  leave their windows on the days they ended on. For any other window, recompute from the day rows
  (docs/OPERATIONS.md).
- Rows of every granularity are landed and replaced together, in the landing of the table: a re-run
  of the same partitions gives the same table. Filter on `granularity`, or read the views below.
"""


#: What of the spec lands where: (the spec's, lands in, not landed and why).
_COVERAGE_ROWS: tuple[tuple[str, str, str], ...] = (
    (
        "Brand",
        "`brands`",
        "",
    ),
    (
        "Topic",
        "`topics` (+ `brand_id`)",
        "",
    ),
    (
        "Prompt (assumed shape, README.md)",
        "`prompts`",
        "",
    ),
    (
        "Prompt mention",
        "`prompt_mentions` (+ `brand_id`)",
        "",
    ),
    (
        "Answer (assumed shape)",
        "`answers`; fields beyond the assumed ones as extra columns",
        "",
    ),
    (
        "Generation summary row",
        "`generations`",
        "`brief_md`, `draft_md`, `slug`, `meta_title`, `meta_description`: omitted from list rows by the "
        "service; the single-record fetch (one request per generation) is not synced",
    ),
    (
        "Audit report",
        "`audit_reports` (the finished report's body as JSON text in `report`)",
        "the finished report's fields: not specified",
    ),
    (
        "Tracked competitor",
        "`tracked_competitors` (+ `brand_id`)",
        "",
    ),
    (
        "Untrack result",
        "nothing: the next sync keeps the competitor with `is_current = false`",
        "",
    ),
    (
        "CompetitorTrend `granularity`, `from`, `to`, `engine`",
        "`competitor_trends`: `granularity`, `period_start` and `date` of the `window` rows, `engine` "
        "(`all` for the null rollup)",
        "",
    ),
    (
        "CompetitorTrendEntity, its `series` and `totals`",
        "`competitor_trends` rows of granularity `day` / `week` (series) and `window` (totals)",
        "",
    ),
    (
        "Citation trend `target`, `series`",
        "`citation_trends` rows of granularity `day`",
        "",
    ),
    (
        "Citation trend `summary` (`change.absolute`, `change.percentage` too)",
        "`citation_trends` rows of granularity `window` (`change_absolute`, `change_percentage`)",
        "",
    ),
    (
        "Citation trends by `url`, by topic",
        "`citation_trends`: the pages of `VISIBILITY_CITATION_URLS` (`target_type` `url`), the own "
        "domain within each topic of `VISIBILITY_CITATION_TOPICS` (`topic_id`)",
        "competitor domains per topic: not synced (a call per domain and topic)",
    ),
    (
        "Most-cited page rows and envelope",
        "`cited_pages` (+ `rank`; `total_count`, `total_citations`, `capped` on every row)",
        "`has_more`, `next_cursor`: constant; the topic filter: not synced",
    ),
    (
        "Topic create and rename, untrack, audit request",
        "operations (`visibility-sync` commands, Dagster jobs), then the tables above",
        "",
    ),
    (
        "Rate-limit headers, `X-Request-Id`",
        "run metadata and error messages, not tables",
        "",
    ),
    (
        "Recommendations, content optimizations, visibility, brand creation, competitor tracking, one "
        "generation or audit",
        "nothing: the spec names them without showing them",
        "",
    ),
)


def _coverage() -> str:
    lines = ["| the spec's | lands in | not landed, and why |", "|---|---|---|"]
    lines += [f"| {spec} | {where} | {why} |" for spec, where, why in _COVERAGE_ROWS]
    return (
        "## What of the service's spec lands where\n\nEvery field of every list or trend the spec "
        "shows lands, under its own name; what does not, and why:\n\n" + "\n".join(lines) + "\n"
    )


_VIEWS = """## Views

For BI tools: each writer (DuckDB, Postgres, BigQuery) creates them once their tables exist.

**Names.** Every view follows one rule, so a question about "us" against "them" needs no join:

- `brand_id`, `brand`: the **owning brand**, whose answers were measured (the brand of yours a row
  was fetched for; `brand` is its name from `brands`). Every view has both.
- `entity_name`, `competitor_id`, `is_your_brand`: the **entity measured** in those answers: the
  owning brand itself (`is_your_brand`, no `competitor_id`) or one of its tracked competitors.
- `brand_share_of_voice`: the owning brand's own figure of the same period and engine, on every
  entity's row (`brand_share_of_voice - share_of_voice` is the lead over that competitor).

The tables keep the API's field names: `brand_name` is the entity's name in `competitor_trends`
(`entity_name` in the views), the competitor's in `tracked_competitors`, and the brand named in an
answer in `prompt_mentions`.

**Citations.** `citation_trends_daily` and `cited_pages_daily` are `citation_trends` and
`cited_pages` day by day with the brand's name (and the topic's), no join needed.

**Windows.** `share_of_voice_daily` has a `date` to filter on; `top_cited_pages` sums every landed
day, `top_cited_pages_7d` and `top_cited_pages_28d` the 7 and 28 newest landed days of each brand and
engine (days not landed are skipped, so a window is always that many measured days once they exist).
"""


def type_names(st: SqlType) -> tuple[str, str, str]:
    """DuckDB, Postgres and BigQuery spellings of a logical type."""
    bq = bigquery_type(st)
    bigquery = f"ARRAY<{bq.field_type}>" if bq.mode == "REPEATED" else bq.field_type
    return duckdb_type(st), postgres_type(st), bigquery


def _column_type(t: pa.DataType) -> str:
    st = sql_type(t)
    return "`" + (duckdb_type(st) if st is not None else "VARCHAR") + "`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _columns_table(columns: Sequence[Column], key: Sequence[str] = ()) -> str:
    lines = ["| column | type | description |", "|---|---|---|"]
    for c in columns:
        name = f"**`{c.name}`**" if c.name in key else f"`{c.name}`"
        lines.append(f"| {name} | {_column_type(c.type)} | {_cell(c.description)} |")
    return "\n".join(lines)


def _bullets(columns: Sequence[Column]) -> str:
    return "\n".join(f"- `{c.name}` ({_column_type(c.type)}): {c.description}" for c in columns)


def _table(spec: TableSpec) -> str:
    facts = [f"key: {', '.join(f'`{k}`' for k in spec.key)}"]
    if spec.kind == "partitioned":
        facts.insert(0, f"partitioned by `{spec.date_column}` x `{spec.engine_column}`")
    else:
        facts.insert(0, f"snapshot, view `{current_view_name(spec)}`")
    return (
        f"### `{spec.name}`\n\n{spec.description}\n\n{'; '.join(facts)} (key columns in bold).\n\n"
        f"{_columns_table(spec.columns, spec.key)}\n"
    )


def _index(tables: Sequence[TableSpec]) -> str:
    """One line a table (kind and key), linking to its section: the list README.md points to."""
    lines = ["| table | kind | key |", "|---|---|---|"]
    for spec in tables:
        kind = "date x engine" if spec.kind == "partitioned" else "snapshot"
        key = ", ".join(f"`{k}`" for k in spec.key)
        lines.append(f"| [`{spec.name}`](#{spec.name}) | {kind} | {key} |")
    return "\n".join(lines) + "\n"


def _view(view: ViewSpec) -> str:
    sources = ", ".join(f"`{s}`" for s in view.sources)
    return f"### `{view.name}`\n\n{view.description}\n\nReads {sources}.\n\n{_columns_table(view.columns)}\n"


def _example(example: Example) -> str:
    """The query once per distinct SQL, headed by the engines it runs on as written."""
    engines_by_sql: dict[str, list[str]] = {}
    for engine, name in ENGINE_NAMES.items():
        engines_by_sql.setdefault(example.sql(engine), []).append(name)
    blocks = [
        f"{' and '.join([', '.join(names[:-1]), names[-1]] if len(names) > 1 else names)}:\n\n"
        f"```sql\n{sql};\n```\n"
        for sql, names in engines_by_sql.items()
    ]
    return f"### {example.title}\n\n" + "\n".join(blocks)


def render(
    tables: Sequence[TableSpec],
    views: Sequence[ViewSpec] = ANALYST_VIEWS,
    examples: Sequence[Example] = EXAMPLES,
) -> str:
    """The whole dictionary as Markdown."""
    kinds = [SqlType(k) for k in Kind] + [SqlType(Kind.VARCHAR, is_list=True)]
    types = "\n".join("| " + " | ".join(f"`{n}`" for n in type_names(st)) + " |" for st in kinds)
    conventions = _CONVENTIONS.format(
        types=types, load=_bullets(LOAD_COLUMNS), snapshot=_bullets(SNAPSHOT_COLUMNS)
    )
    parts = [
        _INTRO,
        conventions,
        _TRENDS,
        _coverage(),
        "## Tables\n",
        _index(tables),
        *(_table(t) for t in tables),
        _VIEWS,
        *(_view(v) for v in views),
        "## Example queries\n\nRun after the schema setup above (on BigQuery, with the dataset as the "
        "query's default dataset); the tests run each on a synced DuckDB file and Postgres schema, and "
        "on the BigQuery emulator.\n",
        *(_example(e) for e in examples),
    ]
    return "\n".join(parts)


def main() -> None:
    sys.stdout.write(render(list(ALL_TABLES.values())))


if __name__ == "__main__":
    main()
