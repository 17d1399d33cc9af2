"""The catalog is the one list of synced tables: the client and the planners follow it (the jobs:
tests/pipelines/test_catalog_jobs.py)."""

from __future__ import annotations

from resources.api import endpoints
from sandbox.app import create_app
from sandbox.config import SandboxConfig
from sync import catalog


def test_the_catalog_covers_every_synced_table_spec_once() -> None:
    """Every landed table is synced by the catalog, but the audits (landed by their sensor)."""
    synced = [t.spec for t in (*catalog.SNAPSHOTS, *catalog.DAILY)]
    assert len(catalog.BY_NAME) == len(synced)
    landed = {n: s for n, s in catalog.ALL_TABLES.items() if n != "audit_reports"}
    assert {s.name: s for s in synced} == landed


#: Served by the sandbox beyond what the connector reads (sandbox/README.md: brand creation for
#: tests and demos, one generation's detail).
SANDBOX_ONLY = {"POST /v1/brands", "GET /v1/brands/{}/generations/{}"}


def test_the_clients_endpoints_are_the_sandboxs_routes() -> None:
    """Every endpoint the client knows is served by the sandbox, and the sandbox serves no other
    (but its documented extras)."""
    client = {e.key for e in vars(endpoints).values() if isinstance(e, endpoints.Endpoint)}
    app = create_app(SandboxConfig())
    served = {
        f"{method} {route.path}"
        for route in app.routes
        if route.path.startswith("/v1/")
        for method in (route.methods or ())
        if method != "HEAD"
    }
    normalise = {f"{k.split()[0]} {_template(k.split()[1])}" for k in served}
    assert {f"{k.split()[0]} {_template(k.split()[1])}" for k in client} == normalise - SANDBOX_ONLY
    assert normalise >= SANDBOX_ONLY


def _template(path: str) -> str:
    """``/v1/brands/{brand_id}/topics/{topicId}`` -> ``/v1/brands/{}/topics/{}``: names differ, shape not."""
    import re

    return re.sub(r"\{[^}]+\}", "{}", path)


def test_each_daily_table_plans_calls_to_its_own_endpoints_only() -> None:
    """The catalog's endpoints of a table are what its planner plans (one vocabulary, the client's)."""
    import datetime as dt

    from sync.planning import BrandInput

    brand = BrandInput(
        brand_id="b1",
        engines=frozenset({"chatgpt", "claude"}),
        domain="example.com",
        prompt_ids=("p1", "p2"),
        competitor_domains=("rival.example",),
    )
    days = [dt.date(2026, 10, 1) + dt.timedelta(days=n) for n in range(8)]
    cells = {(day, engine) for day in days for engine in ("chatgpt", "claude", "all")}
    for table in catalog.DAILY:
        plan = table.planner(cells, [brand], table.engine_order)
        planned = {str(call.endpoint) for call in plan.calls}
        assert planned, table.spec.name
        assert planned <= {e.key for e in table.endpoints}, table.spec.name
