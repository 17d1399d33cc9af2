"""Fields of the wrong type stop the client with the endpoint, the field and the request id named,
before any row reaches a transform; rows of an engine the spec does not list are dropped, counted
and warned about. A rewriting proxy in front of the sandbox plays the broken service."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from resources.api import endpoints as ep
from resources.api.client import VisibilityClient
from resources.api.errors import ResponseShapeError, VisibilityAPIError
from sandbox.testing import SandboxHandle
from tests.api.conftest import FAST
from tests.api.proxies import RewritingProxy, answer
from tests.fixtures_sandbox import SANDBOX_TODAY

START, END = SANDBOX_TODAY - dt.timedelta(days=10), SANDBOX_TODAY - dt.timedelta(days=6)


def rewriting_rows(path_part: str, change: Callable[[int, dict[str, Any]], None]) -> RewritingProxy:
    """Apply ``change(index, row)`` to the rows of answers whose path contains ``path_part``."""

    def rewrite(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        if path_part not in request.url.path or original.status_code != 200:
            return original
        body = original.json()
        for index, row in enumerate(body["data"]):
            change(index, row)
        return answer(original, body=body)

    return RewritingProxy(rewrite)


def _client(sandbox: SandboxHandle, proxy: RewritingProxy) -> VisibilityClient:
    return VisibilityClient(sandbox.url, sandbox.keys["workspace"], transport=proxy, **FAST)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("mention_count", "3", "'mention_count' must be integer, got string '3'"),
        ("citation_count", "first", "'citation_count' must be integer, got string 'first'"),
        ("mention_count", 2**70, "'mention_count' is 1180591620717411303424, outside the 64-bit"),
        ("brand_mentioned", "yes", "'brand_mentioned' must be boolean"),
    ],
)
def test_a_wrongly_typed_answer_field_names_endpoint_field_and_request_id(
    sandbox: SandboxHandle, field: str, value: Any, expected: str
) -> None:
    def poison(index: int, row: dict[str, Any]) -> None:
        if index == 1:
            row[field] = value

    brand_id = sandbox.world.brands[0].id
    with (
        _client(sandbox, rewriting_rows("/answers", poison)) as api,
        pytest.raises(ResponseShapeError) as caught,
    ):
        list(api.list_answers(brand_id, start=START, end=END, engine="chatgpt"))
    error = caught.value
    assert isinstance(error, VisibilityAPIError) and error.field == field
    assert expected in str(error) and "nothing was written" in str(error)
    assert error.endpoint == ep.LIST_ANSWERS.key and error.request_id and error.request_id in str(error)


def test_a_mention_position_sent_as_text_is_refused_not_converted(sandbox: SandboxHandle) -> None:
    def poison(index: int, row: dict[str, Any]) -> None:
        row["position"] = str(row["position"])

    prompt_id = sandbox.world.brands[0].prompts[0].id
    with (
        _client(sandbox, rewriting_rows("/mentions", poison)) as api,
        pytest.raises(ResponseShapeError) as caught,
    ):
        list(api.list_prompt_mentions(prompt_id, start=START, end=END))
    assert caught.value.field == "position" and ep.LIST_PROMPT_MENTIONS.key in str(caught.value)


def test_a_nested_metric_of_the_wrong_type_names_its_path(sandbox: SandboxHandle) -> None:
    def rewrite(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        body = original.json()
        if request.url.path.endswith("/competitors/trends"):
            body["data"]["brand"]["series"][0]["share_of_voice"] = "60%"
        return answer(original, body=body)

    brand_id = sandbox.world.brands[0].id
    with (
        VisibilityClient(
            sandbox.url, sandbox.keys["workspace"], transport=RewritingProxy(rewrite), **FAST
        ) as api,
        pytest.raises(ResponseShapeError, match=r"'brand\.series\[0\]\.share_of_voice' must be number"),
    ):
        api.competitor_trends(brand_id, start=START, end=END)


def test_missing_and_null_optional_fields_and_unknown_fields_pass(sandbox: SandboxHandle) -> None:
    def loosen(index: int, row: dict[str, Any]) -> None:
        row.pop("mention_count")
        row["citation_count"] = None
        row["new_field"] = {"anything": ["goes"]}

    brand_id = sandbox.world.brands[0].id
    with _client(sandbox, rewriting_rows("/answers", loosen)) as api:
        rows = list(api.list_answers(brand_id, start=START, end=END, engine="claude"))
    assert rows and all(r["new_field"] == {"anything": ["goes"]} for r in rows)


def test_rows_of_an_unknown_engine_are_dropped_counted_and_warned_about(
    sandbox: SandboxHandle, caplog: pytest.LogCaptureFixture
) -> None:
    def new_engine(index: int, row: dict[str, Any]) -> None:
        if index % 2 == 0:
            row["engine"] = "grok"

    prompt_id = sandbox.world.brands[0].prompts[0].id
    with _client(sandbox, rewriting_rows("/mentions", lambda i, r: None)) as api:
        reference = list(api.list_prompt_mentions(prompt_id, start=START, end=END, limit=10))
    with (
        caplog.at_level(logging.WARNING, logger="visibility.api"),
        _client(sandbox, rewriting_rows("/mentions", new_engine)) as api,
    ):
        rows = list(api.list_prompt_mentions(prompt_id, start=START, end=END, limit=10))
        stats = api.stats
    dropped = len(reference) - len(rows)
    assert dropped > 0 and all(r["engine"] in ep.ENGINES for r in rows)
    assert stats.unknown_engine_rows == {ep.LIST_PROMPT_MENTIONS.key: dropped}
    assert stats.to_metadata()["unknown_engine_rows"] == {ep.LIST_PROMPT_MENTIONS.key: dropped}
    warnings = [r.getMessage() for r in caplog.records if r.name == "visibility.api"]
    assert len(warnings) == 1  # throttled: one line per endpoint, not one per page
    assert ep.LIST_PROMPT_MENTIONS.key in warnings[0] and "grok" in warnings[0]
