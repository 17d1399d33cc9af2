"""Pure request planning: the partitions of a run -> the fewest API calls, widest windows first.

A run is a set of *cells* ``(date, engine)``, not necessarily contiguous or rectangular. A
:class:`Planner`, made by the endpoint's shape (a catalog entry names one), turns it into calls;
engines a brand is not measured on are skipped. Landing writes the :func:`boxes` of the cells.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from resources.api import endpoints as api
from resources.api.endpoints import ALL

Cell = tuple[dt.date, str]


@dataclass(frozen=True, order=True)
class Window:
    """Half-open date window ``[start, end)``, the API's ``from``/``to``."""

    start: dt.date
    end: dt.date

    @property
    def days(self) -> int:
        return (self.end - self.start).days


@dataclass(frozen=True, order=True)
class Box:
    """A rectangle of cells: one write scope (dates ``[start, end)`` x ``engines``)."""

    window: Window
    engines: tuple[str, ...]


@dataclass(frozen=True)
class BrandInput:
    """What the planner needs to know of a brand (read from the API before planning)."""

    brand_id: str
    engines: frozenset[str]
    domain: str | None = None
    prompt_ids: tuple[str, ...] = ()
    #: Domains of the brand's tracked competitors, trended by citation trends.
    competitor_domains: tuple[str, ...] = ()
    #: Pages whose citation trends are synced (``VISIBILITY_CITATION_URLS``).
    citation_urls: tuple[str, ...] = ()
    #: The brand's topics (ids) within which its own domain's citation trend is synced.
    citation_topic_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Call:
    """One API call (its first page). ``engine=None`` means no engine filter."""

    #: the endpoint's key (``METHOD template``, the client's counters' name)
    endpoint: str
    brand_id: str
    window: Window
    engine: str | None = None
    prompt_id: str | None = None
    #: citation trends: the domain trended; None trends the brand's own domain (the API default)
    domain: str | None = None
    #: citation trends: the page trended (instead of a domain)
    url: str | None = None
    #: citation trends: only the answers to the prompts of this topic
    topic_id: str | None = None
    #: competitor trends: ``day`` or ``week`` (the API's ``granularity``); None for other endpoints
    granularity: str | None = None

    @property
    def landed_engine(self) -> str | None:
        """Engine value the rows land under when the response has no per-row engine."""
        return self.engine if self.engine is not None else ALL


@dataclass(frozen=True)
class Plan:
    """The calls of one asset's run, and the boxes its rows are written in."""

    cells: frozenset[Cell]
    calls: tuple[Call, ...]
    boxes: tuple[Box, ...]
    #: brand id -> engines of the run it was skipped on: the brand is not measured there
    skipped: dict[str, list[str]] = field(default_factory=dict)

    @property
    def window(self) -> Window | None:
        """The hull of the run's dates (for metadata)."""
        return hull(d for d, _ in self.cells)


# ---------------------------------------------------------------------------------------------
# geometry of a set of cells


def date_runs(days: Iterable[dt.date]) -> list[Window]:
    """Maximal runs of consecutive dates, sorted."""
    ordered = sorted(set(days))
    runs: list[Window] = []
    for day in ordered:
        if runs and runs[-1].end == day:
            runs[-1] = Window(runs[-1].start, day + dt.timedelta(days=1))
        else:
            runs.append(Window(day, day + dt.timedelta(days=1)))
    return runs


def hull(days: Iterable[dt.date]) -> Window | None:
    ordered = sorted(days)
    return Window(ordered[0], ordered[-1] + dt.timedelta(days=1)) if ordered else None


def boxes(cells: Iterable[Cell], engine_order: Iterable[str] = ()) -> tuple[Box, ...]:
    """Cover the cells exactly with rectangles: dates grouped by their engine set, then runs.

    A rectangular run (the UI's date range x engine range, a daily sync) gives a single box.
    """
    order = {e: i for i, e in enumerate(engine_order)}
    days_by_set: dict[tuple[str, ...], list[dt.date]] = defaultdict(list)
    for day, engines in _engines_by_day(cells).items():
        key = tuple(sorted(engines, key=lambda e: (order.get(e, len(order)), e)))
        days_by_set[key].append(day)
    out = [Box(run, engines) for engines, days in days_by_set.items() for run in date_runs(days)]
    return tuple(sorted(out))


def _engines_by_day(cells: Iterable[Cell]) -> dict[dt.date, set[str]]:
    by_day: dict[dt.date, set[str]] = defaultdict(set)
    for day, engine in cells:
        by_day[day].add(engine)
    return by_day


def _measured(brand: BrandInput, *, with_rollup: bool) -> set[str]:
    """The engines a brand has rows on: its own, and ``all`` for a table with a rollup."""
    return set(brand.engines) | ({ALL} if with_rollup and brand.engines else set())


def _brand_cells(cells: frozenset[Cell], brand: BrandInput, *, with_rollup: bool) -> set[Cell]:
    measured = _measured(brand, with_rollup=with_rollup)
    return {(d, e) for d, e in cells if e in measured}


def _skipped(
    cells: frozenset[Cell], brands: Iterable[BrandInput], *, with_rollup: bool
) -> dict[str, list[str]]:
    requested = {e for _, e in cells}
    if not with_rollup:
        requested.discard(ALL)  # a table without a rollup has nothing there for any brand
    skipped = {b.brand_id: sorted(requested - _measured(b, with_rollup=with_rollup)) for b in brands}
    return {brand_id: engines for brand_id, engines in skipped.items() if engines}


# ---------------------------------------------------------------------------------------------
# per-endpoint planners


def _paged_calls(
    endpoint: str, brand: BrandInput, cells: frozenset[Cell], prompt_id: str | None
) -> list[Call]:
    """Unfiltered calls on days covering all the brand's engines, per-engine calls elsewhere."""
    mine = _brand_cells(cells, brand, with_rollup=False)
    by_day = _engines_by_day(mine)
    full_days = [d for d, engines in by_day.items() if brand.engines and engines >= brand.engines]
    calls = [
        Call(endpoint, brand.brand_id, run, engine=None, prompt_id=prompt_id) for run in date_runs(full_days)
    ]
    full = set(full_days)
    for engine in sorted(brand.engines):
        days = [d for d, engines in by_day.items() if d not in full and engine in engines]
        calls.extend(
            Call(endpoint, brand.brand_id, run, engine=engine, prompt_id=prompt_id) for run in date_runs(days)
        )
    return calls


@dataclass(frozen=True)
class Planner:
    """``planner(cells, brands, engine_order) -> Plan``: a catalog entry's planner, made for its
    endpoint by a shape below."""

    #: ``(cells, brands) -> calls``: what it asks for the brands' cells
    plan_calls: Callable[[frozenset[Cell], list[BrandInput]], list[Call]]
    with_rollup: bool

    def __call__(
        self, cells: Iterable[Cell], brands: Iterable[BrandInput], engine_order: Iterable[str] = ()
    ) -> Plan:
        frozen, brand_list = frozenset(cells), list(brands)
        return Plan(
            cells=frozen,
            calls=tuple(self.plan_calls(frozen, brand_list)),
            boxes=boxes(frozen, engine_order),
            skipped=_skipped(frozen, brand_list, with_rollup=self.with_rollup),
        )


def paged_per_brand(endpoint: api.Endpoint) -> Planner:
    """A paged row endpoint per brand (``/v1/brands/{id}/...`` with ``engine``, ``from``, ``to``):
    widest date runs, engine filter only where the run is partial. No rollup."""

    def plan_calls(cells: frozenset[Cell], brands: list[BrandInput]) -> list[Call]:
        return [c for b in brands for c in _paged_calls(endpoint.key, b, cells, None)]

    return Planner(plan_calls, with_rollup=False)


def paged_per_prompt(endpoint: api.Endpoint) -> Planner:
    """A paged row endpoint per prompt (``/v1/prompts/{id}/...``): as :func:`paged_per_brand`, once per
    prompt of each brand (the entry sets ``needs_prompts``). No rollup."""

    def plan_calls(cells: frozenset[Cell], brands: list[BrandInput]) -> list[Call]:
        return [
            call
            for brand in brands
            for prompt_id in brand.prompt_ids
            for call in _paged_calls(endpoint.key, brand, cells, prompt_id)
        ]

    return Planner(plan_calls, with_rollup=False)


@dataclass(frozen=True)
class CitationTarget:
    """What one citation trend call trends: a domain (None: the brand's own), or a page, within one
    topic's prompts or all of them."""

    domain: str | None = None
    url: str | None = None
    topic_id: str | None = None


def _hull_calls_per_engine(
    endpoint: str, brand: BrandInput, cells: frozenset[Cell], target: CitationTarget | None = None
) -> list[Call]:
    mine = _brand_cells(cells, brand, with_rollup=True)
    days_by_engine: dict[str, list[dt.date]] = defaultdict(list)
    for day, engine in mine:
        days_by_engine[engine].append(day)
    calls: list[Call] = []
    for engine in sorted(days_by_engine):
        window = hull(days_by_engine[engine])
        assert window is not None
        calls.append(
            Call(
                endpoint,
                brand.brand_id,
                window,
                engine=None if engine == ALL else engine,
                **dataclasses.asdict(target or CitationTarget()),
            )
        )
    return calls


#: Weekday of the last day of an ISO week (Sunday): the partition that owns a week of competitor trends.
WEEK_OWNER_WEEKDAY = 6


def week_start(day: dt.date) -> dt.date:
    """The Monday of ``day``'s ISO week: the API's bucket start at ``granularity=week``."""
    return day - dt.timedelta(days=day.weekday())


def _week_calls(endpoint: str, brand: BrandInput, cells: frozenset[Cell]) -> list[Call]:
    """Per engine with a Sunday in the run: the whole ISO weeks from the first to the last Sunday."""
    sundays: dict[str, list[dt.date]] = defaultdict(list)
    for day, engine in _brand_cells(cells, brand, with_rollup=True):
        if day.weekday() == WEEK_OWNER_WEEKDAY:
            sundays[engine].append(day)
    return [
        Call(
            endpoint,
            brand.brand_id,
            Window(week_start(min(days)), max(days) + dt.timedelta(days=1)),
            engine=None if engine == ALL else engine,
            granularity="week",
        )
        for engine, days in sorted(sundays.items())
    ]


def citation_targets(brand: BrandInput) -> list[CitationTarget]:
    """The own domain, each distinct competitor domain, each tracked page, the own domain per topic."""
    own = (brand.domain or "").lower()
    seen: set[str] = set()
    targets = [CitationTarget()]
    for domain in brand.competitor_domains:
        key = domain.lower()
        if key and key != own and key not in seen:
            seen.add(key)
            targets.append(CitationTarget(domain=domain))
    targets += [CitationTarget(url=url) for url in dict.fromkeys(brand.citation_urls)]
    targets += [CitationTarget(topic_id=topic) for topic in dict.fromkeys(brand.citation_topic_ids)]
    return targets


def hull_per_engine(
    endpoint: api.Endpoint,
    *,
    targets: Callable[[BrandInput], list[CitationTarget]] | None = None,
    weeks: bool = False,
) -> Planner:
    """A one-response series endpoint with an all-engine rollup (``all``: engine omitted): one call per
    brand and engine over the hull of the engine's dates (days outside the run are dropped).

    ``targets``: one such call per target of the brand (citation trends). ``weeks``: the hull calls
    ask ``granularity=day``, plus one ``granularity=week`` call per brand and engine whose dates
    include a Sunday, over the whole ISO weeks of those Sundays (competitor trends)."""

    def plan_calls(cells: frozenset[Cell], brands: list[BrandInput]) -> list[Call]:
        calls = [
            c
            for b in brands
            for target in (targets(b) if targets else [None])
            for c in _hull_calls_per_engine(endpoint.key, b, cells, target)
        ]
        if weeks:
            calls = [dataclasses.replace(c, granularity="day") for c in calls]
            calls += [c for b in brands for c in _week_calls(endpoint.key, b, cells)]
        return calls

    return Planner(plan_calls, with_rollup=True)


def per_day(endpoint: api.Endpoint) -> Planner:
    """An endpoint aggregated over its request window, with an all-engine rollup: one call per brand,
    engine (``all``: engine omitted) and day."""

    def plan_calls(cells: frozenset[Cell], brands: list[BrandInput]) -> list[Call]:
        return [
            Call(
                endpoint.key,
                b.brand_id,
                Window(day, day + dt.timedelta(days=1)),
                engine=None if engine == ALL else engine,
            )
            for b in brands
            for day, engine in sorted(_brand_cells(cells, b, with_rollup=True))
        ]

    return Planner(plan_calls, with_rollup=True)


# ---------------------------------------------------------------------------------------------
# accounting


def expected_requests(plan: Plan) -> dict[str, int]:
    """Calls per endpoint template: the exact count for unpaged endpoints, the minimum for paged ones."""
    return dict(Counter(call.endpoint for call in plan.calls))
