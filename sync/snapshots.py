"""The snapshot tables: brands, topics, prompts, tracked competitors, generations.

Each sync lists the whole set; rows that vanish stay in the table with ``is_current = false``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from resources.api import endpoints as api
from resources.api.client import VisibilityClient
from resources.api.endpoints import MAX_LIMIT_PAGING
from sync import tables as T
from sync import transforms as X
from sync.discovery import BrandScope, Discovery, per_brand
from sync.fetching import SnapshotTable

#: Run tag: the ``limit`` of the generations listing (default and maximum: the API's 999). Lower
#: values exist for tests and for trimming a slow first sync; a brand with more generations than
#: the limit is then capped, and its older rows are kept (never retired).
GENERATIONS_LIMIT_TAG = "visibility/generations_limit"
GENERATIONS_LIMIT = MAX_LIMIT_PAGING


def generations_limit(tags: Mapping[str, str]) -> int:
    """The run's generations ``limit`` tag, clamped to ``1..999`` (the default when absent)."""
    raw = str(tags.get(GENERATIONS_LIMIT_TAG, "") or "").strip()
    if not raw:
        return GENERATIONS_LIMIT
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"run tag {GENERATIONS_LIMIT_TAG} must be an integer, got {raw!r}") from None
    return max(1, min(GENERATIONS_LIMIT, value))


def _brands(
    client: VisibilityClient,
    scope: BrandScope,
    notes: dict[str, Any],
    tags: Mapping[str, str],
    discovery: Discovery,
) -> pa.Table:
    return X.brands_table(scope.brands)


def _topics(
    client: VisibilityClient,
    scope: BrandScope,
    notes: dict[str, Any],
    tags: Mapping[str, str],
    discovery: Discovery,
) -> pa.Table:
    rows = per_brand(client, scope, lambda b: list(client.list_topics(b)))
    return X.concat(T.TOPICS, [X.topics_table(r, b) for b, r in rows.items()])


def _prompts(
    client: VisibilityClient,
    scope: BrandScope,
    notes: dict[str, Any],
    tags: Mapping[str, str],
    discovery: Discovery,
) -> pa.Table:
    rows = discovery.prompts(client, scope)
    return X.concat(T.PROMPTS, [X.prompts_table(r, b) for b, r in rows.items()])


def _competitors(
    client: VisibilityClient,
    scope: BrandScope,
    notes: dict[str, Any],
    tags: Mapping[str, str],
    discovery: Discovery,
) -> pa.Table:
    rows = discovery.competitors(client, scope)
    return X.concat(T.TRACKED_COMPETITORS, [X.tracked_competitors_table(r, b) for b, r in rows.items()])


def _generations(
    client: VisibilityClient,
    scope: BrandScope,
    notes: dict[str, Any],
    tags: Mapping[str, str],
    discovery: Discovery,
) -> pa.Table:
    limit = generations_limit(tags)
    sets = per_brand(client, scope, lambda b: client.list_generations(b, limit=limit))
    capped = {b: {"rows": len(s.rows), "total_count": s.total_count} for b, s in sets.items() if s.capped}
    notes["capped"] = capped  # {brand id: {rows, total_count}}: read by the generations_not_capped check
    notes["capped_responses"] = len(capped)
    return X.concat(T.GENERATIONS, [X.generations_table(s.rows, b) for b, s in sets.items()])


#: Listed in this order in one step: brands first (every other table is per brand).
SNAPSHOT_TABLES = (
    SnapshotTable(T.BRANDS, (api.LIST_BRANDS, api.GET_BRAND), _brands, per_brand=False),
    SnapshotTable(T.TOPICS, (api.LIST_TOPICS,), _topics, per_brand=True, upstream="brands"),
    SnapshotTable(T.PROMPTS, (api.LIST_PROMPTS,), _prompts, per_brand=True, upstream="brands"),
    SnapshotTable(
        T.TRACKED_COMPETITORS,
        (api.LIST_TRACKED_COMPETITORS,),
        _competitors,
        per_brand=True,
        upstream="brands",
    ),
    SnapshotTable(T.GENERATIONS, (api.LIST_GENERATIONS,), _generations, per_brand=True, upstream="brands"),
)


def listed_snapshots(
    discovery: Discovery, only: Sequence[str] = ()
) -> list[tuple[SnapshotTable, BrandScope, pa.Table]]:
    """The snapshot tables a sync's daily tables already listed, as rows to upsert (no request).

    A sync of the daily tables alone (the ``visibility_daily`` group's backfill) lists the brands,
    and the prompts or tracked competitors its tables need; landing those listings keeps the views
    and the report, which name brands and competitors, whole in a warehouse that was never given a
    snapshot sync. Topics and generations are not listed by the daily tables, so they are not here.
    """
    scope, listings = discovery.listed(only)
    if scope is None:
        return []
    out: list[tuple[SnapshotTable, BrandScope, pa.Table]] = [
        (SNAPSHOT_TABLES[0], scope, X.brands_table(scope.brands))
    ]
    builders = {
        T.PROMPTS.name: (T.PROMPTS, X.prompts_table),
        T.TRACKED_COMPETITORS.name: (T.TRACKED_COMPETITORS, X.tracked_competitors_table),
    }
    for table in SNAPSHOT_TABLES:
        if table.spec.name in builders and table.spec.name in listings:
            spec, build = builders[table.spec.name]
            rows = listings[table.spec.name]
            out.append((table, scope, X.concat(spec, [build(r, b) for b, r in rows.items()])))
    return out
