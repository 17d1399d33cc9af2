"""Listings of the snapshot tables by shape (one whole listing per sync), chosen by catalog entries:
the brands, the generations, or what the sync's discovery lists once for every step
(:data:`BrandRows`). Rows that vanish stay in the table with ``is_current = false``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from resources.api.client import VisibilityClient
from resources.api.endpoints import MAX_LIMIT_PAGING
from resources.warehouse.contract import TableSpec
from sync import tables, transforms
from sync.discovery import BrandScope, Discovery, per_brand
from sync.fetching import SnapshotFetch

Row = Mapping[str, Any]

#: Run tag: the ``limit`` of the generations listing (default and maximum: the API's 999). Lower
#: values exist for tests and for trimming a slow first sync; a brand with more generations than
#: the limit is then capped, and its older rows are kept (never retired).
GENERATIONS_LIMIT_TAG = "visibility/generations_limit"


def generations_limit(tags: Mapping[str, str]) -> int:
    """The run's generations ``limit`` tag, clamped to ``1..999`` (the default when absent)."""
    raw = str(tags.get(GENERATIONS_LIMIT_TAG, "") or "").strip()
    if not raw:
        return MAX_LIMIT_PAGING
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"run tag {GENERATIONS_LIMIT_TAG} must be an integer, got {raw!r}") from None
    return max(1, min(MAX_LIMIT_PAGING, value))


def list_brands(
    client: VisibilityClient,
    scope: BrandScope,
    notes: dict[str, Any],
    tags: Mapping[str, str],
    discovery: Discovery,
) -> pa.Table:
    """The brands the sync's scope listed (no request of its own)."""
    return transforms.rows_to_table(tables.BRANDS, scope.brands)


#: ``(discovery, client, scope) -> {brand id: rows}``: where a per-brand listing's rows come from, a
#: listing the sync's discovery makes once for every table (``Discovery.prompts``, ...).
BrandRows = Callable[[Discovery, VisibilityClient, BrandScope], Mapping[str, Sequence[Row]]]


def per_brand_listing(spec: TableSpec, rows_of: BrandRows) -> SnapshotFetch:
    """Each brand's rows of the scope (``rows_of``), with the brand they were listed for, as one table."""

    def fetch(
        client: VisibilityClient,
        scope: BrandScope,
        notes: dict[str, Any],
        tags: Mapping[str, str],
        discovery: Discovery,
    ) -> pa.Table:
        return transforms.per_brand_table(spec, rows_of(discovery, client, scope))

    return fetch


def list_generations(
    client: VisibilityClient,
    scope: BrandScope,
    notes: dict[str, Any],
    tags: Mapping[str, str],
    discovery: Discovery,
) -> pa.Table:
    """Generations: a complete set per brand, its ``limit`` from the run's tag; truncated brands are
    recorded in ``notes["capped"]`` (read by the generations_not_capped check, never retired)."""
    limit = generations_limit(tags)
    sets = per_brand(client, scope, lambda b: client.list_generations(b, limit=limit))
    capped = {b: {"rows": len(s.rows), "total_count": s.total_count} for b, s in sets.items() if s.capped}
    notes["capped"] = capped  # {brand id: {rows, total_count}}: read by the generations_not_capped check
    notes["capped_responses"] = len(capped)
    return transforms.per_brand_table(tables.GENERATIONS, {b: s.rows for b, s in sets.items()})
