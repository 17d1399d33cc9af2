"""The data dictionary, docs/TABLES.md, generated from the specs the writers use.

    python -m sync.dictionary > docs/TABLES.md

Tables come from the :class:`~resources.warehouse.base.TableSpec` list given (``sync.tables`` for
the file; read at the command line only, so this module stays below the assets layer), views from
:mod:`resources.warehouse.views`, the example queries from :data:`EXAMPLES`, and the text around
them from ``sync/dictionary.md``. A test renders it again and fails when the file differs
(tests/warehouse/test_dictionary.py), and runs every example on a synced DuckDB file and Postgres.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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


#: The dictionary's hand-written text, around what :func:`render` derives from the specs.
TEMPLATE = Path(__file__).with_name("dictionary.md")


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
    """The whole dictionary as Markdown: :data:`TEMPLATE` with the tables, then views and examples."""
    kinds = [SqlType(k) for k in Kind] + [SqlType(Kind.VARCHAR, is_list=True)]
    types = "\n".join("| " + " | ".join(f"`{n}`" for n in type_names(st)) + " |" for st in kinds)
    text = (
        TEMPLATE.read_text()
        .replace("{types}", types)
        .replace("{load}", _bullets(LOAD_COLUMNS))
        .replace("{snapshot}", _bullets(SNAPSHOT_COLUMNS))
        .replace("{tables}", "\n".join(["## Tables\n", _index(tables), *(_table(t) for t in tables)]))
    )
    parts = [
        text,
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
