"""The run tags Dagster sets on the runs it launches, by the names Dagster documents for them.

Dagster's public API exports no constants for these tags (its own sit in a private module that any
release may move), so they are named here, once. Where Dagster documents them:

* ``dagster/backfill``, ``dagster/partition``, ``dagster/partition_set``: the *Run tags* table of
  "System tags", https://docs.dagster.io/guides/build/assets/metadata-and-tags/tags#run-tags
* ``dagster/asset_partition_range_start`` / ``dagster/asset_partition_range_end``: a run over a
  range of asset partitions, the tags the launchpad's "Edit tags" takes and a single-run backfill
  sets (https://github.com/dagster-io/dagster/pull/10441; backfill policies in
  https://docs.dagster.io/guides/build/partitions-and-backfills)
* ``dagster/max_retries``: how often the daemon retries a failed run of its own accord (*Run
  retries*, https://docs.dagster.io/deployment/execution/run-retries)
* ``dagster/partition/<dimension>``: one dimension's key of a multi-partition run, which Dagster
  writes next to ``dagster/partition`` (undocumented: read only to refuse a run whose tags disagree)

Where a public property says the same (``context.partition_key_range``, ``context.partition_keys``),
code reads the property; these names are for what no property says: which backfill a run belongs
to, the run's range exactly as requested (a job backfill's run context reads one partition of it),
and the tags a schedule or sensor puts on the runs it requests.
"""

BACKFILL_ID_TAG = "dagster/backfill"
PARTITION_NAME_TAG = "dagster/partition"
PARTITION_SET_TAG = "dagster/partition_set"
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
MULTIDIMENSIONAL_PARTITION_PREFIX = f"{PARTITION_NAME_TAG}/"
MAX_RETRIES_TAG = "dagster/max_retries"

#: ``PartitionBackfill.status`` values (the GraphQL API's ``BulkActionStatus``) after which a
#: backfill launches no more runs; Dagster's Python enum of them is not exported.
BACKFILL_ENDED_STATUSES = frozenset(
    {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
)
