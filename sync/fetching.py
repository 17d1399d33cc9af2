"""What the sync knows about fetching a table, whoever runs it (Dagster-free).

A date x engine table is a :class:`PartitionedTable`: a planner that turns the cells to land into
the fewest API calls, and the fetch of one call; :func:`fetch_partitioned` discovers the brands,
plans, and spools the rows to disk. A snapshot table is a :class:`SnapshotTable`: one listing of
the whole set. :mod:`sync.catalog` lists every table; ``assets/`` turns them into Dagster assets.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from resources.api.client import VisibilityClient
from resources.api.endpoints import ENGINES_WITH_ALL, Endpoint
from resources.warehouse.contract import TableSpec
from sync.allocator import return_freed_memory
from sync.discovery import BrandScope, CitationTargets, Discovery, brand_inputs
from sync.landing import DEFAULT_DAYS_PER_WRITE, FetchOne, FetchOutcome, brand_engines, fetch_to_spool
from sync.planning import Cell, Planner
from sync.prefetch import StopSignal
from sync.resume import ResumePoint, ResumeStore, call_key, remaining_calls, selection_id
from sync.spool import DateSpool


@dataclass(frozen=True)
class PartitionedTable:
    """How one date x engine table is fetched: its planner (which calls), and one call's fetch."""

    spec: TableSpec
    #: the API endpoints its calls go to (the planner plans calls to these only)
    endpoints: tuple[Endpoint, ...]
    planner: Planner
    fetch_one: FetchOne
    #: whether the all-engine rollup (``all``) is fetched for this table, or its cells stay empty
    with_rollup: bool
    engine_order: tuple[str, ...] = ENGINES_WITH_ALL
    needs_prompts: bool = False
    needs_competitors: bool = False
    #: upstream asset, for lineage only (its rows are read from the API, not from the warehouse)
    upstream: str | None = None
    description: str = ""
    #: metadata from the fetched rows beyond the counts (e.g. capped responses)
    notes: Callable[[DateSpool], dict[str, Any]] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    #: citation trends: plans a call per tracked page and topic (the run's ``CitationTargets``)
    needs_targets: bool = False
    #: checks of the table beyond those every table gets from its spec (``keys_unique``), by name
    #: (``assets/checks.py``, ``DECLARED_CHECKS``)
    checks: tuple[str, ...] = ()
    #: with ``no_empty_partitions``: which landed table says a cell had data, by the name of its rule
    #: (``resources/warehouse/queries.py``, ``EXPECTED_CELLS``)
    evidence: str | None = None


def fetch_partitioned(
    client: VisibilityClient,
    asset: PartitionedTable,
    cells: set[Cell],
    only: Sequence[str],
    on_progress: Callable[[int, int], None] | None = None,
    stop: StopSignal | None = None,
    discovery: Discovery | None = None,
    targets: CitationTargets | None = None,
    *,
    resume: ResumeStore | None = None,
) -> FetchOutcome:
    """Discover the brands, plan the run, and spool its rows (no Dagster: reusable in benchmarks).

    ``targets``: the run's tracked pages and topics (``VISIBILITY_CITATION_*`` or the run's config),
    used by a table that ``needs_targets``. ``resume``: where the fetch journals its completed calls,
    and finds those of an earlier, killed or failed, fetch of the same selection (:mod:`sync.resume`):
    only the other calls are asked."""
    started = time.monotonic()
    return_freed_memory()
    listings = discovery or Discovery()
    scope: BrandScope = listings.scope(client, only)
    run_targets = targets if asset.needs_targets else None
    inputs = brand_inputs(
        client,
        scope,
        prompts=asset.needs_prompts,
        competitors=asset.needs_competitors,
        discovery=listings,
        targets=run_targets,
    )
    plan = asset.planner(cells, inputs, asset.engine_order)
    assert asset.spec.date_column is not None
    spool = DateSpool.create(asset.spec.date_column, DEFAULT_DAYS_PER_WRITE, name=asset.spec.name)
    prompts_not_found: set[str] = set()
    resumed: dict[str, int] = {}
    journal = None
    journal_failed: str | None = None
    points: dict[str, ResumePoint] = {}
    try:
        to_ask = plan
        if resume is not None:
            selection = selection_id(
                asset.spec, cells, only, run_targets, client.base_url, client.key_fingerprint
            )
            journal = resume.journal(selection)
        if journal is not None:
            done, tables, points = journal.load({call_key(c) for c in plan.calls})
            for part in tables:  # the journal's files become the spool's, unless of other buckets
                if part.bucket is not None and part.days == spool.days_per_bucket and part.path is not None:
                    spool.adopt(part.bucket, part.path, part.num_rows)
                else:
                    spool.append(part.read())
            to_ask = dataclasses.replace(plan, calls=remaining_calls(plan.calls, done))
            resumed = {
                "calls": len(plan.calls) - len(to_ask.calls),
                "calls_partly": len(points),
                "rows": sum(t.num_rows for t in tables),
            }
            if journal.dropped:
                resumed["entries_dropped"] = journal.dropped
        client.budget.allow_planned_calls(len(to_ask.calls), asset.spec.name)
        not_found = fetch_to_spool(
            client,
            asset.spec,
            to_ask,
            asset.fetch_one,
            spool,
            on_progress,
            prompts_not_found,
            stop,
            journal,
            points,
        )
        scope.drop(not_found)
        spool.close()
        if journal is not None and journal.write_error is not None:
            journal_failed = journal.write_error
    except BaseException:
        spool.remove()
        raise
    finally:
        if journal is not None:
            journal.close()  # kept on disk until the step landed every table (ResumeStore.finish)
    outcome = FetchOutcome(
        table=asset.spec.name,
        plan=plan,
        spool=spool,
        brand_engines=brand_engines(scope.brands, with_rollup=asset.with_rollup),
        out_of_scope=list(scope.out_of_scope),
        stats=client.stats,
        fetch_seconds=time.monotonic() - started,
    )
    if asset.notes is not None:
        outcome.notes = asset.notes(spool)
    if prompts_not_found:
        outcome.notes["prompts_not_found"] = sorted(prompts_not_found)
    if resumed.get("calls") or resumed.get("calls_partly"):
        outcome.notes["resumed"] = resumed
    if journal_failed is not None:  # the rows are whole; a re-run after a kill would ask them again
        outcome.notes["resume_journal_failed"] = journal_failed
    return outcome


#: ``(client, scope, notes, run tags, discovery) -> rows``. A per-brand fetch whose listing of a brand
#: was truncated records it in ``notes["capped"]`` ({brand id: {rows, total_count}}): the rows absent
#: from a truncated listing may still exist, so those brands are upserted but never retired.
SnapshotFetch = Callable[
    [VisibilityClient, BrandScope, dict[str, Any], Mapping[str, str], Discovery], pa.Table
]


@dataclass(frozen=True)
class SnapshotTable:
    """How one snapshot table is listed.

    ``per_brand``: rows belong to brands, and rows of the listed brands that vanished are retired.
    Otherwise (``brands``) nothing is retired: a brand absent from the listing may be deleted or
    merely outside a brand-scoped key's reach (the service answers 404 for both), and a key must
    never touch brands it cannot see; ``last_seen_at`` says when a brand was last listed.
    """

    spec: TableSpec
    #: the API endpoints its listing reads (beyond the brand listing every sync makes)
    endpoints: tuple[Endpoint, ...]
    fetch_rows: SnapshotFetch
    per_brand: bool
    upstream: str | None = None
    description: str = ""
    #: checks of the table beyond those every table gets from its spec (``keys_unique``), by name
    #: (``assets/checks.py``, ``DECLARED_CHECKS``)
    checks: tuple[str, ...] = ()
