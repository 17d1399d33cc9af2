"""The world is a pure function of the seed: restarts answer identically, other seeds differ."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandbox.testing import SandboxHandle
from tests.sandbox.helpers import client

WINDOW = {"from": "2026-10-20", "to": "2026-11-01"}


def snapshot(sb: SandboxHandle) -> dict[str, Any]:
    """Responses of every read endpoint for the first brand (fields set at start-up time excluded)."""
    brand = sb.world.brands[0]
    out: dict[str, Any] = {}
    with client(sb) as api:
        out["keys"] = sb.keys
        out["brands"] = api.get("/v1/brands").json()
        b = f"/v1/brands/{brand.id}"
        for name, path, params in [
            ("topics", f"{b}/topics", {}),
            ("prompts", f"{b}/prompts", {"limit": 999}),
            ("answers", f"{b}/answers", {**WINDOW, "limit": 100}),
            ("mentions", f"/v1/prompts/{brand.prompts[0].id}/mentions", {**WINDOW, "limit": 999}),
            ("generations", f"{b}/generations", {}),
            ("citation_trends", f"{b}/citations/trends", WINDOW),
            ("citation_urls", f"{b}/citations/urls", {**WINDOW, "limit": 2000}),
            ("trends", f"{b}/competitors/trends", {**WINDOW, "granularity": "week"}),
        ]:
            out[name] = api.get(path, params=params).json()
        tracked = api.get(f"{b}/tracked-competitors").json()["data"]
        out["tracked"] = [
            {k: v for k, v in t.items() if k not in ("tracked_since", "history_from")} for t in tracked
        ]
    return out


def test_two_sandboxes_with_the_same_seed_answer_identically(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    first = snapshot(sandbox_factory(seed=11, backfill_delay_seconds=0))
    second = snapshot(sandbox_factory(seed=11, backfill_delay_seconds=0))
    assert first == second


def test_a_different_seed_gives_a_different_world(sandbox_factory: Callable[..., SandboxHandle]) -> None:
    first = snapshot(sandbox_factory(seed=11, backfill_delay_seconds=0))
    other = snapshot(sandbox_factory(seed=12, backfill_delay_seconds=0))
    for name in ("keys", "brands", "mentions", "trends", "citation_urls"):
        assert first[name] != other[name], name
