"""What a run fetches for: the brands in the key's scope, their engines, prompts and competitors.

A brand that answers 404 (outside a brand-scoped key, or removed during the run) is out of scope,
not an error: the run goes on for the others and never touches its rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from resources.api.client import Row, VisibilityClient
from resources.api.errors import NotFoundError
from resources.failures import failure_kind
from sync.planning import BrandInput

T = TypeVar("T")

#: Run tag that restricts a run to some brands: comma-separated brand ids (empty: every brand).
BRANDS_TAG = "visibility/brands"
#: Run tag naming the sync a command-line run belongs to (the runs of one command share it).
SYNC_TAG = "visibility/sync"


def brand_filter(tags: dict[str, str] | Any) -> tuple[str, ...]:
    """Brand ids from the run's ``visibility/brands`` tag, in order, without duplicates."""
    raw = str(tags.get(BRANDS_TAG, "") or "")
    return tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))


@dataclass
class BrandScope:
    """Brands a run covers, and the ones that answered 404."""

    brands: list[Row] = field(default_factory=list)
    out_of_scope: list[str] = field(default_factory=list)

    @property
    def brand_ids(self) -> list[str]:
        return [str(b["id"]) for b in self.brands]

    def drop(self, brand_ids: set[str]) -> None:
        """Move brands that answered 404 mid-run out of scope."""
        self.out_of_scope += [b for b in self.brand_ids if b in brand_ids]
        self.brands = [b for b in self.brands if str(b["id"]) not in brand_ids]


def _each(client: VisibilityClient, ids: Sequence[str], fetch: Callable[[str], T]) -> dict[str, T | None]:
    """``fetch(brand_id)`` for each brand, concurrently, by brand id: None for a brand that answered 404."""

    def one(brand_id: str) -> T | None:
        try:
            return fetch(brand_id)
        except NotFoundError:
            return None

    return dict(zip(ids, client.map_concurrent(one, ids), strict=True))


def _per_brand(client: VisibilityClient, only: Sequence[str]) -> BrandScope:
    rows = _each(client, only, client.get_brand)
    return BrandScope([r for r in rows.values() if r is not None], [b for b, r in rows.items() if r is None])


def per_brand(client: VisibilityClient, scope: BrandScope, fetch: Callable[[str], T]) -> dict[str, T]:
    """``fetch(brand_id)`` for each brand in scope, concurrently; 404 brands leave the scope."""
    results = _each(client, scope.brand_ids, fetch)
    scope.drop({b for b, r in results.items() if r is None})
    return {b: r for b, r in results.items() if r is not None}


class Discovery:
    """What a sync lists once and every step of it reuses: brands, prompts, topics, tracked
    competitors (each listing costs rate budget and a round trip). A brand that answered 404 once is out of
    scope for the rest of the sync. Thread-safe; each caller gets its own ``BrandScope``."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._scopes: dict[tuple[str, ...], BrandScope] = {}
        #: a brand listing that failed in a way every later one would repeat (a refused key)
        self._refused: dict[tuple[str, ...], Exception] = {}
        self._listings: dict[str, dict[str, list[Row] | None]] = {}

    def scope(self, client: VisibilityClient, only: Sequence[str] = ()) -> BrandScope:
        """Every brand the key reaches (one listing), or the ``only`` brands fetched one by one."""
        key = tuple(only)
        with self._lock:
            if key in self._refused:  # asked again, it would be refused again: no second request
                raise self._refused[key]
            if key not in self._scopes:
                try:
                    self._scopes[key] = (
                        _per_brand(client, only) if only else BrandScope(list(client.list_brands()))
                    )
                except Exception as exc:
                    if failure_kind(exc).stops_the_sync:
                        self._refused[key] = exc
                    raise
            return self._narrowed(self._scopes[key])

    def _narrowed(self, cached: BrandScope) -> BrandScope:
        """A copy of ``cached`` without the brands a listing of this sync found gone (404)."""
        scope = BrandScope(brands=list(cached.brands), out_of_scope=list(cached.out_of_scope))
        scope.drop({b for listing in self._listings.values() for b, rows in listing.items() if rows is None})
        return scope

    def listing(
        self, name: str, client: VisibilityClient, scope: BrandScope, fetch: Callable[[str], list[Row]]
    ) -> dict[str, list[Row]]:
        """``fetch(brand_id)`` per brand in scope, once per sync and listing; 404s leave the scope."""
        with self._lock:
            known = self._listings.setdefault(name, {})
            missing = [b for b in scope.brand_ids if b not in known]
            if missing:
                known.update(_each(client, missing, fetch))
            rows = {b: known[b] for b in scope.brand_ids}
        scope.drop({b for b, r in rows.items() if r is None})
        return {b: r for b, r in rows.items() if r is not None}

    def listed(self, only: Sequence[str] = ()) -> tuple[BrandScope | None, dict[str, dict[str, list[Row]]]]:
        """What this sync has listed so far, without a request: the brand scope (None: not yet
        listed) and each listing that covers every brand in it (brand id -> rows)."""
        with self._lock:
            cached = self._scopes.get(tuple(only))
            if cached is None:
                return None, {}
            scope = self._narrowed(cached)
            complete = {
                name: {b: list(listing[b] or ()) for b in scope.brand_ids}
                for name, listing in self._listings.items()
                if all(b in listing for b in scope.brand_ids)
            }
        return scope, complete

    def prompts(self, client: VisibilityClient, scope: BrandScope) -> dict[str, list[Row]]:
        return self.listing("prompts", client, scope, lambda b: list(client.list_prompts(b)))

    def topics(self, client: VisibilityClient, scope: BrandScope) -> dict[str, list[Row]]:
        return self.listing("topics", client, scope, lambda b: list(client.list_topics(b)))

    def competitors(self, client: VisibilityClient, scope: BrandScope) -> dict[str, list[Row]]:
        return self.listing(
            "tracked_competitors", client, scope, lambda b: list(client.list_tracked_competitors(b))
        )


def brand_inputs(
    client: VisibilityClient,
    scope: BrandScope,
    discovery: Discovery,
    *,
    prompts: bool = False,
    competitors: bool = False,
    targets: CitationTargets | None = None,
) -> list[BrandInput]:
    """The planner's view of each brand, reading prompts, tracked competitors and topics when needed.

    ``targets``: pages every brand trends, and topics (ids or names) each brand trends its own
    domain within; a brand trends the topics it has (listed once per sync), and skips the others.
    """
    targets = targets or CitationTargets()
    topic_ids: dict[str, tuple[str, ...]] = {}
    if targets.topics:
        topic_ids = {
            b: matching_topics(rows, targets.topics) for b, rows in discovery.topics(client, scope).items()
        }
    prompt_ids: dict[str, tuple[str, ...]] = {}
    domains: dict[str, tuple[str, ...]] = {}
    if prompts:
        prompt_ids = {
            b: tuple(str(p["id"]) for p in rows) for b, rows in discovery.prompts(client, scope).items()
        }
    if competitors:
        domains = {
            b: tuple(d for c in rows for d in (c.get("domains") or ()))
            for b, rows in discovery.competitors(client, scope).items()
        }
    return [
        BrandInput(
            brand_id=str(brand["id"]),
            engines=frozenset(brand.get("engines") or ()),
            domain=brand.get("domain"),
            prompt_ids=prompt_ids.get(str(brand["id"]), ()),
            competitor_domains=domains.get(str(brand["id"]), ()),
            citation_urls=targets.urls,
            citation_topic_ids=topic_ids.get(str(brand["id"]), ()),
        )
        for brand in scope.brands
    ]


@dataclass(frozen=True)
class CitationTargets:
    """Citation trends to sync beyond the own and competitor domains (``VISIBILITY_CITATION_*``)."""

    urls: tuple[str, ...] = ()
    #: topic ids or names (names case-insensitive)
    topics: tuple[str, ...] = ()


def matching_topics(rows: Sequence[Row], wanted: Sequence[str]) -> tuple[str, ...]:
    """Ids of a brand's topics named by id or (case-insensitively) by name in ``wanted``."""
    keys = {w.strip().lower() for w in wanted}
    return tuple(
        str(r["id"])
        for r in rows
        if str(r.get("id", "")).lower() in keys or str(r.get("name") or "").lower() in keys
    )
