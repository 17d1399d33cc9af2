"""A failed Dagster run re-executed from failure asks only the calls its failed attempt did not complete.

The project's daily job, run with Dagster's own ``execute_job`` into a recorded instance (a real
storage directory) against the real sandbox, into a real DuckDB file. The first attempt fails: the
sandbox answers 500 to every answers request. Re-executed from failure once the service is healthy
(``ReexecutionOptions.from_failure``), its step asks the answers again, and none of the calls of the
tables it had fetched (competitor trends: only its asset check's); the warehouse then equals a clean
run's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest
from dagster import DagsterInstance, JobDefinition, ReexecutionOptions, execute_job, reconstructable

from pipelines.jobs import DAILY_JOB
from pipelines.schedules import range_tags
from resources.api.endpoints import ENGINES_WITH_ALL
from sandbox.testing import SandboxHandle
from sync.resume import RESUME_DIR
from tests.endpoint_keys import Endpoint
from tests.fixtures_sandbox import SANDBOX_TODAY
from tests.processes.helpers import sync_env
from tests.processes.warehouse_rows import rows_of

pytestmark = pytest.mark.slow

FIRST, LAST = SANDBOX_TODAY - dt.timedelta(days=3), SANDBOX_TODAY - dt.timedelta(days=1)
TAGS = range_tags(FIRST, LAST, (ENGINES_WITH_ALL[0], ENGINES_WITH_ALL[-1]))
FETCHED_FIRST = (
    Endpoint.MENTIONS,
    Endpoint.CITATION_TRENDS,
    Endpoint.CITATION_URLS,
)


def daily_job() -> JobDefinition:
    """The job as the code location builds it, from this process's settings (a reconstructable target)."""
    from pipelines.syncs import sync_definitions
    from settings import load_settings

    return sync_definitions(load_settings()).resolve_job_def(DAILY_JOB)


def served(sandbox: SandboxHandle) -> dict[str, int]:
    return {endpoint: sum(statuses.values()) for endpoint, statuses in sandbox.stats().items()}


def test_a_failed_run_reexecuted_from_failure_asks_only_what_it_had_not_fetched(
    sandbox_factory: Callable[..., SandboxHandle], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = sandbox_factory()
    for name, value in sync_env(
        sandbox, tmp_path / "resumed.duckdb", VISIBILITY_RETRY_DEADLINE_SECONDS="2"
    ).items():
        if name.startswith("VISIBILITY_"):
            monkeypatch.setenv(name, value)
    from dagster import instance_for_test

    (tmp_path / "home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        sandbox.configure(fail_endpoints=[Endpoint.ANSWERS.value])
        with execute_job(reconstructable(daily_job), instance, tags=TAGS) as failed:
            assert not failed.success
        journals = Path(instance.storage_directory()) / RESUME_DIR
        assert any(journals.iterdir())  # what the failed attempt fetched is kept

        sandbox.configure(fail_endpoints=[])
        sandbox.reset_stats()
        options = ReexecutionOptions.from_failure(failed.run_id, instance)
        with execute_job(
            reconstructable(daily_job), instance, tags=TAGS, reexecution_options=options
        ) as again:
            assert again.success
        asked = served(sandbox)
        assert not journals.exists() or not any(journals.iterdir())  # landed: the journals are gone

    # the reference: a clean run into its own warehouse (Dagster keeps the reconstructed job loaded)
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", f"duckdb:///{tmp_path / 'clean.duckdb'}")
    sandbox.reset_stats()
    with DagsterInstance.ephemeral() as throwaway:
        assert daily_job().execute_in_process(instance=throwaway, tags=TAGS).success
    clean = served(sandbox)

    assert all(asked.get(e.value, 0) == 0 for e in FETCHED_FIRST), f"{asked} {clean}"
    assert asked[Endpoint.ANSWERS.value] == clean[Endpoint.ANSWERS.value]
    trends = Endpoint.COMPETITOR_TRENDS.value  # the step's asset check asks the API's totals again
    assert asked[trends] < clean[trends], (asked[trends], clean[trends])
    assert rows_of(tmp_path / "resumed.duckdb") == rows_of(tmp_path / "clean.duckdb")
