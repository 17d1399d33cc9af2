"""What a command sets up before it runs a Dagster job: the warehouse proven to take writes, and the
Dagster instance that records the runs (``DAGSTER_HOME``'s), whose full disk is one line naming it."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from resources.failures import FailureKind
from settings import ConfigError, Settings

#: What SQLite says when it cannot grow a database or its journal (a full disk).
_SQLITE_FULL = ("database or disk is full", "disk I/O error")
#: What Dagster writes to stderr itself, with the SQL statement and the event's JSON, when it cannot
#: record an event; the run then fails with the same error, which the command reports in one line.
_EVENT_LOG_WRITE = "Exception while writing logger call to event log"


class DagsterHomeFullError(Exception):
    """Dagster's SQLite storage under ``DAGSTER_HOME`` could not be written (its disk is full)."""

    failure_kind = FailureKind.FAILED


def dagster_home_full(exc: BaseException) -> DagsterHomeFullError | None:
    """The one-line error of a run whose Dagster storage under ``DAGSTER_HOME`` could not be written,
    when ``exc`` (or its cause) is SQLite's full-disk error; else None."""
    home = os.environ.get("DAGSTER_HOME")
    seen: set[int] = set()
    current: BaseException | None = exc
    while home and current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        said = next((t for t in _SQLITE_FULL if t in text), None)
        if type(current).__name__ == "OperationalError" and said:
            free = shutil.disk_usage(home).free // 2**20 if Path(home).exists() else 0
            return DagsterHomeFullError(
                f"Dagster could not record the run under DAGSTER_HOME {home} (SQLite: {said}; {free} MiB "
                "free on its disk): free space there or set DAGSTER_HOME to a folder on a larger disk; "
                "every table whose landing had not committed keeps its previous rows"
            )
        current = current.__cause__ or current.__context__
    return None


class _WithoutEventLogWrites:
    """A stream passing everything on but Dagster's own report of an event it could not record."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return len(text) if text.startswith(_EVENT_LOG_WRITE) else self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def event_log_writes_unprinted() -> Iterator[None]:
    """Leave out of stderr what Dagster prints when it cannot record an event (the SQL statement and
    the event's JSON): the run fails with that error, reported in one line."""
    stream = sys.stderr
    sys.stderr = _WithoutEventLogWrites(stream)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stderr = stream


def command_instance() -> Any:
    """The instance of a command's runs: ``DAGSTER_HOME``'s, created under a file lock (two commands
    started together on a new home would otherwise race to create Dagster's SQLite tables), else an
    ephemeral one."""
    from dagster import DagsterInstance

    from sync.private_dir import lock_file, unlock

    if not os.environ.get("DAGSTER_HOME"):
        return DagsterInstance.ephemeral()
    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    lock = lock_file(home / ".visibility-sync.lock", wait=True)
    assert lock is not None
    try:
        instance = DagsterInstance.get()
        instance.get_runs(limit=1)  # every storage created before the lock is let go
        return instance
    finally:
        unlock(lock)


def check_warehouse(settings: Settings) -> None:
    """Prove the warehouse takes writes before the first request spends the API's rate budget."""
    from urllib.parse import urlsplit

    from resources.warehouse.contract import WarehouseConfigError
    from resources.warehouse.urls import redact_url, warehouse_from_url

    try:
        with warehouse_from_url(settings.warehouse_url, settings.schema_name) as warehouse:
            warehouse.check_connection()
    except (ConfigError, WarehouseConfigError):
        raise  # already names the setting
    except Exception as exc:
        detail = (str(exc).strip().splitlines() or [""])[0]
        password = urlsplit(settings.warehouse_url).password
        if password:
            detail = detail.replace(password, "***")
        raise ConfigError(
            f"VISIBILITY_WAREHOUSE {redact_url(settings.warehouse_url)} cannot be reached or written "
            f"({type(exc).__name__}: {detail}); nothing was requested from the API"
        ) from None
