"""The run tags Dagster sets on the runs it launches, named once: its public API exports no constants
for them (https://docs.dagster.io/guides/build/assets/metadata-and-tags/tags#run-tags; the range tags
are the launchpad's and a single-run backfill's). ``dagster/partition/<dimension>`` is undocumented:
it is read only to refuse a run whose tags disagree. Code reads a public property where one says the
same (``context.partition_key_range``); these are for what none says.
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
