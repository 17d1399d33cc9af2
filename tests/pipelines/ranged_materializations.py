"""A ranged run shaped like the daily sync step's: one materialization per date x engine partition of
five tables (the project's partitions definition and the metadata the step attaches, the column
schema on a table's first and last event only), and each table's check right after it lands.

Real Dagster, no warehouse and no API: what the event log stores of it is what it stores of a sync.
"""

import datetime as dt
from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetMaterialization,
    AssetSpec,
    BackfillPolicy,
    DagsterInstance,
    ExecuteInProcessResult,
    MetadataValue,
    TableColumn,
    TableSchema,
    materialize,
    multi_asset,
)

from assets.builders import SCHEMA_KEY
from assets.partitions import cell_keys, date_engine_partitions, parse_partition_keys
from pipelines.schedules import range_tags
from resources.api.endpoints import ENGINES_WITH_ALL

TABLES = ("t_citation_trends", "t_competitor_trends", "t_cited_pages", "t_prompt_mentions", "t_answers")
FIRST_DAY = dt.date(2026, 9, 1)
PARTITIONS = date_engine_partitions(FIRST_DAY)
SCHEMA = TableSchema(
    columns=[
        TableColumn(name=f"column_{n}", type="VARCHAR", description=f"column {n} of the table")
        for n in range(14)
    ]
)


def step_metadata(table: str, cells: int) -> dict[str, Any]:
    """What the sync step attaches to each landed partition (``sync.driver.daily_metadata``)."""
    return {
        "fetch_seconds": 1.23,
        "land_seconds": 0.45,
        "rows_landed": 4 * cells,
        "rows_replaced": 0,
        "writes": 1,
        "columns_added": MetadataValue.json([]),
        "requests_total": 12,
        "requests_by_endpoint": MetadataValue.json({f"/v1/{table}": 12}),
        "retries": 0,
        "retries_by_cause": MetadataValue.json({}),
        "wait_seconds": 0.0,
        "errors_by_code": MetadataValue.json({}),
        "unknown_engine_rows": 0,
        "brands_out_of_scope": MetadataValue.json([]),
        "calls_planned": 12,
        "requests_beyond_plan": 0,
        "window_start": "2026-10-01",
        "window_end_exclusive": "2026-10-31",
        "partitions": cells,
        "brands_landed": MetadataValue.json(["brand-1", "brand-2"]),
        "engines_not_measured": MetadataValue.json([]),
        SCHEMA_KEY: SCHEMA,
    }


@multi_asset(
    specs=[AssetSpec(table, partitions_def=PARTITIONS) for table in TABLES],
    check_specs=[AssetCheckSpec("keys_unique", asset=table) for table in TABLES],
    partitions_def=PARTITIONS,
    backfill_policy=BackfillPolicy.single_run(),
    can_subset=True,
)
def ranged_tables(context: AssetExecutionContext) -> Iterator[AssetMaterialization | AssetCheckResult]:
    keys = cell_keys(parse_partition_keys(list(context.partition_keys)))
    for table in TABLES:
        metadata = step_metadata(table, len(keys))
        lean = {k: v for k, v in metadata.items() if k != SCHEMA_KEY}
        for index, key in enumerate(keys):
            ends = index in (0, len(keys) - 1)
            yield AssetMaterialization(asset_key=table, partition=key, metadata=metadata if ends else lean)
        yield AssetCheckResult(
            asset_key=table, check_name="keys_unique", passed=table != "t_answers", metadata={"duplicates": 0}
        )


def run_ranged(
    instance: DagsterInstance, days: int, engines: tuple[str, ...] = ENGINES_WITH_ALL
) -> ExecuteInProcessResult:
    """One run over ``days`` days from :data:`FIRST_DAY` x ``engines`` (range tags, as the CLI's)."""
    last = FIRST_DAY + dt.timedelta(days=days - 1)
    return materialize(
        [ranged_tables],
        instance=instance,
        tags=range_tags(FIRST_DAY, last, (engines[0], engines[-1])),
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        raise_on_error=False,
    )
