"""Every launch shape reaches the partitioned step as run tags; the step lands exactly what they ask.

Pure tests of the one rule (:func:`assets.partitions.requested_cells`, no I/O, a seeded property
test among them), then real in-process runs against the sandbox with the tags each UI path sends,
the job backfill's (a range plus the per-dimension tags of its first partition, which Dagster's own
run context reads as that one partition) first.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import pytest
from dagster import AssetKey, DagsterInstance, materialize
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from assets.dagster_tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
    PARTITION_SET_TAG,
)
from assets.partitions import (
    DAILY_PARTITIONS,
    PartitionRequestError,
    cell_keys,
    date_engine_partitions,
    partition_key,
    requested_cells,
)
from resources.api.endpoints import ENGINES_WITH_ALL
from sync.catalog import DAILY
from tests.assets.conftest import QUIET, Sync, selecting

D = dt.date(2026, 10, 20)
RANGE_START, RANGE_END = ASSET_PARTITION_RANGE_START_TAG, ASSET_PARTITION_RANGE_END_TAG


def job_backfill_tags(first: dt.date, last: dt.date, engines: tuple[str, ...]) -> dict[str, str]:
    """A job backfill's run: its range, plus the dimension tags of the range's first partition."""
    return {
        RANGE_START: str(partition_key(first, engines[0])),
        RANGE_END: str(partition_key(last, engines[-1])),
        "dagster/partition/date": first.isoformat(),
        "dagster/partition/engine": engines[0],
    }


def rectangle(first: dt.date, last: dt.date, engines: tuple[str, ...]) -> set[tuple[dt.date, str]]:
    n = (last - first).days + 1
    return {(first + dt.timedelta(days=i), e) for i in range(n) for e in engines}


# --------------------------------------------------------------------------------------------
# the rule, without I/O


def test_a_range_wins_over_the_first_partitions_dimension_tags_a_job_backfill_copies() -> None:
    engines = ENGINES_WITH_ALL  # the job page's "engine: all" picks every engine
    tags = job_backfill_tags(D, D, engines)

    assert requested_cells(tags, DAILY_PARTITIONS) == rectangle(D, D, engines)


def test_a_job_backfill_run_may_carry_the_dimension_tags_of_another_run_of_its_backfill() -> None:
    """Dagster copies the first partition of each chunk of runs onto every run of the chunk."""
    day_after = D + dt.timedelta(days=1)
    tags = {
        RANGE_START: str(partition_key(day_after, "chatgpt")),
        RANGE_END: str(partition_key(day_after, "claude")),
        "dagster/partition/date": D.isoformat(),
        "dagster/partition/engine": "chatgpt",
    }
    backfill = [str(partition_key(d, e)) for d in (D, day_after) for e in ("chatgpt", "claude")]

    assert requested_cells(tags, DAILY_PARTITIONS, backfill) == {
        (day_after, "chatgpt"),
        (day_after, "claude"),
    }
    with pytest.raises(PartitionRequestError, match="disagree"):
        requested_cells(tags, DAILY_PARTITIONS)  # not a job backfill's run: a conflict


def test_a_single_partition_run_asks_for_that_partition() -> None:
    key = str(partition_key(D, "claude"))
    tags = {
        PARTITION_NAME_TAG: key,
        "dagster/partition/date": D.isoformat(),
        "dagster/partition/engine": "claude",
    }

    assert requested_cells(tags, DAILY_PARTITIONS) == {(D, "claude")}
    only_dims = {"dagster/partition/date": D.isoformat(), "dagster/partition/engine": "claude"}
    assert requested_cells(only_dims, DAILY_PARTITIONS) == {(D, "claude")}


@pytest.mark.parametrize(
    ("tags", "named"),
    [
        ({}, "names no partition"),
        ({RANGE_START: f"{D}|chatgpt"}, "needs both ends"),
        (
            {RANGE_START: f"{D}|chatgpt", RANGE_END: f"{D}|all", PARTITION_NAME_TAG: f"{D}|chatgpt"},
            "not both",
        ),
        (
            {RANGE_START: f"{D}|chatgpt", RANGE_END: f"{D}|all", "dagster/partition/engine": "claude"},
            "dagster/partition/engine='claude'",
        ),
        ({PARTITION_NAME_TAG: f"{D}|claude", "dagster/partition/engine": "gemini"}, "disagree"),
        ({"dagster/partition/engine": "claude"}, "not every dimension"),
        ({RANGE_START: f"{D}|all", RANGE_END: f"{D - dt.timedelta(days=2)}|chatgpt"}, "names no partition"),
        ({RANGE_START: "yesterday|all", RANGE_END: f"{D}|all"}, "'yesterday|all'"),
    ],
)
def test_tags_that_do_not_say_one_set_of_partitions_are_refused_by_name(
    tags: dict[str, str], named: str
) -> None:
    with pytest.raises(PartitionRequestError, match=named.replace("|", r"\|").replace("(", r"\(")):
        requested_cells(tags, DAILY_PARTITIONS)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.integers(min_value=0, max_value=60),
    days=st.integers(min_value=1, max_value=30),
    lo=st.integers(min_value=0, max_value=len(ENGINES_WITH_ALL) - 1),
    width=st.integers(min_value=1, max_value=len(ENGINES_WITH_ALL)),
    shape=st.sampled_from(["range", "job_backfill", "single"]),
)
def test_every_launch_shape_of_a_rectangle_asks_for_exactly_its_cells(
    first: int, days: int, lo: int, width: int, shape: str
) -> None:
    start = dt.date(2026, 8, 1) + dt.timedelta(days=first)
    last = start + dt.timedelta(days=days - 1)
    engines = ENGINES_WITH_ALL[lo : lo + width]
    if shape == "single":
        last, engines = start, engines[:1]
    tags = {
        "range": {
            RANGE_START: str(partition_key(start, engines[0])),
            RANGE_END: str(partition_key(last, engines[-1])),
        },
        "job_backfill": job_backfill_tags(start, last, engines),
        "single": {PARTITION_NAME_TAG: str(partition_key(start, engines[0]))},
    }[shape]

    cells = requested_cells(tags, date_engine_partitions(dt.date(2026, 1, 1)))

    assert cells == rectangle(start, last, engines)
    assert len(cell_keys(cells)) == len(cells)


# --------------------------------------------------------------------------------------------
# real runs


def materialized_cells(instance: DagsterInstance, run_id: str, table: str) -> list[str]:
    records = instance.get_records_for_run(run_id, of_type=None).records  # type: ignore[arg-type]
    return sorted(
        str(r.event_log_entry.dagster_event.partition)
        for r in records
        if r.event_log_entry.dagster_event is not None
        and r.event_log_entry.dagster_event.is_step_materialization
        and r.event_log_entry.dagster_event.asset_key == AssetKey(table)
    )


def run_with_tags(sync: Sync, tables: list[str], tags: dict[str, str]) -> Any:
    defs, selection = selecting(tables)
    return materialize(
        defs,
        selection=selection,
        instance=sync.instance,
        resources=sync.resources(),
        tags=tags,
        run_config=QUIET,
        raise_on_error=False,
    )


def test_a_job_backfills_run_lands_and_records_every_cell_of_its_range(sync: Sync) -> None:
    """The job page's "Materialize all" of one day x every engine: one run, eight partitions."""
    tables = ["prompt_mentions", "competitor_trends"]
    tags = job_backfill_tags(D, D, ENGINES_WITH_ALL)

    result = run_with_tags(sync, tables, tags)

    assert result.success
    asked = cell_keys(rectangle(D, D, ENGINES_WITH_ALL))
    for table in tables:
        assert materialized_cells(sync.instance, result.run_id, table) == sorted(asked)
    engines = {e for (e,) in sync.query("SELECT DISTINCT engine FROM competitor_trends")}
    assert "all" in engines and len(engines) > 2, engines
    mention_engines = {e for (e,) in sync.query("SELECT DISTINCT engine FROM prompt_mentions")}
    assert len(mention_engines) > 1, mention_engines


def test_a_run_over_the_all_column_alone_lands_only_rollup_rows(sync: Sync) -> None:
    tags = {
        RANGE_START: str(partition_key(D, "all")),
        RANGE_END: str(partition_key(D + dt.timedelta(days=1), "all")),
    }

    result = run_with_tags(sync, ["competitor_trends", "citation_trends"], tags)

    assert result.success
    assert {e for (e,) in sync.query("SELECT DISTINCT engine FROM competitor_trends")} == {"all"}
    assert materialized_cells(sync.instance, result.run_id, "citation_trends") == [
        f"{D}|all",
        f"{D + dt.timedelta(days=1)}|all",
    ]


def test_a_run_whose_tags_disagree_fails_naming_them_and_writes_nothing(sync: Sync) -> None:
    tags = {**job_backfill_tags(D, D, ENGINES_WITH_ALL), "dagster/partition/engine": "gemini"}
    sync.sandbox.reset_stats()

    result = run_with_tags(sync, ["prompt_mentions"], tags)

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    message = str(failure.step_failure_data.error)
    assert "dagster/partition/engine='gemini'" in message and "disagree" in message
    assert materialized_cells(sync.instance, result.run_id, "prompt_mentions") == []
    assert sync.sandbox.stats() == {} or sum(sum(s.values()) for s in sync.sandbox.stats().values()) == 0
    assert not sync.db.exists() or not sync.query(
        "SELECT * FROM information_schema.tables WHERE table_name = 'prompt_mentions'"
    )


def test_a_backfill_of_the_daily_group_alone_leaves_every_view_and_the_report_working(sync: Sync) -> None:
    """The README's group backfill into a fresh warehouse: no snapshot step runs in it."""
    from assets.visibility_report import visibility_report
    from resources.warehouse.resource import WarehouseResource
    from resources.warehouse.views import ANALYST_VIEWS
    from sync.catalog import DAILY

    tags = {
        RANGE_START: str(partition_key(D, ENGINES_WITH_ALL[0])),
        RANGE_END: str(partition_key(D + dt.timedelta(days=1), ENGINES_WITH_ALL[-1])),
    }
    result = run_with_tags(sync, [t.spec.name for t in DAILY], tags)
    assert result.success

    tables = {t for (t,) in sync.query("SELECT table_name FROM information_schema.tables")}
    assert {"brands", "prompts", "tracked_competitors"} <= tables
    for table in ("topics", "generations", "audit_reports"):  # listed by no daily table: created empty
        assert table in tables and sync.query(f"SELECT COUNT(*) FROM {table}")[0][0] == 0, table
    for view in ANALYST_VIEWS:  # two weekdays: no Sunday, so no week has ended in the weekly view
        rows = sync.query(f"SELECT COUNT(*) FROM {view.name}")[0][0]
        assert rows > 0 or view.name == "competitor_trends_weekly", view.name
    brands = {b for (b,) in sync.query("SELECT id FROM brands_current")}
    assert brands == {b for (b,) in sync.query("SELECT DISTINCT brand_id FROM competitor_trends")}
    landed = {e.asset_key.path[-1] for e in result.get_asset_materialization_events() if e.partition is None}
    assert landed == {"brands", "prompts", "tracked_competitors"}

    report = materialize(
        [visibility_report],
        instance=sync.instance,
        resources={"warehouse": WarehouseResource(url=f"duckdb:///{sync.db}", schema_name="visibility")},
        raise_on_error=False,
    )
    assert report.success


# --------------------------------------------------------------------------------------------
# random selections, split as Dagster splits a backfill, each run launched with that shape's tags

PROPERTY_TABLES = ["prompt_mentions", "competitor_trends", "cited_pages"]


def day_rows(db: Any, table: str) -> set[tuple[Any, ...]]:
    """Every row but the writer's columns, with its (date, engine) cell first; trends' day rows."""
    from sync.catalog import BY_NAME

    spec = BY_NAME[table].spec
    where = "WHERE granularity = 'day'" if table == "competitor_trends" else ""
    with duckdb.connect(str(db), read_only=True) as con:
        names = [
            c
            for (c,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                "AND schema_name = 'visibility' AND column_name NOT IN ('_loaded_at', '_run_id') "
                "ORDER BY column_name",
                [table],
            ).fetchall()
        ]
        shown = ", ".join(f'"{n}"' for n in names)
        cell = f"CAST({spec.date_column} AS DATE), {spec.engine_column}"
        sql = f"SELECT {cell}, {shown} FROM visibility.{table} {where}"
        return {tuple(str(v) for v in row) for row in con.execute(sql).fetchall()}


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["asset_backfill", "job_backfill"])
@settings(
    max_examples=2,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    picked=st.sets(
        st.tuples(st.integers(min_value=0, max_value=2), st.sampled_from(ENGINES_WITH_ALL)),
        min_size=1,
        max_size=9,
    ),
)
@example(picked={(0, "chatgpt"), (1, "all"), (1, "chatgpt"), (1, "perplexity"), (2, "google_ai_overviews")})
def test_random_selections_split_as_dagster_splits_them_land_exactly_their_cells(
    sandbox: Any, tmp_path_factory: pytest.TempPathFactory, picked: set[tuple[int, str]], shape: str
) -> None:
    """Each shape on every draw (a drawn shape left a job backfill to chance); each run's recorded
    tags are the shape's, a job backfill's with its first partition's ``dagster/partition/*`` tags
    (which ``materialize(tags=...)`` keeps: the step reads them); the explicit example splits into
    runs whose range is not the partition those tags name."""
    folder = tmp_path_factory.mktemp("selection")
    asked = {(D + dt.timedelta(days=i), e) for i, e in picked}
    keys = cell_keys(asked)
    ranges = DAILY_PARTITIONS.subset_with_partition_keys(keys).get_partition_key_ranges(DAILY_PARTITIONS)
    with DagsterInstance.ephemeral() as instance:
        ui = Sync(sandbox, folder / "ui.duckdb", instance)
        backfill_id = f"prop{abs(hash((frozenset(picked), shape))) % 10**8}"
        base: dict[str, str] = {BACKFILL_ID_TAG: backfill_id}
        if shape == "job_backfill":  # the partition set's tags of the chunk's first partition on every run
            first = DAILY_PARTITIONS.get_partition_key_from_str(ranges[0].start)
            base |= {PARTITION_SET_TAG: "visibility_daily_partition_set"}
            base |= {f"dagster/partition/{d}": v for d, v in first.keys_by_dimension.items()}
            instance.add_backfill(job_backfill(backfill_id, keys))
        recorded: set[tuple[str, str]] = set()
        for key_range in ranges:
            result = run_with_tags(
                ui, PROPERTY_TABLES, {**base, RANGE_START: key_range.start, RANGE_END: key_range.end}
            )
            assert result.success, [
                str(e.step_failure_data.error) for e in result.all_events if e.is_step_failure
            ]
            run = instance.get_run_by_id(result.run_id)
            assert run is not None and base.items() <= run.tags.items(), (base, run and run.tags)
            dimension_tags = {k for k in run.tags if k.startswith("dagster/partition/")}
            job_tags = {"dagster/partition/date", "dagster/partition/engine"}
            assert dimension_tags == (job_tags if shape == "job_backfill" else set())
            recorded |= set(materialized_cells_all(instance, result.run_id))

        reference = Sync(sandbox, folder / "reference.duckdb", instance)  # one run over the bounding box
        box_dates = sorted({d for d, _ in asked})
        box_engines = tuple(e for e in ENGINES_WITH_ALL if any(c[1] == e for c in asked))
        first_engine, last_engine = box_engines[0], box_engines[-1]
        tags = {
            RANGE_START: str(partition_key(box_dates[0], first_engine)),
            RANGE_END: str(partition_key(box_dates[-1], last_engine)),
        }
        assert run_with_tags(reference, PROPERTY_TABLES, tags).success

    assert recorded == {(t, k) for t in PROPERTY_TABLES for k in keys}
    wanted = {(d.isoformat(), e) for d, e in asked}
    for table in PROPERTY_TABLES:
        landed = day_rows(ui.db, table)
        assert {r[:2] for r in landed} <= wanted, table  # no row outside the cells asked for
        expected = {r for r in day_rows(reference.db, table) if r[:2] in wanted}
        assert landed == expected, table


def test_a_job_backfills_target_is_every_partition_it_names_for_every_table() -> None:
    """What every run of a job backfill fetches for (the claimant fetches it all, sync/handoff.py)."""
    from assets.builders import targets_of

    asked = {(D + dt.timedelta(days=i), e) for i in range(3) for e in ("chatgpt", "claude", "all")}
    tables = [t.spec.name for t in DAILY]

    assert targets_of(job_backfill("b", cell_keys(asked)), None, tables) == dict.fromkeys(tables, asked)


def job_backfill(backfill_id: str, keys: list[str]) -> Any:
    """A job backfill of ``keys`` as the daemon records it (no public API records one without running
    it: only the GraphQL launch)."""
    import time

    from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill

    return PartitionBackfill(
        backfill_id=backfill_id,
        status=BulkActionStatus.REQUESTED,
        from_failure=False,
        tags={},
        backfill_timestamp=time.time(),
        partition_names=keys,
    )


def materialized_cells_all(instance: DagsterInstance, run_id: str) -> list[tuple[str, str]]:
    from dagster import DagsterEventType

    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
    return [
        (r.event_log_entry.dagster_event.asset_key.path[-1], str(r.event_log_entry.dagster_event.partition))
        for r in records
        if r.event_log_entry.dagster_event is not None
        and r.event_log_entry.dagster_event.partition is not None
    ]


def test_every_landed_cell_gets_one_event_and_the_schema_travels_on_the_first_and_last() -> None:
    from assets.builders import SCHEMA_KEY, landed_events

    days = [dt.date(2026, 10, 1) + dt.timedelta(days=i) for i in range(3)]
    cells = {(d, e) for d in days for e in ("chatgpt", "gemini")}
    events = list(landed_events("answers", cells, {SCHEMA_KEY: "schema", "rows_landed": 7}))
    assert sorted(e.partition for e in events) == sorted(cell_keys(cells))
    with_schema = [i for i, e in enumerate(events) if SCHEMA_KEY in e.metadata]
    assert with_schema == [0, len(events) - 1]
    assert all(e.metadata["rows_landed"].value == 7 for e in events)
