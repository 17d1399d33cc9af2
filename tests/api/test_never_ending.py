"""A service that never ends, and one that answers HTML: both stop the sync within a bounded number of
requests, naming the endpoint, the pages read and the request id. A rewriting proxy in front of the
sandbox plays the broken service."""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import time
import uuid

import httpx
import pytest

from resources.api import endpoints as ep
from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient
from resources.api.errors import PagingError, RequestBudgetExceeded, ResponseShapeError
from sandbox.testing import SandboxHandle
from tests.api.conftest import FAST
from tests.api.proxies import RewritingProxy, answer
from tests.fixtures_sandbox import SANDBOX_TODAY

START, END = SANDBOX_TODAY - dt.timedelta(days=10), SANDBOX_TODAY - dt.timedelta(days=6)


class InventingProxy(RewritingProxy):
    """Serves the first page again for every cursor it invented (the sandbox knows none of them)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.params.get("cursor", "").startswith("invented-"):
            params = request.url.params.remove("cursor")
            request = httpx.Request(
                request.method, request.url.copy_with(params=params), headers=request.headers
            )
        return super().handle_request(request)


def never_ending(*, invent_content: bool) -> RewritingProxy:
    """Every mentions page gets a new cursor and new row ids (and, with ``invent_content``, new
    answers behind them), and always says ``has_more``."""
    counter = itertools.count()

    def rewrite(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        if "/mentions" not in request.url.path or original.status_code != 200:
            return original
        body = original.json()
        page = next(counter)
        for row in body["data"]:
            row["id"] = str(uuid.uuid4())
            if invent_content:
                row["response_id"] = str(uuid.uuid4())
                row["position"] = page
        body.update(has_more=True, next_cursor=f"invented-{uuid.uuid4()}")
        return answer(original, body=body, headers={"X-Request-Id": f"req-page-{page}"})

    return InventingProxy(rewrite)


def _client(sandbox: SandboxHandle, proxy: RewritingProxy, budget: RequestBudget | None = None):
    return VisibilityClient(sandbox.url, sandbox.keys["workspace"], transport=proxy, budget=budget, **FAST)


def test_a_page_served_again_under_new_ids_and_cursor_stops_the_walk_at_once(sandbox: SandboxHandle) -> None:
    prompt_id = sandbox.world.brands[0].prompts[0].id
    with _client(sandbox, never_ending(invent_content=False)) as api, pytest.raises(PagingError) as caught:
        list(api.list_prompt_mentions(prompt_id, start=START, end=END))
    error = caught.value
    assert error.pages == 2 and "repeats the rows of page 1 under new ids" in str(error)
    assert error.endpoint == ep.LIST_PROMPT_MENTIONS.key and "req-page-1" in str(error)


def test_a_service_inventing_rows_forever_meets_the_sync_request_budget(sandbox: SandboxHandle) -> None:
    budget = RequestBudget(4, request_floor=30, requests_per_call=5)
    budget.allow_planned_calls(2, "prompt_mentions")  # 30 + 2 x 5 requests for the whole sync
    prompt_id = sandbox.world.brands[0].prompts[0].id
    with _client(sandbox, never_ending(invent_content=True), budget) as api:
        with pytest.raises(RequestBudgetExceeded) as caught:
            list(api.list_prompt_mentions(prompt_id, start=START, end=END, limit=5))
        sent = api.stats.total_requests
        with pytest.raises(RequestBudgetExceeded):  # every later call of the sync fails without sending
            api.get_brand(sandbox.world.brands[0].id)
        assert api.stats.total_requests == sent
    error = caught.value
    assert sent == 40 and error.requests == 40 and error.pages == 40
    assert error.endpoint == ep.LIST_PROMPT_MENTIONS.key
    assert error.request_id == "req-page-39" and "req-page-39" in str(error)
    text = str(error)
    assert "40 page(s)" in text and "prompt_mentions: 2 planned call(s)" in text
    assert "VISIBILITY_REQUEST_BUDGET_FACTOR" in text


def test_a_total_count_that_grows_with_every_page_does_not_move_the_walk_bound(
    sandbox: SandboxHandle,
) -> None:
    counter = itertools.count(1)

    def growing(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        if "/mentions" not in request.url.path:
            return original
        page = next(counter)
        body = original.json()
        for row in body["data"]:
            row.update(id=str(uuid.uuid4()), response_id=str(uuid.uuid4()), position=page)
        body.update(has_more=True, next_cursor=f"invented-{page}", total_count=page * 10 * len(body["data"]))
        return answer(original, body=body)

    prompt_id = sandbox.world.brands[0].prompts[0].id
    with _client(sandbox, InventingProxy(growing)) as api, pytest.raises(PagingError) as caught:
        list(api.list_prompt_mentions(prompt_id, start=START, end=END, limit=5))
    assert "total_count allows at most 10 page(s)" in str(caught.value) and caught.value.pages == 12


def html_for(path_part: str) -> RewritingProxy:
    def rewrite(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        if path_part not in request.url.path:
            return original
        page = httpx.Response(200, headers={"content-type": "text/html"}, content=b"<html>Sign in</html>")
        return answer(page, headers={"X-Request-Id": "req-html"})

    return RewritingProxy(rewrite)


def test_a_200_that_is_html_is_a_shape_error_after_one_retry_not_a_retry_deadline(
    sandbox: SandboxHandle, caplog: pytest.LogCaptureFixture
) -> None:
    prompt_id = sandbox.world.brands[0].prompts[0].id
    options = {**FAST, "retry_deadline_seconds": 300.0}
    with (
        caplog.at_level(logging.WARNING, logger="visibility.api"),
        VisibilityClient(
            sandbox.url, sandbox.keys["workspace"], transport=html_for("/mentions"), **options
        ) as api,
    ):
        started = time.monotonic()
        with pytest.raises(ResponseShapeError) as caught:
            list(api.list_prompt_mentions(prompt_id, start=START, end=END))
        took = time.monotonic() - started
        requests = api.stats.total_requests
    error = caught.value
    assert requests == 2  # the first try and one retry
    assert took < 60  # far inside the 300 s deadline (the backoff is a fraction of a second)
    assert "not a JSON object (text/html, starting '<html>Sign in</html>')" in str(error)
    assert error.request_id == "req-html" and error.endpoint == ep.LIST_PROMPT_MENTIONS.key
    retried = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert retried and f"retrying {ep.LIST_PROMPT_MENTIONS.key} once" in retried[0]


def test_json_under_another_content_type_is_not_taken_for_an_answer(sandbox: SandboxHandle) -> None:
    def mislabelled(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        return answer(original, headers={"content-type": "text/plain"})

    with _client(sandbox, RewritingProxy(mislabelled)) as api, pytest.raises(ResponseShapeError) as caught:
        api.get_brand(sandbox.world.brands[0].id)
    assert "(text/plain, " in str(caught.value) and api.stats.total_requests == 2
