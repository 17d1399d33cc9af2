"""Partial answers of the service: truncated listings and failed lands (prompts deleted mid-run:
tests/sync/test_prompts_not_found.py).

Real Dagster runs and real HTTP against the sandbox on loopback, real DuckDB files.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
from dagster import DagsterInstance, materialize

from assets.builders import daily_assets
from assets.partitions import partition_key
from sync.listings import GENERATIONS_LIMIT_TAG
from sync.spool import SPOOL_PREFIX
from tests.assets.conftest import QUIET, SCHEMA, Sync, metadata
from tests.sync.conftest import D


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
