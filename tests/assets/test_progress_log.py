"""The sync step's progress lines in the run's log: each is an event Dagster stores in the fetching
thread, so a table fetched in seconds logs none, and a long fetch one per further tenth, spaced.

(No ``from __future__ import annotations``: Dagster reads the asset's ``context`` annotation as a class.)
"""

from pathlib import Path
from types import SimpleNamespace

import pytest
from dagster import AssetExecutionContext, asset, instance_for_test, materialize

from assets import builders
from sync.progress import NO_PROGRESS


def progress_lines(tmp_path: Path, seconds_per_call: float, calls: int = 100) -> list[str]:
    """The run-log lines of one table's fetch of ``calls`` calls, each taking ``seconds_per_call``."""

    @asset
    def fetched(context: AssetExecutionContext) -> None:
        clock = SimpleNamespace(now=0.0)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(builders, "time", SimpleNamespace(monotonic=lambda: clock.now))
            on_progress = builders._progress(context, NO_PROGRESS)
            for done in range(1, calls + 1):
                clock.now += seconds_per_call
                on_progress("prompt_mentions", done, calls)

    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = materialize([fetched], instance=instance)
        return [
            record.user_message
            for record in instance.all_logs(result.run_id)
            if "calls done" in record.user_message
        ]


def test_a_table_fetched_in_seconds_writes_no_progress_event_to_the_run_log(tmp_path: Path) -> None:
    assert progress_lines(tmp_path, seconds_per_call=0.05) == []  # 5 s in all


def test_a_long_fetch_logs_its_progress_at_most_every_interval(tmp_path: Path) -> None:
    lines = progress_lines(tmp_path, seconds_per_call=1.0)  # 100 s in all

    assert lines[0] == "prompt_mentions: 20/100 calls done"  # 10 s after its first tenth
    assert 7 <= len(lines) <= 9
