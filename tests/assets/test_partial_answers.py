"""Partial answers of the service: truncated listings, prompts deleted mid-run, failed lands.

Real Dagster runs and real HTTP against the sandbox on loopback, real DuckDB files.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pytest
from dagster import DagsterInstance, materialize

from assets.daily import daily_assets
from assets.partitions import partition_key
from resources.api.client import VisibilityClient
from resources.api.endpoints import ENGINES
from sandbox.testing import SandboxHandle
from sync import tables as T
from sync.facts import fetch_mentions
from sync.landing import DEFAULT_DAYS_PER_WRITE, fetch_to_spool
from sync.planning import BrandInput, plan_mentions
from sync.snapshots import GENERATIONS_LIMIT_TAG
from sync.spool import SPOOL_PREFIX, DateSpool
from tests.assets.conftest import QUIET, SCHEMA, Sync, metadata
from tests.assets.test_assets_sandbox import D, workspace_inputs


def spools_in(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"{SPOOL_PREFIX}*"))


def test_a_capped_generations_listing_keeps_the_older_generations_current(sync: Sync) -> None:
    sync.run(["generations"])
    total = sync.query("SELECT COUNT(*) FROM generations WHERE is_current")[0][0]
    per_brand = dict(sync.query("SELECT brand_id, COUNT(*) FROM generations GROUP BY ALL"))
    assert all(n > 2 for n in per_brand.values())

    capped = sync.run(["generations"], tags={GENERATIONS_LIMIT_TAG: "2"})

    assert sync.query("SELECT COUNT(*) FROM generations WHERE is_current")[0][0] == total
    meta = metadata(capped, "generations")
    assert meta["rows_retired"] == 0
    assert meta["capped_responses"] == len(per_brand)
    assert meta["brands_not_retired"] == sorted(per_brand)
    fresh = sync.query(
        "SELECT brand_id, COUNT(*) FROM generations WHERE _run_id = ? GROUP BY ALL", [capped.run_id]
    )
    assert dict(fresh) == dict.fromkeys(per_brand, 2)


def test_a_full_generations_listing_still_retires_vanished_generations(sync: Sync) -> None:
    """Control of the test above: uncapped brands keep retiring (a row the listing lacks)."""
    sync.run(["generations"])
    with duckdb.connect(str(sync.db)) as con:
        con.execute(
            f"INSERT INTO {SCHEMA}.generations SELECT * REPLACE ('gone-' || id AS id) "
            f"FROM {SCHEMA}.generations LIMIT 1"
        )
    result = sync.run(["generations"])
    assert metadata(result, "generations")["rows_retired"] == 1
    assert sync.query("SELECT is_current FROM generations WHERE id LIKE 'gone-%'") == [(False,)]


@pytest.fixture
def spool(private_tmp: Path) -> Iterator[DateSpool]:
    assert T.PROMPT_MENTIONS.date_column is not None
    made = DateSpool.create(T.PROMPT_MENTIONS.date_column, DEFAULT_DAYS_PER_WRITE, name="test")
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
    assert T.PROMPT_MENTIONS.date_column is not None
    baseline = DateSpool.create(T.PROMPT_MENTIONS.date_column, DEFAULT_DAYS_PER_WRITE, name="baseline")
    deleted = str(uuid.uuid4())
    with_deleted = [replace(target, prompt_ids=(*target.prompt_ids, deleted)), *inputs[1:]]
    plan = plan_mentions(cells, with_deleted, ENGINES)
    assert any(c.prompt_id == deleted for c in plan.calls)
    skipped: set[str] = set()

    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        fetch_to_spool(
            client, T.PROMPT_MENTIONS, plan_mentions(cells, inputs, ENGINES), fetch_mentions, baseline
        )
        not_found = fetch_to_spool(
            client, T.PROMPT_MENTIONS, plan, fetch_mentions, spool, prompts_not_found=skipped
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
            client, T.PROMPT_MENTIONS, plan, fetch_mentions, spool, prompts_not_found=skipped
        )

    assert not_found == {gone.brand_id}
    assert skipped == set()


def _break_the_mentions_table(db: Path) -> None:
    """An incompatible column type: the land step fails after the fetch step spooled its rows."""
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE SCHEMA {SCHEMA}")
        con.execute(f"CREATE TABLE {SCHEMA}.prompt_mentions (id BOOLEAN PRIMARY KEY)")


def test_a_failed_land_leaves_no_spool_and_the_other_table_still_lands(
    sync: Sync, instance: DagsterInstance, private_tmp: Path
) -> None:
    _break_the_mentions_table(sync.db)

    result = materialize(
        daily_assets,
        selection=["prompt_mentions", "answers"],
        instance=instance,
        resources=sync.resources(),
        partition_key=partition_key(D, "chatgpt"),
        run_config=QUIET,
        raise_on_error=False,
    )

    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "prompt_mentions" in str(failure.event_specific_data.error)
    landed = {
        e.asset_key.to_user_string()
        for e in result.get_asset_materialization_events()
        if e.partition is not None
    }
    assert landed == {"answers"}
    assert sync.query("SELECT COUNT(*) FROM answers")[0][0] > 0
    assert spools_in(private_tmp) == []  # a re-run fetches again: nothing is kept for it
