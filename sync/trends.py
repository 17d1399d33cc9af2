"""The fetches of the tables with an all-engine rollup (fetched with the engine omitted, never summed):
cited pages, citation trends, competitor trends (days, weeks and window totals: docs/TABLES.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from resources.api.client import VisibilityClient
from resources.api.endpoints import MAX_LIMIT_CITATION_URLS
from resources.api.paging import WalkPosition
from sync import tables, transforms
from sync.planning import Call
from sync.spool import DateSpool

#: Most pages the citation URLs endpoint returns (its maximum ``limit``).
CITATION_URLS_LIMIT = MAX_LIMIT_CITATION_URLS


def fetch_cited_pages(
    client: VisibilityClient, call: Call, walk: WalkPosition | None = None
) -> Iterator[pa.Table]:
    result = client.citation_urls(
        call.brand_id,
        engine=call.engine,
        start=call.window.start,
        end=call.window.end,
        limit=CITATION_URLS_LIMIT,
    )
    yield transforms.cited_pages_table(
        result.rows,
        brand_id=call.brand_id,
        day=call.window.start,
        engine=call.landed_engine,
        total_count=result.total_count,
        total_citations=result.total_citations,
        capped=result.capped,
    )


def fetch_citation_trends(
    client: VisibilityClient, call: Call, walk: WalkPosition | None = None
) -> Iterator[pa.Table]:
    """One target's day series and its summary over the call's window (one request)."""
    data = client.citation_trends(
        call.brand_id,
        domain=call.domain,
        url=call.url,
        topic_id=call.topic_id,
        engine=call.engine,
        start=call.window.start,
        end=call.window.end,
    )
    yield transforms.citation_trend_table(
        data, brand_id=call.brand_id, engine=call.landed_engine, topic_id=call.topic_id, window=call.window
    )


def fetch_competitor_trends(
    client: VisibilityClient, call: Call, walk: WalkPosition | None = None
) -> Iterator[pa.Table]:
    """A ``day`` call lands its series and its window totals (one request); a ``week`` call its weeks."""
    granularity = call.granularity or tables.DAY
    data = client.competitor_trends(
        call.brand_id,
        engine=call.engine,
        start=call.window.start,
        end=call.window.end,
        granularity=granularity,
    )
    yield transforms.competitor_trend_table(
        data,
        brand_id=call.brand_id,
        engine=call.landed_engine,
        totals=granularity == tables.DAY,
        window=call.window,
    )


def capped_notes(spool: DateSpool) -> dict[str, Any]:
    """How many (brand, day, engine) answers were truncated at the limit: a warning, visible in the UI."""
    capped: set[tuple[str, str, str]] = set()
    for part in spool.read(lambda t: t.filter(pc.fill_null(t["capped"], False))):
        for row in part.select(["brand_id", "date", "engine"]).to_pylist():
            capped.add((row["brand_id"], row["date"].isoformat(), row["engine"]))
    return {"capped_responses": len(capped)}
