"""Independent calls run on a bounded pool, results in input order, stopped by the first failure."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Skipped(Exception):
    """A ``map_concurrent`` call not started because an earlier one failed."""


#: The end of ``map_concurrent``'s input.
_END: Any = object()


def map_concurrent(fn: Callable[[T], R], items: Iterable[T], max_workers: int) -> Iterator[R]:
    """Run independent calls (mentions of many prompts) concurrently within the budget.

    Yields results in input order; after the first failure no new call starts, and the first
    error in input order is raised once the calls in flight end. The pool only supplies callers:
    how many requests are really in flight is decided by the shared budget (AIMD). Up to
    ``16 * max_workers`` calls are queued ahead of the oldest unfinished one, so a slow call
    (a long backoff) does not idle the other workers.
    """
    window = 16 * max_workers
    failed = threading.Event()

    def call(item: T) -> R:
        if failed.is_set():
            raise _Skipped
        try:
            return fn(item)
        except BaseException:
            failed.set()
            raise

    iterator = iter(items)
    pending: deque[Future[R]] = deque()
    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="visibility-api")
    try:
        while True:
            while not failed.is_set() and len(pending) < window:
                item = next(iterator, _END)
                if item is _END:
                    break
                pending.append(pool.submit(call, item))  # type: ignore[arg-type]
            if not pending:
                return
            try:
                result = pending.popleft().result()
            except _Skipped:
                continue
            except BaseException:
                for future in pending:
                    future.cancel()
                wait_futures(pending)
                raise
            yield result
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
