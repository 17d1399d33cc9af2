"""What a run fetches for: the brands in the key's scope, their engines, prompts and competitors.

Dagster-free: functions of a :class:`VisibilityClient`. A brand that answers 404 (outside a
brand-scoped key, or removed from the workspace during the run) is reported as out of scope, not
raised: the run goes on for the other brands and never touches that brand's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from assets.planning import BrandInput
from resources.api.client import Row, VisibilityClient
from resources.api.errors import NotFoundError

T = TypeVar("T")

#: Run tag that restricts a run to some brands: comma-separated brand ids (empty: every brand).
BRANDS_TAG = "visibility/brands"


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
        for brand_id in self.brand_ids:
            if brand_id in brand_ids:
                self.out_of_scope.append(brand_id)
        self.brands = [b for b in self.brands if str(b["id"]) not in brand_ids]


def _or_not_found(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except NotFoundError:
        return None


def discover_brands(client: VisibilityClient, only: Sequence[str] = ()) -> BrandScope:
    """Every brand the key reaches (one listing), or the ``only`` brands fetched one by one."""
    if not only:
        return BrandScope(brands=list(client.list_brands()))
    scope = BrandScope()
    for brand_id, row in zip(
        only, client.map_concurrent(lambda b: _or_not_found(lambda: client.get_brand(b)), only), strict=True
    ):
        if row is None:
            scope.out_of_scope.append(brand_id)
        else:
            scope.brands.append(row)
    return scope


def per_brand(client: VisibilityClient, scope: BrandScope, fetch: Callable[[str], T]) -> dict[str, T]:
    """``fetch(brand_id)`` for each brand in scope, concurrently; 404 brands leave the scope."""
    ids = scope.brand_ids
    results = list(client.map_concurrent(lambda b: _or_not_found(lambda: fetch(b)), ids))
    gone = {b for b, r in zip(ids, results, strict=True) if r is None}
    scope.drop(gone)
    return {b: r for b, r in zip(ids, results, strict=True) if r is not None}


def brand_inputs(
    client: VisibilityClient, scope: BrandScope, *, prompts: bool = False, competitors: bool = False
) -> list[BrandInput]:
    """The planner's view of each brand, reading prompts and/or tracked competitors when needed."""
    prompt_ids: dict[str, tuple[str, ...]] = {}
    domains: dict[str, tuple[str, ...]] = {}
    if prompts:
        prompt_ids = per_brand(client, scope, lambda b: tuple(str(p["id"]) for p in client.list_prompts(b)))
    if competitors:
        domains = per_brand(
            client,
            scope,
            lambda b: tuple(d for c in client.list_tracked_competitors(b) for d in (c.get("domains") or ())),
        )
    return [
        BrandInput(
            brand_id=str(brand["id"]),
            engines=frozenset(brand.get("engines") or ()),
            domain=brand.get("domain"),
            prompt_ids=prompt_ids.get(str(brand["id"]), ()),
            competitor_domains=domains.get(str(brand["id"]), ()),
        )
        for brand in scope.brands
    ]
