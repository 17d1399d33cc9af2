"""DuckDB's memory budget for a handle's connections, and the one retry of a landing beyond it.

Without a budget DuckDB caches up to 80% of RAM, so a backfill's landing process would keep growing.
The budget must never fail a sync: a landing that does not fit is rolled back and retried once
without it. Budgeted connections checkpoint only at close, because an automatic checkpoint that
does not fit is fatal to the database instance while one at close leaves the writes in the WAL.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import duckdb

from resources.warehouse.contract import LOGGER_NAME, PartitionWrite, WriteResult, first_line
from resources.warehouse.sql import quote_literal
from resources.warehouse.write_checks import is_one_shot

log = logging.getLogger(LOGGER_NAME)

T = TypeVar("T")

#: budgeted connections checkpoint when they close, not after a commit (module doc)
_NO_AUTOCHECKPOINT = "1TB"

#: What DuckDB's errors say when memory ran out, whatever their class (checked case-insensitively).
_OUT_OF_MEMORY_MARKERS = (
    "out of memory",
    "failed to pin block",
    "could not allocate",
    "failed to allocate",
    "could not free up enough memory",
)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether DuckDB failed for want of memory, whatever the error's class (``OutOfMemoryException``,
    ``TransactionException`` at commit, a fatal error, ...): its message says so."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.Error) and any(marker in text for marker in _OUT_OF_MEMORY_MARKERS)


class MemoryBudget:
    """The ``memory_limit`` of one handle's connections (None: DuckDB's default), which a thread
    lifts while it retries a landing."""

    def __init__(self, limit: str | None) -> None:
        self.limit = limit
        self._local = threading.local()  # .lifted: this thread runs without the budget now

    @property
    def active(self) -> bool:
        """Whether this thread's connections run within the budget now."""
        return self.limit is not None and not getattr(self._local, "lifted", False)

    def apply(self, con: duckdb.DuckDBPyConnection) -> None:
        """Put ``con`` within the budget (and leave its checkpoint to its close: module doc)."""
        assert self.limit is not None
        con.execute(f"SET memory_limit = {quote_literal(self.limit)}").fetchall()
        con.execute(f"SET checkpoint_threshold = {quote_literal(_NO_AUTOCHECKPOINT)}").fetchall()

    @contextmanager
    def lifted(self, session: Callable[[], duckdb.DuckDBPyConnection | None]) -> Iterator[None]:
        """This thread's connections use DuckDB's default memory limit, the open session's
        (``session()``, asked again at the end: it may have been reopened) included."""
        con = session()
        self._local.lifted = True
        if con is not None:
            con.execute("RESET memory_limit").fetchall()
            con.execute("RESET checkpoint_threshold").fetchall()
        try:
            yield
        finally:
            self._local.lifted = False
            con = session()
            if con is not None and self.limit is not None:
                # DuckDB refuses a limit below what it holds now: the session then goes on without
                with contextlib.suppress(duckdb.OutOfMemoryException):
                    self.apply(con)

    def run_landing(
        self,
        table: str,
        writes: Iterable[PartitionWrite],
        land: Callable[[], list[WriteResult]],
        session: Callable[[], duckdb.DuckDBPyConnection | None],
    ) -> list[WriteResult]:
        """Run ``land``; within the budget, one that runs out of memory is run once more without it
        (``writes`` is then iterated a second time: a one-shot iterator is not retried)."""
        try:
            return land()
        except duckdb.Error as exc:  # rolled back: nothing of this landing was written
            if not (self.active and is_out_of_memory(exc)) or is_one_shot(writes):
                raise
            log.warning(
                "DuckDB landing of %s exceeded memory_limit=%s (%s: %s); rolled back whole, retrying "
                "it once without the budget",
                table,
                self.limit,
                type(exc).__name__,
                first_line(exc),
            )
        with self.lifted(session):
            return land()


def read_within(con: duckdb.DuckDBPyConnection, limit: str, read: Callable[[], T]) -> T:
    """``read()`` (a query: it changes nothing) within DuckDB's memory budget ``limit``, then DuckDB's
    default again; one that runs out of memory in it is run once more without it, with a warning.
    A check's query groups a whole table's keys: within the budget DuckDB spills instead of growing."""
    try:
        con.execute(f"SET memory_limit = {quote_literal(limit)}").fetchall()
    except duckdb.Error:  # DuckDB holds more than ``limit`` already: this read goes without it
        return read()
    try:
        return read()
    except duckdb.Error as exc:
        if not is_out_of_memory(exc):
            raise
        log.warning(
            "DuckDB query exceeded memory_limit=%s (%s: %s); running it once more without the budget",
            limit,
            type(exc).__name__,
            first_line(exc),
        )
    finally:  # a fatal error has closed the instance: nothing to reset, and its error surfaces
        with contextlib.suppress(duckdb.Error):
            con.execute("RESET memory_limit").fetchall()
    return read()
