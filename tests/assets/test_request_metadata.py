"""What a sync's materialization metadata reports about its requests: retries and capped answers.

Real Dagster runs against the sandbox on loopback into real DuckDB files. The figures are checked
against what the sandbox actually served (its request stats) or would answer to the same question,
so a count that stays at 0, or a key that disappears, fails here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path

from dagster import DagsterInstance

from assets.builders import daily_assets, snapshot_assets
from bench.proxy import ProxyRequest, Rewrite, run_proxy
from resources.api.client import VisibilityClient
from resources.api.endpoints import ALL, ENGINES_WITH_ALL
from sandbox.faults import FaultsConfig
from sandbox.testing import SandboxHandle
from tests.assets.conftest import Sync, metadata
from tests.sync.conftest import D, workspace_inputs

SYNCED_TABLES = [key.path[-1] for asset in (*snapshot_assets, *daily_assets) for key in asset.keys]
CITATION_URLS_PATH = "/citations/urls"
#: Only server errors (500/502/503), on one request in five; a 503's Retry-After is at most 1 s.
SERVER_ERRORS = {"server_error": 0.2, "retry_after_max_s": 1}


def server_errors_served(sandbox: SandboxHandle) -> int:
    """5xx answers the sandbox gave since it started (its stats by endpoint and status)."""
    by_endpoint = sandbox.stats().values()
    return sum(n for by_status in by_endpoint for status, n in by_status.items() if int(status) >= 500)


def test_a_sync_that_meets_server_errors_reports_each_retry_in_its_metadata(
    sandbox_factory: Callable[..., SandboxHandle], tmp_path: Path, instance: DagsterInstance
) -> None:
    flaky = sandbox_factory(faults=FaultsConfig(seed=1, overrides=SERVER_ERRORS))
    sync = Sync(flaky, tmp_path / "wh.duckdb", instance)

    result = sync.run([*snapshot_assets, *daily_assets], D, D, ("chatgpt",))

    faulted = server_errors_served(flaky)
    assert faulted > 0, "the seed should fault some of the sync's requests"
    reported = {table: metadata(result, table) for table in SYNCED_TABLES}
    # every 5xx was retried once more, and each retry is counted by the table whose request it was
    assert sum(meta["retries"] for meta in reported.values()) == faulted
    assert reported["prompt_mentions"]["retries"] > 0  # the table with most requests met some
    for meta in reported.values():
        assert set(meta["retries_by_cause"]) <= {"server_error"}
        assert sum(meta["retries_by_cause"].values()) == meta["retries"]


def test_a_sync_without_faults_or_truncation_reports_no_retries_and_no_capped_answers(
    sync: Sync, sandbox: SandboxHandle
) -> None:
    result = sync.run([*snapshot_assets, *daily_assets], D, D, ("chatgpt", "claude"))

    for table in SYNCED_TABLES:
        meta = metadata(result, table)
        assert meta["retries"] == 0 and meta["retries_by_cause"] == {}, table
    assert metadata(result, "cited_pages")["capped_responses"] == 0
    assert metadata(result, "generations")["capped_responses"] == 0


class TopN(Rewrite):
    """A service whose citation top-N is ``n``: the limit the client asks is lowered to ``n``, so the
    sandbox itself truncates the ranking and says so (``capped``, ``total_count``)."""

    name = "top_n"

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, request: ProxyRequest) -> ProxyRequest:
        if not request.path.endswith(CITATION_URLS_PATH):
            return request
        self.record(target=request.target)
        query = [(k, str(self.n) if k == "limit" else v) for k, v in request.query]
        return dataclasses.replace(request, query=query)


def pages_cited_per_cell(sandbox: SandboxHandle) -> dict[tuple[str, str], int]:
    """Pages cited on day ``D`` by brand and engine (``all`` the rollup), from the sandbox directly."""
    totals: dict[tuple[str, str], int] = {}
    end = D + dt.timedelta(days=1)
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        for brand in workspace_inputs(sandbox):
            for engine in (*sorted(brand.engines), ALL):
                asked = None if engine == ALL else engine
                pages = client.citation_urls(brand.brand_id, engine=asked, start=D, end=end)
                assert not pages.capped  # the client's own limit truncates nothing in this world
                totals[brand.brand_id, engine] = pages.total_count
    return totals


def test_capped_responses_counts_the_citation_rankings_the_service_truncated(
    sync: Sync, sandbox: SandboxHandle
) -> None:
    totals = pages_cited_per_cell(sandbox)
    top_n = sorted(totals.values())[len(totals) // 2]  # about half of the cells rank more pages
    truncated = {cell for cell, total in totals.items() if total > top_n}
    assert 0 < len(truncated) < len(totals)

    with run_proxy(sandbox.url, TopN(top_n)) as proxy:
        behind_proxy = Sync(dataclasses.replace(sandbox, url=proxy.url), sync.db, sync.instance)
        result = behind_proxy.run(["cited_pages"], D, D, ENGINES_WITH_ALL)
        assert proxy.rewrite.applied == len(totals)  # one ranking asked per cell, none retried

    assert metadata(result, "cited_pages")["capped_responses"] == len(truncated)
    landed = sync.query("SELECT brand_id, engine, COUNT(*) FROM cited_pages WHERE capped GROUP BY ALL")
    assert {(brand, engine): rows for brand, engine, rows in landed} == dict.fromkeys(truncated, top_n)
