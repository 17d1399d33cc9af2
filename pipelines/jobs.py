"""Jobs, selected by asset group so a new table is in its jobs without a list to keep:
``visibility_sync`` (snapshots, then every date x engine table of a range; what the schedule,
``visibility-sync run`` and ``sync_now`` launch), ``visibility_snapshots`` and ``visibility_daily``.
"""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job, in_process_executor

from assets.partitions import DAILY_PARTITIONS
from sync.catalog import DAILY_GROUP, SNAPSHOT_GROUP

#: Every run (the UI's backfills included) executes its steps in its run process. A sync is two steps
#: (``sync_snapshots``, ``sync_daily``) plus its checks; a step process per step would only add its
#: start-up (seconds on a small machine) while the key's rate budget waits. Pools still hold: the
#: in-process executor claims pool slots like the multiprocess one.
DEFAULT_EXECUTOR = in_process_executor

SYNC_JOB = "visibility_sync"
SNAPSHOT_JOB = "visibility_snapshots"
DAILY_JOB = "visibility_daily"

sync_job = define_asset_job(
    SYNC_JOB,
    selection=AssetSelection.groups(SNAPSHOT_GROUP, DAILY_GROUP),
    partitions_def=DAILY_PARTITIONS,
    description="A whole sync: refresh the snapshot tables, then land every date x engine table for "
    "a range (one run, widest API windows). The daily schedule, `visibility-sync run` and `sync_now` "
    "launch it.",
)
snapshot_job = define_asset_job(
    SNAPSHOT_JOB,
    selection=AssetSelection.groups(SNAPSHOT_GROUP),
    description="Refresh the snapshot tables; rows gone from the API stay with is_current = false.",
)
daily_job = define_asset_job(
    DAILY_JOB,
    selection=AssetSelection.groups(DAILY_GROUP),
    partitions_def=DAILY_PARTITIONS,
    description="Every date x engine table for a range: mentions, answers, cited pages, citation and "
    "competitor trends (engines plus the `all` rollup).",
)

all_jobs = [sync_job, snapshot_job, daily_job]
