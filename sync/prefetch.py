"""Fetch the next table while the current one lands, so the API's rate budget never idles on a write.

``fetch_ahead`` runs the fetches one after the other in a background thread and hands each result to
the caller in order; the caller lands it while the next fetch goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class FetchCancelled(Exception):
    """Raised inside a fetch when the consumer stopped: nobody will use its result."""


class StopSignal:
    """Read-only view of the consumer's stop request, checked by fetches between calls."""

    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def raise_if_set(self) -> None:
        if self._event.is_set():
            raise FetchCancelled("the run stopped before this fetch ended")

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or raise :class:`FetchCancelled` as soon as the stop is requested."""
        if self._event.wait(seconds):
            self.raise_if_set()


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
    stop = threading.Event()
    signal = StopSignal(stop)

    def run(item: T) -> R:
        signal.raise_if_set()
        try:
            return fetch(item, signal)
        except BaseException:
            stop.set()  # no later item is fetched
            raise

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="visibility-fetch-ahead")
    futures = [pool.submit(run, item) for item in items]
    yielded = 0
    try:
        for item, future in zip(items, futures, strict=True):
            result = future.result()
            yielded += 1
            yield item, result
    finally:
        stop.set()
        if on_stop is not None and any(f.running() for f in futures):
            on_stop()
        pool.shutdown(cancel_futures=True)
        for future in futures[yielded:]:
            if not future.cancelled() and future.exception() is None:
                discard(future.result())
