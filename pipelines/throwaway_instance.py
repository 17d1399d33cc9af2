"""The Dagster instance of a command run without ``DAGSTER_HOME``: Dagster's ephemeral one (in-memory
storages, thrown away at exit), except that a ranged run records one planned materialization per
asset instead of one per partition.

Dagster's own switch for that (``DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS``) stays off for
recorded runs, since a failed run then does not mark its partitions failed in the UI
(docs/OPERATIONS.md). Nothing reads a thrown-away run's partitions, and each event stored costs the
command about 3 ms of CPU: a sync of ten days over every engine plans some 400 partition-assets.
Built as ``dagster._core.instance.factory.create_ephemeral_instance`` builds Dagster's (pinned
version: ``tests/pipelines/test_throwaway_instance.py`` fails if that changes).
"""

from __future__ import annotations

from dagster import DagsterInstance
from dagster._core.instance import InstanceType
from dagster._core.launcher.sync_in_memory_run_launcher import SyncInMemoryRunLauncher
from dagster._core.run_coordinator import DefaultRunCoordinator
from dagster._core.storage.event_log import InMemoryEventLogStorage
from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager
from dagster._core.storage.root import TemporaryLocalArtifactStorage
from dagster._core.storage.runs import InMemoryRunStorage


class ThrowawayEventLogStorage(InMemoryEventLogStorage):
    """Dagster's in-memory event log, with one planned event per asset of a ranged run."""

    @property
    def supports_partition_subset_in_asset_materialization_planned_events(self) -> bool:
        return True


def throwaway_instance() -> DagsterInstance:
    return DagsterInstance(
        instance_type=InstanceType.EPHEMERAL,
        local_artifact_storage=TemporaryLocalArtifactStorage(),
        run_storage=InMemoryRunStorage(),
        event_storage=ThrowawayEventLogStorage(),
        compute_log_manager=NoOpComputeLogManager(),
        run_coordinator=DefaultRunCoordinator(),
        run_launcher=SyncInMemoryRunLauncher(),
    )
