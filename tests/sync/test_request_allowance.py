"""The sync's request allowance grows with what its plans ask for: by ``VISIBILITY_REQUEST_BUDGET_FACTOR``
for each planned call of each table (a service that never ends a walk stops there)."""

from __future__ import annotations

from resources.api.access import ApiAccess
from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient
from sandbox.testing import SandboxHandle
from sync.catalog import PROMPT_MENTIONS
from sync.fetching import fetch_partitioned
from tests.sync.conftest import D


def test_the_factor_setting_is_what_each_planned_call_adds() -> None:
    access = ApiAccess(
        api_url="http://127.0.0.1:9", api_key="vsk_allowance0123456789abcdef01", request_budget_floor=100
    )
    budget = access.model_copy(update={"request_budget_factor": 3}).get_budget()
    budget.allow_planned_calls(10, "prompt_mentions")
    assert budget.request_allowance == 100 + 10 * 3


def test_a_table_s_planned_calls_grow_the_allowance_before_they_are_asked(sandbox: SandboxHandle) -> None:
    budget = RequestBudget(8, request_floor=10_000, requests_per_call=7)
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"], budget=budget) as client:
        outcome = fetch_partitioned(client, PROMPT_MENTIONS, {(D, "chatgpt")}, [])
    try:
        assert len(outcome.plan.calls) > 0
        assert budget.request_allowance == 10_000 + 7 * len(outcome.plan.calls)
    finally:
        outcome.spool.remove()
