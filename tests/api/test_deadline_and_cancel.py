"""One retry deadline per sync, waits that say what they wait for, and cancellation that wakes them.

A dead service costs a sync one deadline, not one per call: the outage clock lives in the budget
that every client of a resource (one sync) shares. Every wait is announced (``visibility.api`` and
the ``on_wait`` hook) and ends at once on ``cancel()``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient
from resources.api.errors import RateLimitError, SyncCancelled, TransportError, VisibilityAPIError
from resources.api.resource import VisibilityAPIResource
from sandbox.testing import SandboxHandle
from tests.api.conftest import FAST
from tests.api.proxies import Seen, dead_url, fake_service

KEY = "vk_test_deadline_0123456789"

Waits = list[tuple[str, float, str]]


def _timed(fn: Callable[[], Any]) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        fn()
    except BaseException as exc:  # the test inspects it
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


class Background:
    """Run a call in a thread; ``result()`` gives (its exception, seconds from ``mark()`` to its end)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.error: BaseException | None = None
        self.ended_at = 0.0
        self.marked_at = 0.0

        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                self.error = exc
            self.ended_at = time.monotonic()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def mark(self) -> None:
        self.marked_at = time.monotonic()

    def result(self, timeout: float = 60.0) -> tuple[BaseException | None, float]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the call did not stop"
        return self.error, self.ended_at - self.marked_at


@pytest.fixture
def dead() -> str:
    return dead_url()


# --- one deadline per sync -------------------------------------------------------------------------


def test_sequential_calls_against_a_dead_service_share_one_deadline_and_later_ones_fail_at_once(
    dead: str, caplog: pytest.LogCaptureFixture
) -> None:
    resource = VisibilityAPIResource(
        api_url=dead, api_key=KEY, retry_deadline_seconds=1.0, backoff_base_seconds=0.05
    )
    with caplog.at_level(logging.INFO, logger="visibility.api"):
        with resource.get_client() as first:
            error, first_took = _timed(lambda: list(first.list_brands()))
        assert isinstance(error, TransportError)
        with resource.get_client() as second:
            again, second_took = _timed(lambda: second.get_brand("b1"))
            assert second.stats.total_requests == 0  # not even sent
    # the deadline's clock starts with the budget, a moment before the call: about 1 s, not 1 s per call
    assert 0.9 <= first_took < 10  # about the 1 s deadline (generous: a loaded machine is slow to start)
    assert isinstance(again, TransportError) and second_took < 5  # not sent (0 requests above)
    assert dead in str(error) and "gave up after" in str(error) and "connect_error" in str(error)
    assert (
        dead in str(again)
        and re.search(r"failed every attempt for \d+s", str(again))  # 1 s, more on a loaded machine
        and "1s retry deadline" in str(again)
    )
    assert KEY not in str(error) + str(again) + caplog.text
    unreachable = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(unreachable) == 1 and unreachable[0].levelno == logging.WARNING  # throttled, not spammy
    assert f"service unreachable at {dead} (connect_error), retrying GET /v1/brands for" in (
        unreachable[0].getMessage()
    )


def test_an_outage_with_less_than_one_last_try_left_sends_nothing_more(dead: str) -> None:
    """A call gives up once less than one last try is left before the sync's deadline; the next call
    must take the deadline as spent too, not send one more request in that margin."""
    now = [100.0]
    budget = RequestBudget(2, clock=lambda: now[0], retry_deadline_seconds=1.0)
    budget.note_unreachable("connect_error")
    now[0] += 0.97  # 30 ms of the 1 s deadline left: less than a last try's margin
    with VisibilityClient(dead, KEY, budget=budget, retry_deadline_seconds=1.0) as client:
        with pytest.raises(TransportError, match="not sent"):
            client.get_brand("b1")
        assert client.stats.total_requests == 0


def test_a_check_against_a_dead_service_names_its_url_but_no_path_or_key(dead: str) -> None:
    resource = VisibilityAPIResource(
        api_url=f"{dead}/visibility/v1", api_key=KEY, timeout_seconds=10.0, retry_deadline_seconds=0.3
    )
    with resource.get_client() as api, pytest.raises(TransportError) as caught:
        next(iter(api.list_brands(limit=999)), None)
    text = str(caught.value)
    assert f"the service at {dead} failed every attempt" in text and "connect_error" in text
    assert "/visibility" not in text and KEY not in text


def test_a_call_started_during_an_outage_gets_only_the_time_that_is_left(dead: str) -> None:
    resource = VisibilityAPIResource(
        api_url=dead, api_key=KEY, retry_deadline_seconds=6.0, backoff_base_seconds=0.05
    )
    with resource.get_client() as first, resource.get_client() as second:
        early = Background(lambda: list(first.list_brands()))
        deadline = time.monotonic() + 60
        while resource.get_budget().outage is None:  # the outage has started
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(5.6)  # 0.4 s of the deadline left
        late = Background(lambda: second.get_brand("b1"))
        late.mark()
        early_error, _ = early.result(timeout=60)
        late_error, late_took = late.result(timeout=60)
    assert isinstance(early_error, TransportError) and isinstance(late_error, TransportError)
    # ends with the shared deadline (0.4 s left): 10x that is still short of a deadline of its own (6 s)
    assert late_took < 4.5


def test_a_success_stops_the_outage_clock(sandbox: SandboxHandle) -> None:
    class RefusesThreeConnects(httpx.HTTPTransport):
        left = 3

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if self.left:
                self.left -= 1
                raise httpx.ConnectError("connection refused", request=request)
            return super().handle_request(request)

    waits: Waits = []
    budget = RequestBudget(4, on_wait=lambda *w: waits.append(w))
    with VisibilityClient(
        sandbox.url, sandbox.keys["workspace"], transport=RefusesThreeConnects(), budget=budget, **FAST
    ) as api:
        assert api.get_brand(sandbox.world.brands[0].id)["id"]
        stats = api.stats
    assert stats.retries_by_cause == {"connect_error": 3}
    assert [cause for cause, _, _ in waits] == ["unreachable"] * 3
    assert budget.outage is None


# --- cancellation ----------------------------------------------------------------------------------


def test_cancel_during_a_backoff_wait_returns_within_a_second(dead: str) -> None:
    waits: Waits = []
    client = VisibilityClient(
        dead,
        KEY,
        retry_deadline_seconds=120,
        backoff_base_seconds=20,
        backoff_max_seconds=30,
        budget=RequestBudget(8, on_wait=lambda *w: waits.append(w)),
    )
    with client:
        call = Background(lambda: list(client.list_brands()))
        deadline = time.monotonic() + 60  # generous: waits for the event, not for a time
        while not waits and time.monotonic() < deadline:  # until the client sleeps in a backoff
            time.sleep(0.01)
        call.mark()
        client.budget.cancel()
        error, took = call.result()
    assert isinstance(error, SyncCancelled) and not isinstance(error, VisibilityAPIError)
    assert took < 10  # the backoff it cut is 20-30 s
    assert waits[0][0] == "unreachable"


def _rate_limited_forever(seen: Seen) -> tuple[int, dict[str, str], Any]:
    body = {"error": {"code": "rate_limited", "message": "slow down"}}
    return 429, {"Retry-After": "30", "X-Request-Id": "r-429"}, body


def test_cancel_wakes_a_retry_after_wait_of_every_client_sharing_the_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    waits: Waits = []
    with (
        fake_service(_rate_limited_forever) as service,
        caplog.at_level(logging.INFO, logger="visibility.api"),
    ):
        resource = VisibilityAPIResource(api_url=service.url, api_key=KEY)
        resource.get_budget().on_wait = lambda *w: waits.append(w)
        with resource.get_client() as one, resource.get_client() as two:
            calls = [Background(lambda: list(one.list_brands())), Background(lambda: two.get_brand("b"))]
            deadline = time.monotonic() + 60  # generous: waits for the event, not for a time
            while not waits and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)  # both are waiting now
            for call in calls:
                call.mark()
            resource.cancel()
            results = [call.result() for call in calls]
    # the Retry-After wait they cut is 30 s; generous bound so a loaded machine does not fail it
    assert all(isinstance(error, SyncCancelled) and took < 10 for error, took in results)
    cause, seconds, message = waits[0]
    assert cause == "rate_limit" and 25 < seconds <= 30
    assert message.startswith("rate limit: waiting") and "(Retry-After)" in message
    assert any("(Retry-After)" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)


def _one_page_then_spent_window() -> Callable[[Seen], tuple[int, dict[str, str], Any]]:
    def script(seen: Seen) -> tuple[int, dict[str, str], Any]:
        page = int(seen.query.get("cursor", ["0"])[0])
        headers = {"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "30"}
        body = {"data": [{"id": f"b{page}", "name": "B"}], "has_more": True, "next_cursor": str(page + 1)}
        return 200, headers, body

    return script


def test_an_external_cancel_event_stops_a_paging_walk_between_pages(caplog: pytest.LogCaptureFixture) -> None:
    waits: Waits = []
    budget = RequestBudget(8, on_wait=lambda *w: waits.append(w))
    with (
        fake_service(_one_page_then_spent_window()) as service,
        caplog.at_level(logging.INFO),
        VisibilityClient(service.url, KEY, budget=budget) as api,
    ):
        rows = api.list_brands(limit=1)
        assert next(rows)["id"] == "b0"  # the first page came; the window is now spent for 30 s
        walk = Background(lambda: list(rows))
        deadline = time.monotonic() + 60  # generous: waits for the event, not for a time
        while not waits and time.monotonic() < deadline:
            time.sleep(0.01)
        walk.mark()
        budget.cancel_event.set()  # not cancel(): a signal handler may find the budget busy
        error, took = walk.result()
    assert isinstance(error, SyncCancelled) and took < 10  # the window it cut resets in 30 s
    assert len(service.seen) == 1
    assert waits[0][0] == "rate_limit" and "(X-RateLimit-Reset)" in waits[0][2]


def test_a_cancelled_budget_refuses_every_later_call_without_sending(sandbox: SandboxHandle) -> None:
    resource = VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"])
    budget = resource.get_budget()
    assert resource.get_budget() is budget  # one for the instance's lifetime
    budget.cancel()
    with resource.get_client() as api:
        with pytest.raises(SyncCancelled, match=r"cancelled \[endpoint GET /v1/brands\]"):
            list(api.list_brands())
        assert api.stats.total_requests == 0


def test_map_concurrent_ends_quickly_when_cancelled_in_the_middle(dead: str) -> None:
    with VisibilityClient(
        dead, KEY, retry_deadline_seconds=120, backoff_base_seconds=30, backoff_max_seconds=60
    ) as api:
        run = Background(lambda: list(api.map_concurrent(lambda i: api.get_brand(str(i)), range(20))))
        deadline = time.monotonic() + 60
        while api.budget.outage is None:  # the calls are failing and backing off
            assert time.monotonic() < deadline
            time.sleep(0.01)
        run.mark()
        api.budget.cancel()
        error, took = run.result(timeout=60)
    assert isinstance(error, SyncCancelled) and took < 10  # not the backoffs of up to 30-60 s


# --- wait announcements ----------------------------------------------------------------------------


def test_waits_below_a_second_are_not_announced_and_a_failing_hook_breaks_nothing() -> None:
    calls: Waits = []

    def broken(*wait: Any) -> None:
        calls.append(wait)
        raise RuntimeError("status line broke")

    budget = RequestBudget(1, on_wait=broken)
    budget.announce("backoff", 0.5, "short")
    budget.announce("backoff", 2.0, "long")
    budget.announce("unreachable", 0.1, "down", warning=True)
    assert [c[2] for c in calls] == ["long", "down"]


def test_an_endpoint_window_wait_names_the_endpoint_and_its_header(caplog: pytest.LogCaptureFixture) -> None:
    budget = RequestBudget(2)
    permit = budget.acquire("POST /v1/audit-reports")
    headers = httpx.Headers({"X-Endpoint-Limit": "1", "X-Endpoint-Remaining": "0", "X-Endpoint-Reset": "1.2"})
    budget.observe(permit, headers)
    budget.release(permit)
    with caplog.at_level(logging.INFO, logger="visibility.api"):
        started = time.monotonic()
        budget.release(budget.acquire("POST /v1/audit-reports"))
    assert time.monotonic() - started >= 1.0
    assert [r.getMessage()[:60] for r in caplog.records] == [
        "rate limit of POST /v1/audit-reports: waiting 1.2 s (X-Endpoint-Reset)"[:60]
    ]


@pytest.fixture(autouse=True)
def _no_stray_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        stray = [
            t for t in set(threading.enumerate()) - before if t.is_alive() and "visibility-api" in t.name
        ]
        if not stray:
            return
        time.sleep(0.05)
    raise AssertionError(f"threads left running: {stray}")


def _rate_limited_briefly_forever(seen: Seen) -> tuple[int, dict[str, str], Any]:
    body = {"error": {"code": "rate_limited", "message": "slow down"}}
    return 429, {"Retry-After": "1", "X-Request-Id": "r-429"}, body


def test_a_service_answering_429_for_ever_costs_one_deadline_per_sync_not_one_per_call() -> None:
    with fake_service(_rate_limited_briefly_forever) as service:
        resource = VisibilityAPIResource(api_url=service.url, api_key=KEY, retry_deadline_seconds=3.0)
        with resource.get_client() as first:
            error, _ = Background(lambda: list(first.list_brands())).result()
        sent = len(service.seen)
        with resource.get_client() as second:
            again, _ = Background(lambda: second.get_brand("b1")).result()
            assert second.stats.total_requests == 0  # not even sent
    assert isinstance(error, RateLimitError) and sent >= 2
    # the refusals are the sync's: the second call gets what is left of the deadline (nothing), not 3 s
    assert isinstance(again, RateLimitError) and "3s retry deadline" in str(again)
    assert not any(second.stats.wait_seconds_by_cause.values())  # nor waited before giving up
