"""The date x engine tables, synced by one step: ``sync_daily``.

One step (one run per launch, one partitions definition) for every partitioned table, so the UI's
group "Materialize" picks one date range for all of them and a sync fetches them back to back with
one client. Order: the longest fetches last, so each table's landing hides behind the next fetch;
the rollup tables first (one call per brand and engine, or per brand, engine and day), then
mentions (one call per prompt), then answers (paged per brand, the longest).
"""

from __future__ import annotations

from dagster import AssetsDefinition

from assets.builders import build_partitioned_assets
from assets.facts import ANSWERS, PROMPT_MENTIONS
from assets.trends import CITATION_TRENDS, CITED_PAGES, COMPETITOR_TRENDS

DAILY_GROUP = "visibility_daily"
PARTITIONED_TABLES = (COMPETITOR_TRENDS, CITATION_TRENDS, CITED_PAGES, PROMPT_MENTIONS, ANSWERS)

sync_daily = build_partitioned_assets(
    "sync_daily",
    PARTITIONED_TABLES,
    group_name=DAILY_GROUP,
    description="Every date x engine table (engines plus the `all` rollup): fetched back to back, "
    "each landed while the next is fetched; a backfill's runs share one fetch per table.",
)

daily_assets: list[AssetsDefinition] = [sync_daily]
