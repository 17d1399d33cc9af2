"""Independent calls run on a bounded pool, results in input order, stopped by the first failure."""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Skipped(Exception):
    """A call not started because an earlier one failed."""


def map_concurrent(fn: Callable[[T], R], items: Iterable[T], max_workers: int) -> Iterator[R]:
    """Run independent calls (mentions of many prompts) concurrently, yielding results in input order.

    After the first failure no new call starts, and the first error in input order is raised once the
    calls in flight end. The pool only supplies callers: the shared budget decides how many requests
    are in flight. ``16 * max_workers`` calls are queued ahead of the oldest unfinished one, so a slow
    call (a long backoff) does not idle the other workers.
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

    iterator = iter(items)
    with ThreadPoolExecutor(max_workers, thread_name_prefix="visibility-api") as pool:
        pending: deque[Future[R]] = deque(
            pool.submit(call, item) for item in itertools.islice(iterator, 16 * max_workers)
        )
        try:
            while pending:
                try:
                    result = pending.popleft().result()
                except _Skipped:
                    continue
                if not failed.is_set():
                    pending.extend(pool.submit(call, item) for item in itertools.islice(iterator, 1))
                yield result
        finally:  # an error, or the caller stopped early: what has not started never will
            for future in pending:
                future.cancel()
