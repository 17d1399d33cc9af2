"""Waiting for a DuckDB file: one writer process at a time, and one write at a time per process.

A second writer (process or thread) waits up to ``lock_timeout_seconds`` instead of failing, with a
WARNING naming the file and its holder while it waits.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import duckdb
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from resources.warehouse.contract import LOGGER_NAME, WarehouseLockTimeout, first_line

log = logging.getLogger(LOGGER_NAME)

#: A wait for the file lock is first reported after this long, then about this often.
LOCK_WAIT_FIRST_NOTICE_SECONDS = 1.0
LOCK_WAIT_NOTICE_SECONDS = 5.0
#: Attempts to open a locked file are up to this far apart at first, doubling up to the most (full jitter).
LOCK_RETRY_FIRST_SECONDS = 0.02
LOCK_RETRY_MOST_SECONDS = 0.25

#: How long after its last change an invalid file may still be another process's creation in progress.
CREATION_SECONDS = 5.0


def is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def is_being_created(exc: Exception, path: Path) -> bool:
    """Another process may be creating the file right now (two processes opening a new file race on
    its creation): DuckDB calls it invalid, but it changed moments ago. Its size says nothing: by the
    time it is looked at, the creation may have finished. An older invalid file fails at once."""
    if "not a valid DuckDB database file" not in str(exc):
        return False
    try:
        return time.time() - path.stat().st_mtime < CREATION_SECONDS
    except OSError:
        return True  # gone again: the next attempt creates it


_HOLDER_RE = re.compile(
    r"Conflicting lock is held in (?P<process>.+?) \(PID (?P<pid>\d+)\)(?: by user (?P<user>\S+?))?[.\s]"
)


def lock_holder(message: str) -> str:
    """Who holds the file lock, as DuckDB's lock error says: ``/usr/bin/python3 (PID 4242)``."""
    match = _HOLDER_RE.search(message + " ")
    if match is None:
        return "another process"
    holder = f"{match['process']} (PID {match['pid']})"
    return f"{holder}, user {match['user']}" if match["user"] else holder


class _WaitNotices:
    """The WARNING lines of one wait: the first after a second, then every few seconds."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.started = time.monotonic()
        self.next_notice = self.started + LOCK_WAIT_FIRST_NOTICE_SECONDS

    def waiting(self, holder: str) -> None:
        now = time.monotonic()
        if now < self.next_notice:
            return
        self.next_notice = now + LOCK_WAIT_NOTICE_SECONDS
        log.warning(
            "waiting for the DuckDB lock on %s held by %s, up to %.0f more s (lock_timeout_seconds=%g)",
            self.path,
            holder,
            max(self.timeout - (now - self.started), 0.0),
            self.timeout,
        )


def connect_with_lock_wait(path: Path, *, read_only: bool, timeout: float) -> duckdb.DuckDBPyConnection:
    """Open ``path``, retrying while another process holds the file lock, up to ``timeout`` seconds."""
    notices = _WaitNotices(path, timeout)
    backoff = wait_random_exponential(multiplier=LOCK_RETRY_FIRST_SECONDS, max=LOCK_RETRY_MOST_SECONDS)

    def wait(state: RetryCallState) -> float:  # never past the deadline: the last attempt is at it
        return min(backoff(state), max(timeout - (state.seconds_since_start or 0.0), 0.0))

    def say_who_holds_it(state: RetryCallState) -> None:
        notices.waiting(lock_holder(str(_failure(state))))

    def give_up(state: RetryCallState) -> NoReturn:
        exc = _failure(state)
        raise WarehouseLockTimeout(
            f"DuckDB file {path} stayed locked by {lock_holder(str(exc))} for {timeout:g}s "
            f"(lock_timeout_seconds); DuckDB said: {first_line(exc)}"
        ) from exc

    retrying = Retrying(
        retry=retry_if_exception(
            lambda exc: (
                isinstance(exc, duckdb.IOException) and (is_lock_error(exc) or is_being_created(exc, path))
            )
        ),
        stop=stop_after_delay(timeout),
        wait=wait,
        before_sleep=say_who_holds_it,
        retry_error_callback=give_up,
    )
    return retrying(duckdb.connect, str(path), read_only=read_only)


def _failure(state: RetryCallState) -> BaseException:
    """The exception of the attempt that just failed."""
    assert state.outcome is not None
    exc = state.outcome.exception()
    assert exc is not None
    return exc


# One DuckDB database instance per file per process: writes from threads of one process take turns.
# Reentrant: a thread holding a session may still write through another handle on the same file.
_PROCESS_LOCKS: dict[str, threading.RLock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


@contextmanager
def hold_process_lock(path: Path, *, timeout: float) -> Iterator[None]:
    """Hold this process's lock on ``path`` (another thread's write or session holds it meanwhile),
    waiting up to ``timeout`` seconds and saying so while waiting, like the wait for another process."""
    with _PROCESS_LOCKS_GUARD:
        lock = _PROCESS_LOCKS.setdefault(str(path), threading.RLock())
    _acquire(lock, path, timeout)
    try:
        yield
    finally:
        lock.release()


def _acquire(lock: threading.RLock, path: Path, timeout: float) -> None:
    if lock.acquire(blocking=False):
        return
    notices = _WaitNotices(path, timeout)
    holder = f"another write of this process (PID {os.getpid()})"
    deadline = notices.started + timeout
    while not lock.acquire(timeout=max(min(deadline - time.monotonic(), 0.5), 0.0)):
        if time.monotonic() >= deadline:
            raise WarehouseLockTimeout(
                f"DuckDB file {path} stayed busy with {holder} for {timeout:g}s (lock_timeout_seconds)"
            )
        notices.waiting(holder)
