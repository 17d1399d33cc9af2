"""The runs of ``visibility-sync run`` (and ``demo``) as runs of the code location.

A run executed in this process is recorded without a code location, and the UI re-executes a run
only through its location; so :class:`CodeLocationRuns` records :data:`CODE_LOCATION` on it, as
``dagster run migrate-repository`` does. No public API creates that origin, so it is given in
Dagster's serialized form (``deserialize_value``), naming the location alone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from dagster import DagsterInstance, deserialize_value

from pipelines.orphans import free_pool_slots

#: ``location_name`` of workspace.yaml and deploy/ (tests/pipelines/test_cli_runs.py holds them to it).
CODE_LOCATION = "visibility"
#: The repository a ``Definitions`` object makes.
REPOSITORY = "__repository__"

log = logging.getLogger("visibility.cli")


def code_location_origin(job_name: str) -> Any:
    """``job_name`` of :data:`CODE_LOCATION`, as a run records where it comes from."""
    return deserialize_value(
        json.dumps(
            {
                "__class__": "ExternalPipelineOrigin",
                "external_repository_origin": {
                    "__class__": "ExternalRepositoryOrigin",
                    "repository_location_origin": {
                        "__class__": "RegisteredRepositoryLocationOrigin",
                        "location_name": CODE_LOCATION,
                    },
                    "repository_name": REPOSITORY,
                },
                "pipeline_name": job_name,
            }
        )
    )


class CodeLocationRuns:
    """The runs one command executes in ``instance``, each recorded as a run of the code location."""

    def __init__(self, instance: DagsterInstance) -> None:
        self.instance = instance

    def watch(self, run_id: str) -> None:
        """Record the code location on run ``run_id`` as soon as Dagster has stored it (its first
        event), so a run killed mid-way can be re-executed too."""
        self.instance.add_event_listener(run_id, self._on_first_event(run_id))

    def _on_first_event(self, run_id: str) -> Callable[[object], None]:
        done = False

        def adopt(_: object) -> None:
            nonlocal done
            if done:
                return
            run = self.instance.get_run_by_id(run_id)
            if run is None:
                return
            done = True
            if run.remote_job_origin is not None:
                return
            try:
                self.instance.run_storage.replace_job_origin(run, code_location_origin(run.job_name))
            except Exception as exc:  # a run storage without it: the sync goes on, re-execution won't
                log.warning("run %s not recorded as a run of the code location: %r", run_id, exc)

        return adopt

    def interrupted(self, run_id: str) -> None:
        """End run ``run_id`` as canceled unless Dagster recorded its end, freeing its pool slots."""
        run = self.instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return
        self.instance.report_run_canceled(
            run,
            f"visibility-sync was stopped (Ctrl+C or SIGTERM) while the run was {run.status.value}; "
            "tables whose landing had not committed keep their previous rows. Re-execute the run, or "
            "re-run the command, to complete it",
        )
        free_pool_slots(self.instance, run_id)
