"""The fetches of one planned call -> Arrow batches, picked by catalog entries.

Paged row endpoints need nothing per table: :func:`paged_rows` reads one call's rows (per brand, or
per prompt) through the entry's transform, :func:`pages_of` any paged row endpoint through the
client's paging. The tables with an all-engine rollup (fetched with the engine omitted, never summed)
have their own: cited pages, citation trends, competitor trends (docs/TABLES.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from resources.api.client import VisibilityClient
from resources.api.endpoints import MAX_LIMIT_CITATION_URLS, MAX_LIMIT_PAGING, Endpoint
from resources.api.paging import WalkPosition
from sync import tables, transforms
from sync.fetching import FetchOne, slices
from sync.planning import Call
from sync.spool import DateSpool

Row = Mapping[str, Any]
#: ``(rows, brand_id) -> table``: an entry's transform of one slice of rows.
Transform = Callable[[list[dict[str, Any]], str], pa.Table]


#: ``read(client, owner_id, *, engine, start, end, walk) -> rows``: the rows of one call, ``owner_id``
#: the brand, or the prompt of a per-prompt endpoint (a client method, or :func:`pages_of`).
ReadRows = Callable[..., Iterable[Row]]


def pages_of(endpoint: Endpoint, limit: int = MAX_LIMIT_PAGING) -> ReadRows:
    """Every row of a paged endpoint whose path takes one id (``/v1/brands/{id}/...``), filtered by
    ``engine`` (None: no filter) and the window ``from``/``to``; validated as ``endpoint`` declares."""

    def read(client: VisibilityClient, owner_id: str, /, **window: Any) -> Iterable[Row]:
        return client.list_window(endpoint, owner_id, limit=limit, **window)

    return read


def paged_rows(read: ReadRows, transform: Transform, *, per_prompt: bool = False) -> FetchOne:
    """One call's rows, read by ``read`` (per brand, or per prompt), in slices through ``transform``
    (whose errors name the endpoint of the table's catalog entry)."""

    def fetch(client: VisibilityClient, call: Call, walk: WalkPosition) -> Iterator[pa.Table]:
        owner = call.prompt_id if per_prompt else call.brand_id
        assert owner is not None, "a per-prompt endpoint needs a planner that plans per prompt"
        window = call.window
        rows = read(client, owner, engine=call.engine, start=window.start, end=window.end, walk=walk)
        for batch in slices(rows, walk):
            yield transform(batch, call.brand_id)

    return fetch


def fetch_cited_pages(client: VisibilityClient, call: Call, walk: WalkPosition) -> Iterator[pa.Table]:
    result = client.citation_urls(
        call.brand_id,
        engine=call.engine,
        start=call.window.start,
        end=call.window.end,
        limit=MAX_LIMIT_CITATION_URLS,  # the most pages it returns
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


def fetch_citation_trends(client: VisibilityClient, call: Call, walk: WalkPosition) -> Iterator[pa.Table]:
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


def fetch_competitor_trends(client: VisibilityClient, call: Call, walk: WalkPosition) -> Iterator[pa.Table]:
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
