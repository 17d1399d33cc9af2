"""The run tags Dagster sets on the runs it launches, named once: its public API exports no constants
for them. Read them only where no public property says the same (``context.partition_key_range``);
``dagster/partition/<dimension>`` is undocumented and read only to refuse disagreeing tags.
"""

BACKFILL_ID_TAG = "dagster/backfill"
PARTITION_NAME_TAG = "dagster/partition"
PARTITION_SET_TAG = "dagster/partition_set"
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
MULTIDIMENSIONAL_PARTITION_PREFIX = f"{PARTITION_NAME_TAG}/"
MAX_RETRIES_TAG = "dagster/max_retries"

#: Backfill statuses after which it launches no more runs (Dagster does not export their enum).
BACKFILL_ENDED_STATUSES = frozenset(
    {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
)
