"""Jobs: one per partitions definition, because a run targets one partition set.

* ``visibility_snapshots``: brands, topics, prompts, tracked competitors, generations (unpartitioned).
* ``visibility_daily``: prompt mentions and answers (date x 7 engines).
* ``visibility_rollups``: cited pages, citation trends, competitor trends (date x 7 engines + ``all``).
"""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job, in_process_executor

#: Every run (the UI's backfills included) executes its steps in its run process. A partitioned run
#: is one step anyway (``sync_daily`` / ``sync_rollups``); a step process per step would only add
#: its start-up (seconds on a small machine) while the key's rate budget waits. Pools still hold:
#: the in-process executor claims pool slots like the multiprocess one.
DEFAULT_EXECUTOR = in_process_executor

SNAPSHOT_JOB = "visibility_snapshots"
DAILY_JOB = "visibility_daily"
ROLLUP_JOB = "visibility_rollups"

SNAPSHOT_ASSETS = ("brands", "topics", "prompts", "tracked_competitors", "generations")
DAILY_ASSETS = ("prompt_mentions", "answers")
ROLLUP_ASSETS = ("cited_pages", "citation_trends", "competitor_trends")

snapshot_job = define_asset_job(
    SNAPSHOT_JOB,
    selection=AssetSelection.assets(*SNAPSHOT_ASSETS),
    description="Refresh the snapshot tables; rows gone from the API stay with is_current = false.",
)
daily_job = define_asset_job(
    DAILY_JOB,
    selection=AssetSelection.assets(*DAILY_ASSETS),
    description="Prompt mentions and answers for a date x engine range (one run, widest API windows).",
)
rollup_job = define_asset_job(
    ROLLUP_JOB,
    selection=AssetSelection.assets(*ROLLUP_ASSETS),
    description="Cited pages, citation trends and competitor trends, per engine and the `all` rollup.",
)

all_jobs = [snapshot_job, daily_job, rollup_job]
