"""Threads waiting for the key's window: an answer that reopens it lets them all go, a cancel wakes them."""

from __future__ import annotations

import threading

import httpx

from resources.api.budget import Permit, RequestBudget

ENDPOINT = "GET /v1/brands"


def window_headers(remaining: int, reset: int, limit: int = 20) -> httpx.Headers:
    return httpx.Headers(
        {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(reset),
        }
    )


def waiting_threads(budget: RequestBudget, count: int) -> tuple[list[threading.Thread], list[Permit]]:
    """``count`` threads blocked in ``acquire``; returns once each has announced its wait."""
    announced = threading.Semaphore(0)
    budget.on_wait = lambda cause, seconds, message: announced.release()
    permits: list[Permit] = []
    lock = threading.Lock()

    def send() -> None:
        permit = budget.acquire(ENDPOINT)
        with lock:
            permits.append(permit)

    threads = [threading.Thread(target=send, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for _ in threads:
        assert announced.acquire(timeout=30), "a thread never started waiting for the window"
    return threads, permits


def test_an_answer_that_reopens_the_keys_window_lets_every_waiting_thread_send() -> None:
    budget = RequestBudget(8)
    probe = budget.acquire(ENDPOINT)
    budget.observe(probe, window_headers(remaining=10, reset=30))
    budget.release(probe)
    spending, reopening = budget.acquire(ENDPOINT), budget.acquire(ENDPOINT)
    budget.observe(spending, window_headers(remaining=0, reset=30))  # spent for 30 s...
    budget.release(spending)

    threads, permits = waiting_threads(budget, 5)
    budget.observe(reopening, window_headers(remaining=10, reset=30))  # ...until a later answer says not
    budget.release(reopening)

    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert len(permits) == 5
    for permit in permits:
        budget.release(permit)


def test_a_cancel_wakes_every_thread_waiting_in_line_for_the_window_at_once() -> None:
    budget = RequestBudget(8)
    spending = budget.acquire(ENDPOINT)
    budget.observe(spending, window_headers(remaining=0, reset=30))
    budget.release(spending)
    raised: list[BaseException] = []

    def send() -> None:
        try:
            budget.acquire(ENDPOINT)
        except BaseException as error:  # the test inspects what each thread raised
            raised.append(error)

    announced = threading.Semaphore(0)
    budget.on_wait = lambda cause, seconds, message: announced.release()
    threads = [threading.Thread(target=send, daemon=True) for _ in range(6)]
    for thread in threads:
        thread.start()
    for _ in threads:
        assert announced.acquire(timeout=30)
    budget.cancel()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert [type(error).__name__ for error in raised] == ["SyncCancelled"] * 6
