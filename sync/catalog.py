"""Every table a sync lands, one self-contained entry each, in the order a sync lands them.

An entry says everything the rest of the code derives a table from: its spec (:mod:`sync.tables`),
the endpoints it reads, its planner (chosen by the endpoint's shape, :mod:`sync.planning`), its
fetch with its transform, its checks beyond ``keys_unique`` (and for ``no_empty_partitions`` its
evidence), and its group (``DAILY`` or ``SNAPSHOTS``). The assets, checks, jobs, dbt sources and
data dictionary derive from the entries; docs/ARCHITECTURE.md, "Adding a table", shows one added.
"""

from __future__ import annotations

from resources.api import endpoints as api
from resources.api.client import VisibilityClient
from resources.warehouse.contract import TableSpec
from sync import tables, transforms
from sync.discovery import Discovery
from sync.facts import (
    capped_notes,
    fetch_citation_trends,
    fetch_cited_pages,
    fetch_competitor_trends,
    paged_rows,
)
from sync.fetching import PartitionedTable, SnapshotTable
from sync.listings import BrandRows, list_brands, list_generations, per_brand_listing
from sync.planning import citation_targets, hull_per_engine, paged_per_brand, paged_per_prompt, per_day

#: Asset groups: the jobs select tables by group, so a new entry is in its jobs without a list to keep.
SNAPSHOT_GROUP = "visibility_snapshots"
DAILY_GROUP = "visibility_daily"

# --- snapshot tables: listed whole by one step, brands first (every other table is per brand) -------


def _brand_listing(spec: TableSpec, endpoint: api.Endpoint, rows_of: BrandRows) -> SnapshotTable:
    """A table of each brand's rows of one listing (the standard transform, ``transforms.brand_rows``)."""
    return SnapshotTable(
        spec, (endpoint,), per_brand_listing(spec, rows_of), per_brand=True, upstream="brands"
    )


BRANDS = SnapshotTable(
    tables.BRANDS,
    (api.LIST_BRANDS, api.GET_BRAND),
    list_brands,
    per_brand=False,
)
TOPICS = _brand_listing(tables.TOPICS, api.LIST_TOPICS, Discovery.topics)
PROMPTS = _brand_listing(tables.PROMPTS, api.LIST_PROMPTS, Discovery.prompts)
TRACKED_COMPETITORS = _brand_listing(
    tables.TRACKED_COMPETITORS, api.LIST_TRACKED_COMPETITORS, Discovery.competitors
)
GENERATIONS = SnapshotTable(
    tables.GENERATIONS,
    (api.LIST_GENERATIONS,),
    list_generations,
    per_brand=True,
    upstream="brands",
    checks=("generations_not_capped",),
)

# --- date x engine tables: fetched back to back by one step -------------------------------------------

COMPETITOR_TRENDS = PartitionedTable(
    spec=tables.COMPETITOR_TRENDS,
    endpoints=(api.COMPETITOR_TRENDS,),
    planner=hull_per_engine(api.COMPETITOR_TRENDS, weeks=True),
    fetch_one=fetch_competitor_trends,
    upstream="tracked_competitors",
    checks=("share_of_voice_sums_to_100", "window_totals_match_series"),
)
CITATION_TRENDS = PartitionedTable(
    spec=tables.CITATION_TRENDS,
    endpoints=(api.CITATION_TRENDS,),
    planner=hull_per_engine(api.CITATION_TRENDS, targets=citation_targets),
    fetch_one=fetch_citation_trends,
    needs_competitors=True,
    upstream="tracked_competitors",
    needs_targets=True,
)
CITED_PAGES = PartitionedTable(
    spec=tables.CITED_PAGES,
    endpoints=(api.CITATION_URLS,),
    planner=per_day(api.CITATION_URLS),
    fetch_one=fetch_cited_pages,
    upstream="brands",
    notes=capped_notes,
    checks=("cited_pages_not_capped", "no_empty_partitions"),
    evidence="own_domain_citations",
)
PROMPT_MENTIONS = PartitionedTable(
    spec=tables.PROMPT_MENTIONS,
    endpoints=(api.LIST_PROMPT_MENTIONS,),
    planner=paged_per_prompt(api.LIST_PROMPT_MENTIONS),
    fetch_one=paged_rows(VisibilityClient.list_prompt_mentions, transforms.mentions_table, per_prompt=True),
    needs_prompts=True,
    upstream="prompts",
    checks=("no_empty_partitions",),
    evidence="mentions",
)
ANSWERS = PartitionedTable(
    spec=tables.ANSWERS,
    endpoints=(api.LIST_ANSWERS,),
    planner=paged_per_brand(api.LIST_ANSWERS),
    fetch_one=paged_rows(VisibilityClient.list_answers, transforms.answers_table),
    upstream="prompts",
    checks=("no_empty_partitions",),
    evidence="answered_responses",
)

SNAPSHOTS: tuple[SnapshotTable, ...] = (BRANDS, TOPICS, PROMPTS, TRACKED_COMPETITORS, GENERATIONS)
#: Fetched back to back in one step, each landed while the next is fetched: the longest fetches last
#: (rollups first, then mentions, one call per prompt, then answers, paged per brand).
DAILY: tuple[PartitionedTable, ...] = (
    COMPETITOR_TRENDS,
    CITATION_TRENDS,
    CITED_PAGES,
    PROMPT_MENTIONS,
    ANSWERS,
)

#: Every synced table's entry by name.
BY_NAME: dict[str, SnapshotTable | PartitionedTable] = {t.spec.name: t for t in (*SNAPSHOTS, *DAILY)}

#: Tables landed by a sensor, not by a sync step (a sync creates them empty).
SENSOR_TABLES: tuple[TableSpec, ...] = (tables.AUDIT_REPORTS,)

#: Every landed table's spec by name (the snapshot tables, those landed by sensors, then the date x
#: engine tables): what the dbt sources, the data dictionary, the CLI's counts and the downstream
#: assets read.
ALL_TABLES: dict[str, TableSpec] = {
    **{t.spec.name: t.spec for t in SNAPSHOTS},
    **{spec.name: spec for spec in SENSOR_TABLES},
    **{t.spec.name: t.spec for t in DAILY},
}
