"""Fetches by endpoint shape, nothing written per table: :func:`paged_rows` reads one call's rows (per
brand, or per prompt) through the entry's transform; :func:`pages_of` reads any paged row endpoint
through the client's paging, so a new endpoint needs no client method of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from resources.api.client import VisibilityClient
from resources.api.endpoints import MAX_LIMIT_PAGING, Endpoint
from resources.api.paging import WalkPosition
from sync.fetching import FetchOne, slices
from sync.planning import Call

Row = Mapping[str, Any]
#: ``(rows, brand_id) -> table``: an entry's transform of one slice of rows.
Transform = Callable[[list[dict[str, Any]], str], pa.Table]


class ReadRows(Protocol):
    """Rows of one call: ``owner_id`` is the brand, or the prompt of a per-prompt endpoint."""

    def __call__(
        self,
        client: VisibilityClient,
        owner_id: str,
        /,
        *,
        engine: Any,
        start: Any,
        end: Any,
        walk: WalkPosition | None,
    ) -> Iterable[Row]: ...


@dataclass(frozen=True)
class pages_of:  # used like a function: ``pages_of(endpoint)``
    """Every row of a paged endpoint whose path takes one id (``/v1/brands/{id}/...``), filtered by
    ``engine`` (None: no filter) and the window ``from``/``to``; validated as ``endpoint`` declares."""

    endpoint: Endpoint
    limit: int = MAX_LIMIT_PAGING

    def __call__(
        self,
        client: VisibilityClient,
        owner_id: str,
        /,
        *,
        engine: Any,
        start: Any,
        end: Any,
        walk: WalkPosition | None = None,
    ) -> Iterable[Row]:
        params = {"engine": engine, "limit": self.limit, "from": start.isoformat(), "to": end.isoformat()}
        query = {k: v for k, v in params.items() if v is not None}
        return client.pages(self.endpoint, self.endpoint.path(id=owner_id), query, walk=walk)


def paged_rows(read: ReadRows, transform: Transform, *, per_prompt: bool = False) -> FetchOne:
    """One call's rows, read by ``read`` (per brand, or per prompt), in slices through ``transform``
    (whose errors name the endpoint of the table's catalog entry)."""

    def fetch(client: VisibilityClient, call: Call, walk: WalkPosition | None = None) -> Iterator[pa.Table]:
        owner = call.prompt_id if per_prompt else call.brand_id
        assert owner is not None, "a per-prompt endpoint needs a planner that plans per prompt"
        window = call.window
        rows = read(client, owner, engine=call.engine, start=window.start, end=window.end, walk=walk)
        for batch in slices(rows, walk=walk):
            yield transform(batch, call.brand_id)

    return fetch
