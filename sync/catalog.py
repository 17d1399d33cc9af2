"""Every table a sync lands, in the order a sync lands them: one list to change when a table or an
endpoint changes.

Each entry knows its table spec (columns, key: :mod:`sync.tables`), the API endpoints it reads, and
how it is fetched (planner and per-call fetch, or one listing). The Dagster layer declares one asset
per entry (``assets/snapshots.py``, ``assets/daily.py``); the jobs select them by these groups.
"""

from __future__ import annotations

from sync.facts import ANSWERS, PROMPT_MENTIONS
from sync.fetching import PartitionedTable, SnapshotTable
from sync.snapshots import SNAPSHOT_TABLES
from sync.trends import CITATION_TRENDS, CITED_PAGES, COMPETITOR_TRENDS

#: Asset groups: the jobs select tables by group, so a new entry is in its jobs without a list to keep.
SNAPSHOT_GROUP = "visibility_snapshots"
DAILY_GROUP = "visibility_daily"

#: Listed in one step, brands first (every other table is per brand).
SNAPSHOTS: tuple[SnapshotTable, ...] = SNAPSHOT_TABLES
#: Fetched back to back in one step, each landed while the next is fetched: the longest fetches last
#: (rollups first, then mentions, one call per prompt, then answers, paged per brand).
DAILY: tuple[PartitionedTable, ...] = (
    COMPETITOR_TRENDS,
    CITATION_TRENDS,
    CITED_PAGES,
    PROMPT_MENTIONS,
    ANSWERS,
)

BY_NAME: dict[str, SnapshotTable | PartitionedTable] = {t.spec.name: t for t in (*SNAPSHOTS, *DAILY)}
