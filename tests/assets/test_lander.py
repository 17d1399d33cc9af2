"""The landing worker: a table fetched here lands from a spawned process; its errors come back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from assets.builders import fetch_partitioned
from assets.facts import PROMPT_MENTIONS
from assets.lander import Lander
from assets.landing import FetchOutcome
from resources.api.client import VisibilityClient
from sandbox.testing import SandboxHandle
from tests.assets.conftest import SCHEMA
from tests.assets.test_assets_sandbox import D


@pytest.fixture
def outcome(sandbox: SandboxHandle) -> Iterator[FetchOutcome]:
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        fetched = fetch_partitioned(client, PROMPT_MENTIONS, {(D, "chatgpt")}, [])
    yield fetched
    fetched.spool.remove()


def test_a_table_lands_from_the_worker_process(outcome: FetchOutcome, tmp_path: Path) -> None:
    db = tmp_path / "wh.duckdb"

    with Lander({"url": f"duckdb:///{db}", "schema_name": SCHEMA}) as lander:
        results = lander.land("prompt_mentions", outcome, "run-1")

    assert sum(r.rows_written for r in results) == outcome.spool.rows > 0
    with duckdb.connect(str(db), read_only=True) as con:
        landed = con.execute(f"SELECT COUNT(*), ANY_VALUE(_run_id) FROM {SCHEMA}.prompt_mentions").fetchone()
    assert landed == (outcome.spool.rows, "run-1")


def test_a_landing_error_reaches_the_step_naming_the_table(outcome: FetchOutcome, tmp_path: Path) -> None:
    db = tmp_path / "wh.duckdb"
    with duckdb.connect(str(db)) as con:  # an incompatible column type
        con.execute(f"CREATE SCHEMA {SCHEMA}")
        con.execute(f"CREATE TABLE {SCHEMA}.prompt_mentions (id BOOLEAN PRIMARY KEY)")

    with Lander({"url": f"duckdb:///{db}", "schema_name": SCHEMA}) as lander:
        with pytest.raises(Exception, match="prompt_mentions") as raised:
            lander.land("prompt_mentions", outcome, "run-1")
        # the worker survives a failed landing: the next one runs (and fails the same way here)
        with pytest.raises(Exception, match="prompt_mentions"):
            lander.land("prompt_mentions", outcome, "run-2")

    assert "BrokenProcessPool" not in type(raised.value).__name__
