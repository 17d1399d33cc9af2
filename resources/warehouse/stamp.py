"""Stamping writes: the run id and the ``_loaded_at`` time every row of one write carries, each
stamp later than every earlier one of this process."""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass

from resources.warehouse.nul import NUL


@dataclass(frozen=True)
class WriteStamp:
    """The values of the writer-owned columns for one write: one timestamp for every row."""

    run_id: str
    loaded_at: dt.datetime

    @classmethod
    def now(cls, run_id: str) -> WriteStamp:
        """A stamp strictly later than every earlier stamp of this process (engines may use it to
        tell the rows of this write from older ones)."""
        global _last_stamp
        check_run_id(run_id)
        with _stamp_lock:
            now = dt.datetime.now(dt.UTC)
            if _last_stamp is not None and now <= _last_stamp:
                now = _last_stamp + dt.timedelta(microseconds=1)
            _last_stamp = now
        return cls(run_id, now)


_stamp_lock = threading.Lock()
_last_stamp: dt.datetime | None = None


def check_run_id(run_id: str) -> None:
    if not isinstance(run_id, str) or not run_id or NUL in run_id:
        raise ValueError("run_id must be a non-empty string without NUL")
