"""``visibility-sync run`` split into several Dagster runs: what it reports, and what it leaves in /tmp."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dagster import JobDefinition

from pipelines.cli import sync
from resources.api.endpoints import engine_groups
from settings import Settings, load_settings
from sync.spool import SPOOL_PREFIX
from tests.pipelines.test_cli import env  # noqa: F401  (the fixture)

START, END = dt.date(2026, 10, 30), dt.date(2026, 10, 31)
#: claude sits between them in the partition order: two runs per partitioned group
SPLIT_ENGINES = ("chatgpt", "perplexity")


def test_rows_landed_add_up_over_the_runs_of_a_split_sync(env: Path) -> None:  # noqa: F811
    from resources.api.endpoints import ENGINES

    assert len(engine_groups(SPLIT_ENGINES, ENGINES)) == 2
    summary = sync(load_settings(), START, END, SPLIT_ENGINES, show_progress=False)

    assert not summary.failures
    with duckdb.connect(str(env), read_only=True) as con:
        for table in ("prompt_mentions", "answers"):
            per_engine = dict(
                con.execute(f"SELECT engine, COUNT(*) FROM visibility.{table} GROUP BY ALL").fetchall()
            )
            assert set(per_engine) == set(SPLIT_ENGINES) and min(per_engine.values()) > 0
            assert summary.rows[table] == sum(per_engine.values())


def test_a_failed_sync_leaves_no_spool_behind(env: Path, private_tmp: Path) -> None:  # noqa: F811
    with duckdb.connect(str(env)) as con:  # an incompatible column: landing prompt_mentions fails
        con.execute("CREATE SCHEMA visibility")
        con.execute("CREATE TABLE visibility.prompt_mentions (id BOOLEAN PRIMARY KEY)")

    summary = sync(load_settings(), START, END, ("chatgpt",), show_progress=False)

    assert any("prompt_mentions" in message for _, message, _ in summary.failures)
    assert summary.rows.get("answers", 0) > 0  # the other assets landed, and removed their spools
    assert sorted(private_tmp.glob(f"{SPOOL_PREFIX}*")) == []


def test_the_runs_of_one_sync_share_one_request_budget(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Every client of both runs of a split sync paces on the budget of the one ``api`` object the
    command built: one outage clock, cancel switch and request allowance for the whole sync."""
    from pipelines import resources
    from resources.api.resource import VisibilityAPIResource

    made: list[VisibilityAPIResource] = []
    budgets: list[object] = []
    build, get_client = resources.api_resource, VisibilityAPIResource.get_client

    def api_resource(settings: Settings) -> VisibilityAPIResource:
        made.append(build(settings))
        return made[-1]

    def client_seen(self: VisibilityAPIResource, **kwargs: Any) -> Any:
        client = get_client(self, **kwargs)
        budgets.append(client.budget)
        return client

    monkeypatch.setattr(resources, "api_resource", api_resource)
    monkeypatch.setattr(VisibilityAPIResource, "get_client", client_seen)
    started: list[str] = []
    execute = JobDefinition.execute_in_process

    def execute_seen(self: JobDefinition, *args: Any, **kwargs: Any) -> Any:
        started.append(self.name)
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(JobDefinition, "execute_in_process", execute_seen)

    summary = sync(load_settings(), START, END, SPLIT_ENGINES, show_progress=False)

    assert not summary.failures
    assert started == ["visibility_sync", "visibility_daily"]  # two runs
    assert len(made) == 1 and budgets
    budget = made[0].get_budget()
    assert all(seen is budget for seen in budgets)
    assert budget.requests_taken >= sum(summary.requests.values())  # both runs' requests, one allowance


def test_a_sync_with_settings_not_from_the_environment_leaves_the_environment_as_it_was(
    env: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = {
        name: os.environ[name]
        for name in ("VISIBILITY_API_URL", "VISIBILITY_API_KEY", "VISIBILITY_WAREHOUSE")
    }
    for name in values:
        monkeypatch.delenv(name)
    environment = dict(os.environ)

    summary = sync(load_settings(values), START, END, ("chatgpt",), show_progress=False)

    assert not summary.failures and summary.rows.get("answers", 0) > 0
    assert dict(os.environ) == environment  # nothing written, not even for the runs' sake
