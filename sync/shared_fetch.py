"""One fetch per backfill, however many runs Dagster splits it into (Dagster-free).

Dagster launches a backfill of date x engine partitions as one run per key of the smaller dimension
(one per engine for a long range, one per day for a short one), whatever the backfill policy. Each
run fetching its own cells would ask the API for the same widest windows again: a mentions call
per prompt *per run*. Instead, the runs of one backfill share a directory:

* the first run to reach a table (an exclusive file lock) fetches the cells of the *whole*
  backfill for it into a spool in that directory and publishes the outcome;
* every run then lands only its own cells from the published spool;
* the run that lands the last cells removes the table's directory.

A run that dies while fetching publishes nothing: the next run to take the lock fetches again. A
directory whose backfill never finished (cancelled) is swept after a day. The lock is ``flock``: the
runs must share a file system (Dagster's default and queued launchers on one machine do; on
Kubernetes, point ``root`` at a shared volume or each run fetches its own cells, which is correct
but costs the requests again).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pickle
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sync.landing import FetchOutcome
from sync.planning import Cell
from sync.prefetch import StopSignal

#: A backfill's directory untouched this long is left over (its backfill was cancelled or died).
STALE_SECONDS = 24 * 3600
#: How often a run waiting for another run's fetch looks at the lock again.
POLL_SECONDS = 0.2

OUTCOME_FILE = "outcome.pickle"
LANDED_DIR = "landed"


def _cells_to_json(cells: set[Cell] | frozenset[Cell]) -> list[list[str]]:
    return sorted([day.isoformat(), engine] for day, engine in cells)


def _cells_from_json(rows: list[list[str]]) -> set[Cell]:
    import datetime as dt

    return {(dt.date.fromisoformat(day), engine) for day, engine in rows}


@dataclass
class Claim:
    """A table's shared fetch while this run holds its lock: published already, or this run's to do."""

    directory: Path
    outcome: FetchOutcome | None

    def publish(self, outcome: FetchOutcome) -> None:
        """Make ``outcome`` (its spool inside :attr:`directory`) the table's fetch for every run."""
        outcome.spool.close()
        tmp = self.directory / f".{OUTCOME_FILE}.{os.getpid()}"
        tmp.write_bytes(pickle.dumps(outcome))
        tmp.replace(self.directory / OUTCOME_FILE)
        self.outcome = outcome


class SharedFetches:
    """The shared fetches of one backfill (``scope_id``) under ``root``."""

    def __init__(self, root: Path, scope_id: str) -> None:
        self.root = Path(root)
        self.scope_id = scope_id
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in scope_id)
        self.directory = self.root / safe

    def _table_dir(self, table: str) -> Path:
        return self.directory / table

    @contextlib.contextmanager
    def claim(self, table: str, stop: StopSignal | None = None) -> Iterator[Claim]:
        """Hold the table's lock: yields the published outcome, or ``None`` for this run to fetch.

        Waits while another run of the backfill fetches the table (polling, so ``stop`` ends the wait).
        Whatever an unpublished earlier attempt left behind (a dead run's partial spool) is removed.
        """
        sweep_stale(self.root, keep=self.directory)
        directory = self._table_dir(table)
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory.parent / f"{table}.lock", "a+b") as lock:
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if stop is not None:
                        stop.raise_if_set()
                    time.sleep(POLL_SECONDS)
            try:
                directory.mkdir(parents=True, exist_ok=True)  # a finished backfill may have removed it
                outcome = _load(directory)
                if outcome is None:
                    for leftover in directory.iterdir():
                        if leftover.name != LANDED_DIR:
                            shutil.rmtree(leftover, ignore_errors=True)
                os.utime(self.directory)
                yield Claim(directory, outcome)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def landed(self, table: str, run_id: str, cells: set[Cell], target: set[Cell]) -> bool:
        """Record this run's landed cells; removes the table's fetch once ``target`` has all landed."""
        directory = self._table_dir(table)
        marks = directory / LANDED_DIR
        if not directory.exists():
            return True
        marks.mkdir(exist_ok=True)
        (marks / f"{run_id}.json").write_text(json.dumps(_cells_to_json(cells)))
        done: set[Cell] = set()
        for mark in marks.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                done |= _cells_from_json(json.loads(mark.read_text()))
        if target <= done:
            shutil.rmtree(directory, ignore_errors=True)
            with contextlib.suppress(OSError):
                (self.directory / f"{table}.lock").unlink()
                self.directory.rmdir()  # only when no other table is left
            return True
        return False


def _load(directory: Path) -> FetchOutcome | None:
    path = directory / OUTCOME_FILE
    if not path.exists():
        return None
    try:
        outcome = pickle.loads(path.read_bytes())  # noqa: S301 - written by a run of this backfill
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    if not isinstance(outcome, FetchOutcome) or not outcome.spool.exists():
        return None
    return outcome


def sweep_stale(root: Path, keep: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove backfill directories untouched for a day (their backfill was cancelled or failed)."""
    now = time.time() if now is None else now
    removed: list[Path] = []
    if not root.exists():
        return removed
    for path in root.iterdir():
        if path == keep or not path.is_dir():
            continue
        try:
            if now - path.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        except OSError:
            continue
    return removed
