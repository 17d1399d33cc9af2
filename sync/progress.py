"""A process-wide progress hook: the CLI shows each table's fetch while assets run in its process.

Assets call :func:`report` as the calls of a table's plan complete; it does nothing unless a listener
is installed (``pipelines/cli_progress.py``; the Dagster UI has its own display, fed by the step
logs). The unit is the request: each planned call is one request, and the further pages of a paged
call (and retries) are counted by the table's materialization (``requests_total``), which the command
line then shows in their place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Listener = Callable[[str, int, int], None]  # (table, planned requests done, planned requests)

_lock = threading.Lock()
_listeners: list[Listener] = []


def report(asset: str, done: int, total: int) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(asset, done, total)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)
