"""The snapshot tables a sync's daily tables already listed, landed without a request of their own.

The snapshot tables themselves are catalog entries (:mod:`sync.catalog`), listed by the shapes of
:mod:`sync.listings`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from sync import tables, transforms
from sync.catalog import SNAPSHOTS
from sync.discovery import BrandScope, Discovery
from sync.fetching import SnapshotTable, naming_source
from sync.listings import GENERATIONS_LIMIT_TAG, generations_limit

__all__ = ["GENERATIONS_LIMIT_TAG", "generations_limit", "listed_snapshots"]


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
    by_name = {table.spec.name: table for table in SNAPSHOTS}
    with naming_source(by_name[tables.BRANDS.name]):
        out = [(by_name[tables.BRANDS.name], scope, transforms.brands_table(scope.brands))]
    builders = {
        tables.PROMPTS.name: (tables.PROMPTS, transforms.prompts_table),
        tables.TRACKED_COMPETITORS.name: (tables.TRACKED_COMPETITORS, transforms.tracked_competitors_table),
    }
    for table in SNAPSHOTS:
        if table.spec.name in builders and table.spec.name in listings:
            spec, build = builders[table.spec.name]
            rows = listings[table.spec.name]
            with naming_source(table):
                out.append((table, scope, transforms.concat(spec, [build(r, b) for b, r in rows.items()])))
    return out
