"""The reliability suite's quick scenarios (``tests/reliability/suite.py``) as CI tests.

Each test asserts what the issue "Reliability: nothing half-landed, nothing left behind, fail fast
and say why" asks for, through the real CLI as a process against the real sandbox (and a rewriting
proxy), into real DuckDB files (the full suite, ``tests/reliability/suite.py``, adds Postgres); a failure
lists what the suite observed. The tests share one harness per module (per xdist worker): one
sandbox and the fault-free reference runs every scenario compares with. About 2.5 minutes with
``-n 2`` on the shared 2-core machine.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from tests.reliability import suite as R

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def harness() -> Iterator[R.Harness]:
    config = R.SuiteConfig.quick_config(key_runs=("success_echo", "fail_500_echo", "fail_400_tail_echo"))
    with R.Harness(config) as h:
        yield h


def assert_passed(results: Sequence[R.Result]) -> None:
    """Fail with what the suite observed for every scenario that did not pass."""
    failed = [r for r in results if r.passed is not True]
    if failed:
        pytest.fail(
            "\n".join(
                f"{r.scenario} on {r.backend}: {r.verdict}\n  - " + "\n  - ".join(r.observed) for r in failed
            ),
            pytrace=False,
        )


def test_a_sync_under_the_hostile_profile_lands_what_a_clean_sync_lands(harness: R.Harness) -> None:
    assert_passed(R.scenario_soak(harness, "duckdb"))


def test_a_killed_sync_leaves_no_process_and_no_torn_table_and_a_rerun_converges(
    harness: R.Harness,
) -> None:
    assert_passed(R.scenario_sigkill(harness, "duckdb"))


def test_two_syncs_at_once_both_land_without_duplicate_keys(harness: R.Harness) -> None:
    assert_passed(R.scenario_overlap(harness, "duckdb"))


def test_the_key_is_written_nowhere_even_when_the_service_echoes_it(harness: R.Harness) -> None:
    assert_passed(R.scenario_keys(harness, "duckdb"))


@pytest.mark.parametrize("kind", R.QUICK_BAD_KINDS)
def test_a_bad_response_fails_clearly_or_lands_completely_never_partially(
    harness: R.Harness, kind: str
) -> None:
    assert_passed(R.scenario_bad(harness, "duckdb", [kind]))


def test_check_honours_the_retry_deadline_and_a_start_date_before_any_history_is_refused(
    harness: R.Harness,
) -> None:
    assert_passed(R.scenario_limits(harness, "duckdb"))
