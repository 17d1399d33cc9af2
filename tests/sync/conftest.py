"""Helpers of the core's tests: the sandbox over loopback HTTP and real DuckDB files, no Dagster."""

from __future__ import annotations

import datetime as dt

from resources.api.client import VisibilityClient
from sandbox.testing import SandboxHandle
from sync.planning import BrandInput

SCHEMA = "visibility"
D = dt.date(2026, 10, 20)


def workspace_inputs(sandbox: SandboxHandle, *, competitors: bool = False) -> list[BrandInput]:
    """The planner's inputs, read from the API independently of the assets."""
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        out = []
        for brand in client.list_brands():
            domains: tuple[str, ...] = ()
            if competitors:
                domains = tuple(
                    d for c in client.list_tracked_competitors(brand["id"]) for d in c.get("domains") or ()
                )
            out.append(
                BrandInput(
                    brand["id"],
                    frozenset(brand["engines"]),
                    brand["domain"],
                    tuple(p["id"] for p in client.list_prompts(brand["id"])),
                    domains,
                )
            )
        return out


def served(sandbox: SandboxHandle) -> dict[str, int]:
    """Requests the sandbox answered, by endpoint (all statuses)."""
    return {endpoint: sum(by_status.values()) for endpoint, by_status in sandbox.stats().items()}
