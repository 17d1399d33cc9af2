"""``map_concurrent``: input order, bounded work ahead, and a prompt stop on the first failure."""

from __future__ import annotations

import threading
import time

import pytest

from resources.api.client import VisibilityClient


@pytest.fixture
def api() -> VisibilityClient:
    # No request is sent by these tests: map_concurrent only schedules the callables it is given.
    return VisibilityClient("http://127.0.0.1:9", "vk_test_key_0123456789", max_concurrency=4)


def test_results_come_in_input_order_whatever_order_calls_finish_in(api: VisibilityClient) -> None:
    def slow_first(n: int) -> int:
        time.sleep(0.05 if n == 0 else 0.0)
        return n * n

    assert list(api.map_concurrent(slow_first, range(20))) == [n * n for n in range(20)]


def test_calls_run_at_once_up_to_the_concurrency(api: VisibilityClient) -> None:
    barrier = threading.Barrier(4, timeout=5)  # only passes if 4 calls are in flight together
    assert list(api.map_concurrent(lambda n: barrier.wait() >= 0, range(8))) == [True] * 8


def test_first_failure_stops_new_calls_and_is_raised_after_earlier_results(api: VisibilityClient) -> None:
    started: list[int] = []
    lock = threading.Lock()

    def call(n: int) -> int:
        with lock:
            started.append(n)
        if n == 3:
            raise ValueError("boom at 3")
        time.sleep(0.02)
        return n

    results: list[int] = []
    with pytest.raises(ValueError, match="boom at 3"):
        for value in api.map_concurrent(call, range(1000)):
            results.append(value)
    assert results == [0, 1, 2]
    assert len(started) < 20  # the other 980 calls were never started


def test_a_slow_call_does_not_idle_the_other_workers(api: VisibilityClient) -> None:
    release = threading.Event()
    done_while_blocked: list[int] = []

    def call(n: int) -> int:
        if n == 0:
            release.wait(5)  # the head of the queue blocks...
        else:
            done_while_blocked.append(n)
            if len(done_while_blocked) == 30:
                release.set()  # ...until far more calls than the worker count have finished
        return n

    assert list(api.map_concurrent(call, range(40))) == list(range(40))
    assert release.is_set()
