"""A sync's date x engine tables fetched while the process is still importing Dagster (Dagster-free).

``visibility-sync run`` starts the fetches of its daily step first, in a background thread; the step
takes each (:meth:`HeadStart.take`) instead of making it: the same budget, listings and resume
journal, so the same rows, requests and errors. A step asked for anything else fetches for itself;
what no step took is removed when the head start closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from resources.api.access import ApiAccess
from resources.failures import failure_kind
from sync.discovery import CitationTargets, Discovery
from sync.fetching import PartitionedTable, fetch_partitioned
from sync.landing import FetchOutcome
from sync.planning import Cell
from sync.prefetch import StopSignal
from sync.resume import ResumeStore

#: How often a step waiting for a fetch looks at its own stop signal.
_WAIT_SECONDS = 0.2


@dataclass(frozen=True)
class Selection:
    """What the fetches are for; a step asking for anything else fetches for itself."""

    cells: frozenset[Cell]
    #: the brand filter (``visibility/brands``), in the run tag's order
    only: tuple[str, ...] = ()
    #: the run's citation targets (the settings' or its config's; None: none)
    targets: CitationTargets | None = None
    #: where the fetches journal their calls (``sync.resume``): the step's store must have this root
    resume_root: Path | None = None


@dataclass
class _Slot:
    """One table's fetch: running, fetched, failed, or never started (then the step fetches)."""

    store: ResumeStore | None
    done: threading.Event = field(default_factory=threading.Event)
    outcome: FetchOutcome | None = None
    error: BaseException | None = None
    taken: bool = False


class HeadStart:
    """The tables' fetches for one selection, one after another in a background thread."""

    def __init__(
        self,
        tables: Sequence[PartitionedTable],
        selection: Selection,
        api: ApiAccess,
        discovery: Discovery,
        on_progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.selection = selection
        self._tables = list(tables)
        self._api, self._discovery, self._on_progress = api, discovery, on_progress
        root = selection.resume_root
        self._slots = {t.spec.name: _Slot(ResumeStore(root) if root is not None else None) for t in tables}
        self._stop = threading.Event()
        self._handing = threading.Lock()  # a fetch is either taken by a step or removed by close
        self._thread = threading.Thread(target=self._fetch_all, name="visibility-head-start", daemon=True)

    def start(self) -> HeadStart:
        self._thread.start()
        return self

    def _fetch_all(self) -> None:
        for table in self._tables:
            slot = self._slots[table.spec.name]
            try:
                if not self._stop.is_set():
                    slot.outcome = self._fetch(table, slot)
            except BaseException as exc:  # raised at the step's take, in its thread
                slot.error = exc
                if failure_kind(exc).stops_the_sync:
                    self._stop.set()  # the later tables are left to the step, which stops first
            finally:
                slot.done.set()

    def _fetch(self, table: PartitionedTable, slot: _Slot) -> FetchOutcome:
        with self._api.get_client() as client:
            return fetch_partitioned(
                client,
                table,
                set(self.selection.cells),
                self.selection.only,
                self._on_progress,
                StopSignal(self._stop),
                self._discovery,
                self.selection.targets,
                resume=slot.store,
            )

    def take(
        self, table: str, selection: Selection, resume: ResumeStore | None, stop: StopSignal
    ) -> FetchOutcome | None:
        """The fetch of ``table`` made for ``selection`` (waiting for it), its journals handed to
        ``resume``; None when none was made for it (the caller fetches). A fetch that failed raises
        its error here."""
        slot = self._slots.get(table)
        if slot is None or slot.taken or selection != self.selection:
            return None
        while not slot.done.wait(_WAIT_SECONDS):
            stop.raise_if_set()
        with self._handing:
            if slot.taken:  # closed meanwhile: its fetch is gone
                return None
            slot.taken = True
        if resume is not None and slot.store is not None:
            resume.take_over(slot.store)
        if slot.error is not None:
            raise slot.error
        return slot.outcome

    def close(self) -> None:
        """Stop fetching and remove every fetch no step took (its journal stays for a re-run)."""
        self._stop.set()
        if self._thread.is_alive():
            self._api.cancel()  # a fetch waiting on the rate limit or a retry checks no stop signal
            self._thread.join()
        with self._handing:
            for slot in self._slots.values():
                if not slot.taken and slot.outcome is not None:
                    slot.outcome.spool.remove()
                slot.taken = True


@dataclass
class SyncSession:
    """What the runs of one sync share in a process: its listings, and the fetches the command line
    started ahead (None: each step fetches for itself). The code location makes one per run; the
    command line gives its runs one (``sync_session`` resource)."""

    discovery: Discovery = field(default_factory=Discovery)
    head_start: HeadStart | None = None
