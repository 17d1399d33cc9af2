"""The data dictionary: docs/TABLES.md is what the specs render, its file references exist, and its
example queries run on a DuckDB file and a Postgres schema synced from the sandbox by real Dagster runs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import uuid
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from dagster import DagsterInstance, materialize

from pipelines.resources import session_per_run
from pipelines.schedules import range_tags
from resources.api.resource import VisibilityAPIResource
from resources.warehouse.contract import (
    EVOLVED_COLUMN_DESCRIPTION,
    LOAD_COLUMNS,
    SNAPSHOT_COLUMNS,
    PartitionScope,
)
from resources.warehouse.resource import WarehouseResource
from resources.warehouse.views import ANALYST_VIEWS, current_view_description
from sandbox.testing import SandboxHandle
from sync import tables
from sync.catalog import ALL_TABLES
from sync.dictionary import COMMAND, TEMPLATE, render
from sync.progress import NO_PROGRESS
from sync.transforms import rows_to_table
from tests.assets.conftest import QUIET, selecting
from tests.fixtures_bigquery import BigQueryTarget
from tests.warehouse.conftest import Case

REPO = Path(__file__).resolve().parents[2]
TABLES_MD = REPO / "docs" / "TABLES.md"
#: a Thursday to the Tuesday after: the Sunday of October 25 owns a week
FIRST, LAST = dt.date(2026, 10, 22), dt.date(2026, 10, 27)
SYNCED = ("brands", "topics", "competitor_trends", "cited_pages", "citation_trends")

#: What a description may name as a file: a path under a top-level folder, or a name with an extension.
_FILE = re.compile(
    r"(?<![\w/.-])(?:(?:assets|resources|pipelines|sandbox|tests|bench|deploy|docs|report)/[\w./-]*\w"
    r"|[\w-]+\.(?:md|py|toml|ya?ml|json|cfg|ini|txt))"
)


@dataclasses.dataclass(frozen=True)
class Example:
    """An example query; ``postgres`` or ``bigquery`` None: the DuckDB SQL runs there as it is."""

    title: str
    duckdb: str
    postgres: str | None = None
    bigquery: str | None = None

    def sql(self, engine: str) -> str:
        """The query for ``engine`` (``duckdb``, ``postgres``, ``bigquery``)."""
        own = {"postgres": self.postgres, "bigquery": self.bigquery}.get(engine)
        return (own or self.duckdb).strip()


ENGINE_NAMES = {"duckdb": "DuckDB", "postgres": "Postgres", "bigquery": "BigQuery"}


def examples(text: str) -> tuple[Example, ...]:
    """The example queries of the dictionary's text: each ``###`` section after ``## Example
    queries``, its SQL blocks each headed by the engines it runs on as written."""
    by_name = {name: engine for engine, name in ENGINE_NAMES.items()}
    found = []
    for section in text.split("## Example queries", 1)[1].split("\n### ")[1:]:
        title = section.split("\n", 1)[0]
        sql: dict[str, str] = {}
        for names, query in re.findall(r"^([^\n]+):\n\n```sql\n(.*?);\n```", section, flags=re.M | re.S):
            sql.update((by_name[name], query) for name in re.split(r", | and ", names))
        found.append(Example(title, sql["duckdb"], sql.get("postgres"), sql.get("bigquery")))
    return tuple(found)


#: The example queries, as the dictionary shows them (each runs below).
EXAMPLES = examples(TEMPLATE.read_text())


def all_descriptions() -> list[str]:
    """Every text a writer puts in a table, view or column comment."""
    texts = [EVOLVED_COLUMN_DESCRIPTION, *(c.description for c in (*LOAD_COLUMNS, *SNAPSHOT_COLUMNS))]
    for spec in ALL_TABLES.values():
        texts += [spec.description, current_view_description(spec), *(c.description for c in spec.columns)]
    for view in ANALYST_VIEWS:
        texts += [view.description, *(c.description for c in view.columns)]
    return texts


def test_the_dictionary_file_is_what_the_specs_render() -> None:
    rendered = render(list(ALL_TABLES.values()))
    assert TABLES_MD.read_text() == rendered, f"docs/TABLES.md is stale: run `{COMMAND}`"


def test_the_dictionary_lists_every_table_view_and_column() -> None:
    text = TABLES_MD.read_text()
    for spec in ALL_TABLES.values():
        assert f"### `{spec.name}`" in text
        assert all(f"`{c.name}`" in text for c in spec.columns)
    for view in ANALYST_VIEWS:
        assert f"### `{view.name}`" in text


def test_every_file_a_comment_names_is_in_the_repository() -> None:
    named = {match for text in all_descriptions() for match in _FILE.findall(text)}
    assert "docs/TABLES.md" in named  # the pattern finds what the comments do name
    missing = sorted(name for name in named if not (REPO / name).exists())
    assert not missing, f"comments name files the repository does not have: {missing}"


def test_the_file_pattern_finds_paths_and_file_names_but_not_endpoints() -> None:
    text = "see docs/OPERATIONS.md and README.md, GET /v1/brands/{id}/answers, e.g. blog_post."
    assert _FILE.findall(text) == ["docs/OPERATIONS.md", "README.md"]


# --- the example queries on synced warehouses ------------------------------------------------------


def sync(sandbox: SandboxHandle, warehouse: WarehouseResource) -> None:
    defs, selection = selecting(list(SYNCED))
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            defs,
            selection=selection,
            instance=instance,
            resources={
                "api": VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"]),
                "warehouse": warehouse,
                "progress": NO_PROGRESS,
                "sync_session": session_per_run(),
            },
            tags=range_tags(FIRST, LAST, ("copilot", "all")),
            run_config=QUIET,
        )
    assert result.success


def run_examples(execute: Any, engine: str) -> dict[str, list[tuple[Any, ...]]]:
    return {e.title: execute(e.sql(engine)) for e in EXAMPLES}


def assert_answered(results: dict[str, list[tuple[Any, ...]]]) -> None:
    empty = [title for title, rows in results.items() if not rows]
    assert not empty, f"examples without rows: {empty}"


@pytest.mark.timeout(240)
def test_the_example_queries_run_on_a_synced_duckdb_file(sandbox: SandboxHandle, tmp_path: Path) -> None:
    db = tmp_path / "visibility.duckdb"
    sync(sandbox, WarehouseResource(url=f"duckdb:///{db}", schema_name="visibility"))
    with duckdb.connect(str(db), read_only=True) as con:
        con.execute("USE visibility.visibility")  # the set-up docs/TABLES.md gives
        results = run_examples(lambda sql: con.execute(sql).fetchall(), "duckdb")
    assert_answered(results)
    # the week owned by the run's Sunday landed whole, its totals and the window's too
    weeks = results["Weekly visibility of each brand, per engine (complete ISO weeks)"]
    assert {(r[2], r[3]) for r in weeks} == {(dt.date(2026, 10, 19), dt.date(2026, 10, 25))}
    windows = results["The service's own totals over the newest synced window"]
    assert {(r[3], r[4]) for r in windows} == {(FIRST, LAST)}
    engines = results["Which engine mentions us most this week (the last 7 days)"]
    assert {r[1] for r in engines} == {"copilot"}  # the synced engines, less the `all` rollup
    leads = results["Are we gaining on a competitor? Our lead in share of voice, week by week (all engines)"]
    assert all(r[1] != r[0] and r[5] == r[3] - r[4] for r in leads)


@pytest.mark.postgres
@pytest.mark.timeout(240)
def test_the_example_queries_run_on_a_synced_postgres_schema(
    sandbox: SandboxHandle, postgres_url: str, pg_schema: str
) -> None:
    sync(sandbox, WarehouseResource(url=postgres_url, schema_name=pg_schema))
    with psycopg.connect(postgres_url) as con:
        con.execute(f'SET search_path TO "{pg_schema}"')  # the set-up docs/TABLES.md gives

        def execute(sql: str) -> list[tuple[Any, ...]]:
            return con.execute(sql).fetchall()  # type: ignore[arg-type]

        results = run_examples(execute, "postgres")
    assert_answered(results)
    own_pages = results[
        "The 3 most-cited pages of each brand's own domain over its last 28 landed days, per engine"
    ]
    assert max(sum(1 for r in own_pages if r[:2] == key[:2]) for key in own_pages) <= 3


@pytest.mark.timeout(240)
def test_the_example_queries_run_on_bigquery(bigquery_target: BigQueryTarget) -> None:
    """The same examples on the emulator (real BigQuery when configured), over rows landed by the writer."""
    from google.cloud import bigquery

    from tests.warehouse.test_views import BRAND, SUN, land_all, trend

    dataset = f"examples_{uuid.uuid4().hex[:10]}"
    wh = dataclasses.replace(bigquery_target, dataset=dataset).warehouse()
    client = bigquery_target.client
    try:
        land_all(Case("bigquery", wh, dataset))
        per_engine = [{**trend("day", "Acme", SUN, SUN, 2, 50.0), "engine": "chatgpt"}]
        scope = PartitionScope((BRAND,), SUN, SUN + dt.timedelta(days=1), ("chatgpt",))
        wh.replace_partitions(
            tables.COMPETITOR_TRENDS, rows_to_table(tables.COMPETITOR_TRENDS, per_engine), scope, "r2"
        )
        config = bigquery.QueryJobConfig(default_dataset=f"{bigquery_target.project}.{dataset}")

        def execute(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(row.values()) for row in client.query(sql, job_config=config).result()]

        results = run_examples(execute, "bigquery")
    finally:
        client.delete_dataset(f"{bigquery_target.project}.{dataset}", delete_contents=True, not_found_ok=True)
    assert_answered(results)
    assert results["Which engine mentions us most this week (the last 7 days)"] == [("Acme", "chatgpt", 2)]
    leads = results["Are we gaining on a competitor? Our lead in share of voice, week by week (all engines)"]
    assert [(r[1], r[3], r[4], r[5]) for r in leads] == [("Rival", 60.0, 40.0, 20.0)]
