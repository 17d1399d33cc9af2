"""Independent calls run on a thread pool, results in input order, stopped by the first failure."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Skipped(Exception):
    """A call not started because an earlier one failed."""


def map_concurrent(fn: Callable[[T], R], items: Iterable[T], max_workers: int) -> Iterator[R]:
    """Run independent calls (mentions of many prompts) concurrently, yielding results in input order.

    After the first failure no new call starts, and the first error in input order is raised once the
    calls in flight end. The pool only supplies callers: the shared budget decides how many requests
    are in flight.
    """
    failed = threading.Event()

    def call(item: T) -> R:
        if failed.is_set():
            raise _Skipped
        try:
            return fn(item)
        except BaseException:
            failed.set()
            raise

    with ThreadPoolExecutor(max_workers, thread_name_prefix="visibility-api") as pool:
        futures = [pool.submit(call, item) for item in items]
        try:
            for future in futures:
                try:
                    yield future.result()
                except _Skipped:
                    continue
        finally:  # an error, or the caller stopped early: what has not started never will
            for future in futures:
                future.cancel()
