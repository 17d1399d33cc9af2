"""``visibility-sync run`` split into several Dagster runs: what it reports, and what it leaves in /tmp."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb

from pipelines.cli import engine_groups, sync
from settings import load_settings
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
