"""What the report shows, read through :mod:`resources.warehouse.queries` and shaped for
drawing (:mod:`report.render` does no arithmetic on rows). The window ends at the newest landed day,
not today: a warehouse synced last week still shows a full window.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from report import DEFAULT_DAYS
from resources.api.endpoints import ENGINES
from resources.warehouse import queries
from resources.warehouse.base import Warehouse

TOP_PAGES = 5
#: A workspace with more brands gets the first ones by name; the report says how many it left out.
MAX_BRANDS = 12
#: The tables ``visibility-sync run`` lands that the report reads.
REQUIRED_TABLES = ("brands", "tracked_competitors", "competitor_trends", "cited_pages")
RUN_FIRST = "run `visibility-sync run` first"

Row = TypeVar("Row", queries.SharePoint, queries.EngineVisibility, queries.PageDay)


class ReportDataMissing(Exception):
    """The warehouse lacks the tables or rows the report reads (nothing synced there yet)."""


@dataclass(frozen=True)
class ShareSeries:
    """One entity's daily share of voice (0-100) over the window; days it has no point are absent."""

    entity: str
    is_own_brand: bool
    dates: tuple[dt.date, ...]
    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return sum(self.values) / len(self.values) if self.values else 0.0


@dataclass(frozen=True)
class EngineGrid:
    """Visibility score (0-100) per entity (rows, own brand first) and engine (columns); None: no data."""

    entities: tuple[str, ...]
    engines: tuple[str, ...]
    scores: tuple[tuple[float | None, ...], ...]


@dataclass(frozen=True)
class PageTrend:
    """A most-cited page: its citations over the window and over its earlier and later halves."""

    url: str
    owner: str | None  # the brand or competitor whose domain the page is on; None: a third party
    citations: int
    earlier: int
    later: int

    @property
    def change_pct(self) -> float | None:
        """Later half over the earlier half, in percent; None when the earlier half had none."""
        return None if self.earlier == 0 else 100.0 * (self.later - self.earlier) / self.earlier


@dataclass(frozen=True)
class BrandSection:
    brand_id: str
    name: str
    domain: str | None
    share_of_voice: tuple[ShareSeries, ...]  # own brand first, then competitors by mean share
    visibility: EngineGrid
    top_pages: tuple[PageTrend, ...]
    #: days the brand has share-of-voice points: the others are marked, and left out of the pages' change
    measured_days: tuple[dt.date, ...] = ()

    @property
    def compared_days(self) -> int:
        """Measured days in each half of the pages' change (the middle one left out when odd)."""
        return len(self.measured_days) // 2


@dataclass(frozen=True)
class ReportData:
    start: dt.date
    end: dt.date  # exclusive
    sections: tuple[BrandSection, ...]
    brands_left_out: int = 0
    generated_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    @property
    def last_day(self) -> dt.date:
        return self.end - dt.timedelta(days=1)


def load_report_data(warehouse: Warehouse, *, days: int = DEFAULT_DAYS) -> ReportData:
    """The last ``days`` days up to the newest landed one (fewer if fewer landed), for every current
    brand with data in them (1 to ``MAX_DAYS``: the CLI and the asset's config check it);
    :class:`ReportDataMissing` when nothing has landed yet."""
    missing = [t for t in REQUIRED_TABLES if not queries.table_exists(warehouse, t)]
    if missing:
        raise ReportDataMissing(f"the warehouse has no {', '.join(missing)} table yet: {RUN_FIRST}")
    newest = queries.newest_trend_date(warehouse)
    if newest is None:
        raise ReportDataMissing(f"no daily competitor_trends rows have landed yet: {RUN_FIRST}")
    end = newest + dt.timedelta(days=1)
    start = end - dt.timedelta(days=days)
    points = queries.share_of_voice_points(warehouse, start, end)
    # a warehouse synced for fewer days than asked: the window is the days that landed, so the charts
    # are not mostly empty and the page change compares halves of real data
    start = max(start, min((p.date for p in points), default=start))

    shares = _by_brand(points)
    scores = _by_brand(queries.visibility_by_engine(warehouse, start, end))
    pages = _by_brand(queries.top_cited_page_days(warehouse, start, end, per_brand=TOP_PAGES))
    brands = queries.current_brands(warehouse)
    domains = _entity_domains(brands, queries.current_competitors(warehouse))

    sections: list[BrandSection] = []
    for brand in brands:
        if brand.id not in shares and brand.id not in scores and brand.id not in pages:
            continue  # nothing landed for it in the window
        series = _share_series(shares.get(brand.id, []))
        measured = tuple(sorted({p.date for p in shares.get(brand.id, [])}))
        half = len(measured) // 2  # like with like: as many measured days on each side
        sections.append(
            BrandSection(
                brand_id=brand.id,
                name=brand.name,
                domain=brand.domain,
                share_of_voice=series,
                visibility=_engine_grid(scores.get(brand.id, []), [s.entity for s in series]),
                top_pages=_page_trends(
                    pages.get(brand.id, []),
                    domains.get(brand.id, {}),
                    set(measured[:half]),
                    set(measured[len(measured) - half :]),
                ),
                measured_days=measured,
            )
        )
    return ReportData(
        start=start,
        end=end,
        sections=tuple(sections[:MAX_BRANDS]),
        brands_left_out=max(0, len(sections) - MAX_BRANDS),
    )


def _by_brand(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        grouped[row.brand_id].append(row)
    return grouped


def _share_series(points: list[queries.SharePoint]) -> tuple[ShareSeries, ...]:
    by_entity: dict[tuple[str, bool], list[queries.SharePoint]] = defaultdict(list)
    for p in points:
        by_entity[(p.entity, p.is_own_brand)].append(p)
    series = [
        ShareSeries(
            entity=entity,
            is_own_brand=own,
            dates=tuple(p.date for p in rows),
            values=tuple(p.share_of_voice for p in rows),
        )
        for (entity, own), rows in by_entity.items()
    ]
    return tuple(sorted(series, key=lambda s: (not s.is_own_brand, -s.mean, s.entity)))


def _engine_grid(rows: list[queries.EngineVisibility], order: list[str]) -> EngineGrid:
    """Rows in the share-of-voice chart's order (``order``), then any entity it lacks by name."""
    own = sorted({r.entity for r in rows if r.is_own_brand} - set(order))
    others = sorted({r.entity for r in rows if not r.is_own_brand} - set(order))
    present = {r.entity for r in rows}
    measured = {r.engine for r in rows}
    engines = tuple(e for e in ENGINES if e in measured) + tuple(sorted(measured - set(ENGINES)))
    value = {(r.entity, r.engine): r.visibility for r in rows}
    entities = (*(e for e in order if e in present), *own, *others)
    return EngineGrid(
        entities=entities,
        engines=engines,
        scores=tuple(tuple(value.get((entity, engine)) for engine in engines) for entity in entities),
    )


def _entity_domains(
    brands: list[queries.BrandRow], competitors: list[queries.CompetitorRow]
) -> dict[str, dict[str, str]]:
    """Per brand id: lower-cased domain -> the entity (the brand or a tracked competitor) it belongs to."""
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for c in competitors:
        for d in c.domains:
            out[c.brand_id][d.lower()] = c.name
    for b in brands:
        if b.domain:
            out[b.id][b.domain.lower()] = b.name
    return out


def _owner(root_domain: str | None, domains: dict[str, str]) -> str | None:
    host = (root_domain or "").lower()
    for domain, entity in domains.items():
        if host == domain or host.endswith("." + domain):
            return entity
    return None


def _page_trends(
    days: list[queries.PageDay], domains: dict[str, str], earlier: set[dt.date], later: set[dt.date]
) -> tuple[PageTrend, ...]:
    """The pages with their citations over the window, and over the earlier and the later half of
    the brand's measured days (equal numbers of days, so a gap in the data is no fall)."""
    by_url: dict[str, list[queries.PageDay]] = defaultdict(list)
    for d in days:
        by_url[d.url].append(d)
    ranked = sorted(by_url.values(), key=lambda rows: rows[0].page_rank)
    return tuple(
        PageTrend(
            url=rows[0].url,
            owner=_owner(rows[0].root_domain, domains),
            citations=sum(r.citations for r in rows),
            earlier=sum(r.citations for r in rows if r.date in earlier),
            later=sum(r.citations for r in rows if r.date in later),
        )
        for rows in ranked
    )
