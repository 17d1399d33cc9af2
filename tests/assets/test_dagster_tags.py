"""Dagster reads and writes the run tags by the names ``assets/dagster_tags.py`` gives them.

Those names replace Dagster's private constants: if a Dagster release renamed a tag, these real
runs (Dagster's own ``materialize``, the project's partitions definition) would show it.
"""

import datetime as dt

from dagster import AssetExecutionContext, DagsterInstance, PartitionKeyRange, asset, materialize

from assets.dagster_tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    MULTIDIMENSIONAL_PARTITION_PREFIX,
    PARTITION_NAME_TAG,
)
from assets.partitions import DAILY_PARTITIONS, DATE_DIM, ENGINE_DIM, PARTITION_SETTINGS, partition_key
from pipelines.schedules import range_tags

DAY = PARTITION_SETTINGS.start_date + dt.timedelta(days=1)
seen: dict[str, object] = {}


@asset(partitions_def=DAILY_PARTITIONS)
def probe(context: AssetExecutionContext) -> None:
    seen["range"] = context.partition_key_range if context.has_partition_key_range else None
    seen["tags"] = dict(context.run.tags)


def test_dagster_reads_a_run_range_from_the_range_tags_by_their_names() -> None:
    tags = range_tags(DAY, DAY + dt.timedelta(days=1), ("chatgpt", "all"))
    assert set(tags) == {ASSET_PARTITION_RANGE_START_TAG, ASSET_PARTITION_RANGE_END_TAG}
    seen.clear()
    with DagsterInstance.ephemeral() as instance:
        assert materialize([probe], instance=instance, tags=tags).success

    assert seen["range"] == PartitionKeyRange(
        str(partition_key(DAY, "chatgpt")), str(partition_key(DAY + dt.timedelta(days=1), "all"))
    )


def test_dagster_tags_a_one_partition_run_by_the_partition_tag_names() -> None:
    key = partition_key(DAY, "gemini")
    seen.clear()
    with DagsterInstance.ephemeral() as instance:
        assert materialize([probe], instance=instance, partition_key=key).success

    tags = seen["tags"]
    assert isinstance(tags, dict) and tags[PARTITION_NAME_TAG] == str(key)
    assert tags[f"{MULTIDIMENSIONAL_PARTITION_PREFIX}{DATE_DIM}"] == DAY.isoformat()
    assert tags[f"{MULTIDIMENSIONAL_PARTITION_PREFIX}{ENGINE_DIM}"] == "gemini"
