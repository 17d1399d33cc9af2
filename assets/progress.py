"""A process-wide progress hook: the CLI shows a progress bar while assets run in its process.

Assets call :func:`report`; it does nothing unless a listener is installed (the Dagster UI has its
own display, fed by the step logs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Listener = Callable[[str, int, int], None]  # (asset name, calls done, calls planned)

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
