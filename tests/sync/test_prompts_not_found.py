"""Prompts deleted mid-run: a 404 on one prompt skips that prompt, a brand whose prompts all answer
404 leaves the scope. Real HTTP against the sandbox on loopback, real spools."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow.compute as pc
import pytest

from resources.api.client import VisibilityClient
from resources.api.endpoints import ENGINES
from sandbox.testing import SandboxHandle
from sync import catalog, tables
from sync.fetching import fetch_to_spool
from sync.landing import DEFAULT_DAYS_PER_WRITE
from sync.planning import BrandInput
from sync.spool import DateSpool
from tests.sync.conftest import D, workspace_inputs

#: the shipped table's planner and fetch, as its catalog entry declares them
plan_mentions = catalog.PROMPT_MENTIONS.planner
fetch_mentions = catalog.PROMPT_MENTIONS.fetch_one


@pytest.fixture
def spool(private_tmp: Path) -> Iterator[DateSpool]:
    assert tables.PROMPT_MENTIONS.date_column is not None
    made = DateSpool.create(tables.PROMPT_MENTIONS.date_column, DEFAULT_DAYS_PER_WRITE, name="test")
    yield made
    made.remove()


def _brand_rows(spool: DateSpool, brand_id: str) -> int:
    spool.close()
    return sum(part.num_rows for part in spool.read(lambda t: t.filter(pc.equal(t["brand_id"], brand_id))))


def test_a_404_on_one_prompt_skips_that_prompt_not_its_brand(
    sandbox: SandboxHandle, spool: DateSpool, private_tmp: Path
) -> None:
    inputs = workspace_inputs(sandbox)
    target = inputs[0]
    cells = {(D, e) for e in ENGINES}
    assert tables.PROMPT_MENTIONS.date_column is not None
    baseline = DateSpool.create(tables.PROMPT_MENTIONS.date_column, DEFAULT_DAYS_PER_WRITE, name="baseline")
    deleted = str(uuid.uuid4())
    with_deleted = [replace(target, prompt_ids=(*target.prompt_ids, deleted)), *inputs[1:]]
    plan = plan_mentions(cells, with_deleted, ENGINES)
    assert any(c.prompt_id == deleted for c in plan.calls)
    skipped: set[str] = set()

    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        fetch_to_spool(
            client, tables.PROMPT_MENTIONS, plan_mentions(cells, inputs, ENGINES), fetch_mentions, baseline
        )
        not_found = fetch_to_spool(
            client, tables.PROMPT_MENTIONS, plan, fetch_mentions, spool, prompts_not_found=skipped
        )

    assert not_found == set()
    assert skipped == {deleted}
    expected = _brand_rows(baseline, target.brand_id)
    baseline.remove()
    assert expected > 0
    assert _brand_rows(spool, target.brand_id) == expected


def test_prompt_404s_of_a_brand_that_is_gone_drop_the_brand(sandbox: SandboxHandle, spool: DateSpool) -> None:
    """A removed brand's prompts all answer 404: the brand leaves the scope, its cells are not emptied."""
    inputs = workspace_inputs(sandbox)
    gone = BrandInput(str(uuid.uuid4()), frozenset(ENGINES), None, (str(uuid.uuid4()),))
    plan = plan_mentions({(D, "chatgpt")}, [*inputs, gone], ENGINES)
    skipped: set[str] = set()

    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        not_found = fetch_to_spool(
            client, tables.PROMPT_MENTIONS, plan, fetch_mentions, spool, prompts_not_found=skipped
        )

    assert not_found == {gone.brand_id}
    assert skipped == set()
