"""``fetch_ahead``: the next table is fetched while the caller lands the current one (no I/O)."""

from __future__ import annotations

import threading
from contextlib import closing

import pytest

from sync.prefetch import FetchCancelled, StopSignal, fetch_ahead

WAIT = 10.0  # seconds: only reached when the behaviour under test is broken


def test_results_come_in_order_and_the_next_fetch_runs_while_the_caller_works() -> None:
    second_started = threading.Event()

    def fetch(item: str, stop: StopSignal) -> str:
        if item == "b":
            second_started.set()
        return item.upper()

    seen = []
    with closing(fetch_ahead(["a", "b", "c"], fetch, discard=lambda r: None)) as fetched:
        for item, result in fetched:
            if item == "a":  # landing "a": "b" is fetched meanwhile, not after
                assert second_started.wait(WAIT)
            seen.append((item, result))

    assert seen == [("a", "A"), ("b", "B"), ("c", "C")]


def test_a_fetch_error_is_raised_at_its_turn_and_nothing_after_it_is_fetched() -> None:
    fetched_items: list[str] = []

    def fetch(item: str, stop: StopSignal) -> str:
        fetched_items.append(item)
        if item == "b":
            raise RuntimeError("quota exceeded")
        return item

    got = []
    with pytest.raises(RuntimeError, match="quota exceeded"):
        for item, _ in fetch_ahead(["a", "b", "c"], fetch, discard=lambda r: None):
            got.append(item)

    assert got == ["a"]
    assert fetched_items == ["a", "b"]


def test_stopping_early_cancels_the_running_fetch_and_discards_what_was_not_used() -> None:
    b_done = threading.Event()
    c_running = threading.Event()
    discarded: list[str] = []

    def fetch(item: str, stop: StopSignal) -> str:
        if item == "b":
            b_done.set()
        if item == "c":
            c_running.set()
            while True:  # a long fetch, checking between its calls
                stop.wait(0.01)
        return item

    generator = fetch_ahead(["a", "b", "c"], fetch, discard=discarded.append)
    with pytest.raises(ValueError, match="landing failed"), closing(generator):
        for item, _ in generator:
            assert item == "a"
            assert b_done.wait(WAIT) and c_running.wait(WAIT)
            raise ValueError("landing failed")

    assert discarded == ["b"]  # fetched, never handed over: its spool goes


def test_the_stop_signal_raises_fetch_cancelled_once_set() -> None:
    event = threading.Event()
    signal = StopSignal(event)
    signal.raise_if_set()
    event.set()
    with pytest.raises(FetchCancelled):
        signal.raise_if_set()


def test_an_interrupted_caller_wakes_a_fetch_that_waits_on_the_api_before_waiting_for_it() -> None:
    waiting, woken = threading.Event(), threading.Event()

    def fetch(item: str, stop: StopSignal) -> str:
        if item == "b":  # sleeps in a retry wait: checks no stop signal, only the budget's cancel
            waiting.set()
            assert woken.wait(WAIT)
        return item

    with (
        pytest.raises(KeyboardInterrupt),
        closing(fetch_ahead(["a", "b"], fetch, discard=lambda r: None, on_stop=woken.set)) as fetched,
    ):
        for item, _ in fetched:
            assert item == "a" and waiting.wait(WAIT)
            raise KeyboardInterrupt  # Ctrl+C while landing "a"
    assert woken.is_set()


def test_on_stop_is_not_called_when_every_fetch_had_ended() -> None:
    stopped: list[bool] = []
    with closing(
        fetch_ahead(["a"], lambda i, s: i, discard=lambda r: None, on_stop=lambda: stopped.append(True))
    ) as f:
        assert list(f) == [("a", "a")]
    assert stopped == []
