"""The generated world has every kind of record the spec describes, and it is generated lazily."""

from __future__ import annotations

import datetime as dt

from sandbox.config import SandboxConfig
from sandbox.world import ENGINES, World, root_domain


def world(**fields: object) -> World:
    return World(SandboxConfig(today=dt.date(2026, 11, 1), **fields))  # type: ignore[arg-type]


def test_workspaces_cover_every_subscription_state_and_plans_with_and_without_api() -> None:
    w = world()
    assert {ws.subscription for ws in w.workspaces.values()} == {"active", "trialing", "past_due"}
    assert {ws.api_access for ws in w.workspaces.values()} == {True, False}


def test_keys_include_workspace_scoped_and_one_revoked_key() -> None:
    keys = list(world().keys.values())
    assert sum(k.revoked for k in keys) == 1
    scoped = [k for k in keys if k.brand_scope is not None]
    assert len(scoped) == 1 and len(scoped[0].brand_scope or ()) == 2


def test_brands_differ_in_engines_and_countries_and_prompts_in_topics() -> None:
    w = world()
    assert len({b.engines for b in w.brands}) > 2 and len({b.country for b in w.brands}) > 2
    assert all(set(b.engines) <= set(ENGINES) for b in w.brands)
    prompts = [p for b in w.brands for p in b.prompts]
    assert any(p.topic_id is None for p in prompts) and any(p.topic_id for p in prompts)


def test_pages_span_own_subdomains_competitors_and_third_parties() -> None:
    brand = world().brands[0]
    owners = {p.owner for p in brand.pages}
    assert 0 in owners and -1 in owners and owners - {0, -1}
    own_hosts = {p.domain for p in brand.pages if p.owner == 0}
    assert len(own_hosts) > 1 and {root_domain(h) for h in own_hosts} == {brand.domain}


def test_root_domain_rolls_up_subdomains_and_second_level_suffixes() -> None:
    assert root_domain("blog.acme.com") == "acme.com"
    assert root_domain("acme.com") == "acme.com"
    assert root_domain("www.shop.acme.co.uk") == "acme.co.uk"


def test_competitors_are_tracked_from_history_at_start_or_only_discovered() -> None:
    brand = world().brands[0]
    assert {m.tracking for m in brand.cast} == {"self", "history", "at_start", "none"}


def test_some_days_have_no_run_and_data_stops_before_today() -> None:
    w = world()
    brand = w.brands[0]
    days = w.days(w.history_start, w.today)
    ran = [d for d in days if w.ran(brand, d)]
    assert 0 < len(days) - len(ran) < len(days) // 4
    assert not w.ran(brand, w.today) and not w.ran(brand, w.history_start - dt.timedelta(days=1))


def test_generations_outnumber_the_default_limit_and_are_newest_first() -> None:
    generations = world().brands[0].generations
    assert len(generations) > 100
    assert [g.created_at for g in generations] == sorted((g.created_at for g in generations), reverse=True)


def test_blocks_are_generated_lazily_and_only_for_measured_engines() -> None:
    w = world(size="large")
    assert w.block.cache_info().currsize == 0
    brand = w.brands[0]
    day = w.today - dt.timedelta(days=2)
    while not w.ran(brand, day):
        day -= dt.timedelta(days=1)
    block = w.get_block(brand, day, "chatgpt", 0)
    assert block is not None and block.position.shape == (300, len(brand.cast))
    assert w.block.cache_info().currsize == 1
    narrow = next(b for b in w.brands if len(b.engines) < len(ENGINES))
    missing = next(e for e in ENGINES if e not in narrow.engines)
    assert w.get_block(narrow, day, missing, 0) is None


def test_large_world_has_well_over_a_million_mentions_in_90_days() -> None:
    w = world(size="large")
    main = [b for b in w.brands if b.workspace_id == w.workspaces["main"].id]
    assert len(main) == 5 and all(len(b.prompts) == 300 for b in main)
    brand = main[0]
    day = w.today - dt.timedelta(days=10)
    sample = [w.get_block(brand, day - dt.timedelta(days=i), "gemini", 0) for i in range(5)]
    per_block = sum(int((b.position > 0).sum()) for b in sample if b is not None) / sum(
        1 for b in sample if b
    )
    run_days = sum(1 for d in w.days(w.today - dt.timedelta(days=90), w.today) if w.ran(brand, d))
    estimate = per_block * run_days * sum(len(b.engines) for b in main)
    assert estimate > 1_500_000


def test_same_seed_same_blocks_and_restatement_changes_values_not_answers() -> None:
    a, b = world(seed=3), world(seed=3)
    brand_a, brand_b = a.brands[0], b.brands[0]
    day = a.today - dt.timedelta(days=1)
    while not a.ran(brand_a, day):
        day -= dt.timedelta(days=1)
    first, second = a.get_block(brand_a, day, "chatgpt", 0), b.get_block(brand_b, day, "chatgpt", 0)
    assert first is not None and second is not None
    assert (first.position == second.position).all() and (first.cited_page == second.cited_page).all()
    restated = a.get_block(brand_a, day, "chatgpt", 1)
    assert restated is not None
    assert (restated.answered == first.answered).all() and (restated.position != first.position).any()
