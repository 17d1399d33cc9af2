"""The runs of one backfill share a table's fetch: one run fetches, every run lands its own cells."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from resources.api.stats import RequestStats
from sync.landing import FetchOutcome
from sync.planning import Cell, plan_competitor_trends
from sync.prefetch import FetchCancelled, StopSignal
from sync.shared_fetch import STALE_SECONDS, SharedFetches, sweep_stale
from sync.spool import DateSpool

D0 = dt.date(2026, 9, 1)
ENGINES = ("chatgpt", "claude")


def cells(n_days: int, engines: tuple[str, ...] = ENGINES) -> set[Cell]:
    return {(D0 + dt.timedelta(days=i), e) for i in range(n_days) for e in engines}


def fetched(directory: Path, target: set[Cell]) -> FetchOutcome:
    """A real spool of one row per cell, as a fetch of ``target`` would leave it."""
    spool = DateSpool.create("date", 7, name="t", parent=directory)
    rows = sorted(target)
    spool.append(pa.table({"date": [d for d, _ in rows], "engine": [e for _, e in rows]}))
    spool.close()
    return FetchOutcome(
        table="t",
        plan=plan_competitor_trends(target, [], ENGINES),
        spool=spool,
        brand_engines={},
        out_of_scope=[],
        stats=RequestStats(),
    )


def test_the_first_run_fetches_and_the_others_land_from_its_spool(tmp_path: Path) -> None:
    shared, target = SharedFetches(tmp_path, "backfill-1"), cells(10)
    with shared.claim("t") as claim:
        assert claim.outcome is None  # nobody fetched yet: this run does
        claim.publish(fetched(claim.directory, target))

    again = SharedFetches(tmp_path, "backfill-1")  # another run process of the same backfill
    with again.claim("t") as claim:
        assert claim.outcome is not None and claim.outcome.plan.cells == frozenset(target)
        assert claim.outcome.spool.rows == len(target)


def test_a_run_waits_while_another_fetches_then_reads_what_it_published(tmp_path: Path) -> None:
    target = cells(3)
    fetching, seen = threading.Event(), []

    def first() -> None:
        with SharedFetches(tmp_path, "b").claim("t") as claim:
            fetching.set()
            time.sleep(0.5)
            claim.publish(fetched(claim.directory, target))

    thread = threading.Thread(target=first)
    thread.start()
    assert fetching.wait(5)
    started = time.monotonic()
    with SharedFetches(tmp_path, "b").claim("t") as claim:
        seen.append(claim.outcome)
    thread.join()
    assert time.monotonic() - started >= 0.3  # it waited for the fetch instead of fetching again
    assert seen[0] is not None and seen[0].spool.rows == len(target)


def test_a_stopped_run_stops_waiting_for_another_runs_fetch(tmp_path: Path) -> None:
    stop = threading.Event()
    with SharedFetches(tmp_path, "b").claim("t"):
        stop.set()
        with pytest.raises(FetchCancelled), SharedFetches(tmp_path, "b").claim("t", StopSignal(stop)):
            pass


def test_a_fetch_that_died_unpublished_is_fetched_again_and_its_leftovers_removed(tmp_path: Path) -> None:
    shared = SharedFetches(tmp_path, "b")
    with shared.claim("t") as claim:
        leftover = DateSpool.create("date", 7, name="t", parent=claim.directory)  # a dead run's
    with shared.claim("t") as claim:
        assert claim.outcome is None
        assert not Path(leftover.directory).exists()


def test_the_table_fetch_is_removed_once_every_target_cell_has_landed(tmp_path: Path) -> None:
    shared, target = SharedFetches(tmp_path, "b"), cells(4)
    with shared.claim("t") as claim:
        claim.publish(fetched(claim.directory, target))
    chatgpt, claude = cells(4, ("chatgpt",)), cells(4, ("claude",))

    assert not shared.landed("t", "run-1", chatgpt, target)
    assert (tmp_path / "b" / "t").exists()
    assert shared.landed("t", "run-2", claude, target)
    assert not (tmp_path / "b").exists()


def test_directories_of_backfills_untouched_for_a_day_are_swept(tmp_path: Path) -> None:
    old, fresh = tmp_path / "old", tmp_path / "fresh"
    old.mkdir(), fresh.mkdir()
    long_ago = time.time() - STALE_SECONDS - 60
    os.utime(old, (long_ago, long_ago))

    assert sweep_stale(tmp_path) == [old]
    assert fresh.exists() and not old.exists()
