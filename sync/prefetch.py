"""Fetch the next table while the current one lands, so the API's rate budget never idles on a write.

``fetch_ahead`` runs the fetches one after the other in a background thread and hands each result to
the caller in order; the caller lands it while the next fetch goes on.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class FetchCancelled(Exception):
    """Raised inside a fetch when the consumer stopped: nobody will use its result."""


class StopSignal:
    """Read-only view of the consumer's stop request, checked by fetches between calls."""

    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def is_set(self) -> bool:
        return self._event.is_set()

    def raise_if_set(self) -> None:
        if self._event.is_set():
            raise FetchCancelled("the run stopped before this fetch ended")

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or raise :class:`FetchCancelled` as soon as the stop is requested."""
        if self._event.wait(seconds):
            self.raise_if_set()


class _Fetched(Generic[T, R]):
    __slots__ = ("error", "item", "result")

    def __init__(self, item: T, result: R | None, error: BaseException | None) -> None:
        self.item, self.result, self.error = item, result, error


def fetch_ahead(
    items: Sequence[T],
    fetch: Callable[[T, StopSignal], R],
    discard: Callable[[R], None],
    on_stop: Callable[[], None] | None = None,
) -> Iterator[tuple[T, R]]:
    """``(item, fetch(item))`` in order, the fetches running ahead in one background thread.

    A fetch error is raised here, at that item's turn, after the items before it were yielded; no
    later item is fetched. When the caller stops early (an error, or closing the generator), the
    running fetch is asked to stop (``StopSignal``), and every result fetched but not yielded goes to
    ``discard`` (its spool is removed), so nothing is left behind. ``on_stop`` is called when the
    caller stops while a fetch still runs, before waiting for it: a fetch sleeping in a retry or a
    rate-limit wait checks no stop signal, so the caller cancels it there (an interrupted run).
    """
    fetched: queue.Queue[_Fetched[T, R]] = queue.Queue()
    stop = threading.Event()
    signal = StopSignal(stop)

    def produce() -> None:
        for item in items:
            if stop.is_set():
                return
            try:
                fetched.put(_Fetched(item, fetch(item, signal), None))
            except BaseException as exc:  # handed to the consumer, raised in its thread
                fetched.put(_Fetched(item, None, exc))
                return

    thread = threading.Thread(target=produce, name="visibility-fetch-ahead", daemon=True)
    thread.start()
    try:
        for _ in items:
            entry = fetched.get()
            if entry.error is not None:
                raise entry.error
            assert entry.result is not None
            yield entry.item, entry.result
    finally:
        stop.set()
        if on_stop is not None and thread.is_alive():
            on_stop()
        thread.join()
        while not fetched.empty():
            left = fetched.get_nowait()
            if left.result is not None:
                discard(left.result)
