"""The client under the sandbox's fault profiles, server errors and writes.

Under ``flaky`` and ``hostile`` a walk over every read endpoint must land exactly the rows the
fault-free sandbox serves (windows older than the restated days, same seed), with the retries visible
in the counters and every attempt counted on both sides.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from resources.api import write_operations as ops
from resources.api.client import VisibilityClient
from resources.api.errors import ServerError, TransportError
from sandbox.faults import FaultRates, FaultsConfig, decide
from sandbox.testing import SandboxHandle
from tests.api.conftest import FAST, make_client, sandbox_total
from tests.api.proxies import RewritingProxy, answer
from tests.fixtures_sandbox import SANDBOX_TODAY, test_sandbox_config

#: Older than the restated days (3), so restate faults cannot change the rows compared.
START = SANDBOX_TODAY - dt.timedelta(days=12)
END = SANDBOX_TODAY - dt.timedelta(days=5)


def _walk(api: VisibilityClient) -> dict[str, Any]:
    """Every read endpoint once, paging to the end, mentions concurrently; ids and totals only."""
    brands = [row["id"] for row in api.list_brands(limit=1)]
    brand_id = brands[0]
    prompts = [row["id"] for row in api.list_prompts(brand_id, limit=10)]
    mentions = list(
        api.map_concurrent(
            lambda pid: sorted(
                m["id"] for m in api.list_prompt_mentions(pid, start=START, end=END, limit=200)
            ),
            prompts[:12],
        )
    )
    urls = api.citation_urls(brand_id, start=START, end=END, limit=50)
    trend = api.citation_trends(brand_id, start=START, end=END)
    competitors = api.competitor_trends(brand_id, start=START, end=END, engine="gemini")
    return {
        "brands": brands,
        "brand": api.get_brand(brand_id)["name"],
        "topics": sorted(row["id"] for row in api.list_topics(brand_id, limit=2)),
        "prompts": prompts,
        "answers": [row["id"] for row in api.list_answers(brand_id, start=START, end=END, engine="claude")],
        "mentions": mentions,
        "generations": (api.list_generations(brand_id, limit=5).total_count),
        "urls": ([r["url"] for r in urls.rows], urls.total_count, urls.capped, urls.total_citations),
        "trend": [(p["date"], p["citations"]) for p in trend["series"]],
        "competitors": sorted(
            (c["brand_name"], c["totals"]["mention_count"]) for c in competitors["competitors"]
        ),
        "tracked": sorted(row["id"] for row in api.list_tracked_competitors(brand_id)),
    }


@pytest.fixture(scope="module")
def reference(sandbox: SandboxHandle) -> dict[str, Any]:
    with make_client(sandbox) as api:
        return _walk(api)


@pytest.mark.parametrize("profile", ["flaky", "hostile"])
def test_faulted_walk_lands_the_same_rows_and_counts_its_retries(
    sandbox_factory: Callable[..., SandboxHandle],
    reference: dict[str, Any],
    profile: str,
    assert_no_key: Callable[..., None],
) -> None:
    faults = FaultsConfig(profile=profile, seed=5, overrides={"quota": 0.0, "retry_after_max_s": 1})
    handle = sandbox_factory(test_sandbox_config(faults=faults))
    with make_client(handle) as api:
        assert _walk(api) == reference
        stats = api.stats
    served = handle.stats()
    # Every attempt is counted on both sides, dropped connections included.
    assert stats.total_requests == sandbox_total(served)
    faulted = sandbox_total(served) - sandbox_total(served, "200")
    assert faulted > 0
    assert stats.total_retries >= faulted  # each fault answered by a retry (truncations are 200s)
    assert stats.retries_by_cause.keys() <= {
        "rate_limited",
        "endpoint_rate_limited",
        "concurrency_limited",
        "server_error",
        "timeout",
        "connection_dropped",
        "invalid_body",
    }
    if profile == "hostile":
        assert {"server_error", "connection_dropped"} <= stats.retries_by_cause.keys()
        assert stats.wait_seconds > 0
        assert stats.wait_seconds_by_cause.get("backoff", 0) > 0
    assert_no_key(handle.keys, repr(stats), str(stats.to_metadata()))


def test_persistent_500_on_a_read_retries_until_the_deadline_and_quotes_status_code_and_request_id(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    handle = sandbox_factory()
    handle.configure(fail_endpoints=["GET /v1/brands"])
    with make_client(handle, retry_deadline_seconds=0.6) as api:
        with pytest.raises(ServerError) as caught:
            list(api.list_brands())
        stats = api.stats
    error = caught.value
    assert (error.status, error.code) == (500, "internal_error")
    assert error.request_id and error.request_id in str(error)
    assert "HTTP 500" in str(error) and "internal_error" in str(error) and "gave up after" in str(error)
    assert stats.retries_by_cause["server_error"] >= 1
    assert handle.stats()["GET /v1/brands"] == {"500": stats.total_requests}


def test_500_on_a_post_is_not_repeated_because_it_may_have_been_applied(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    handle = sandbox_factory()
    brand_id = handle.world.brands[0].id
    handle.configure(fail_endpoints=["POST /v1/brands/{id}/topics"])
    with make_client(handle) as api, pytest.raises(ServerError) as caught:
        api.create_topic(brand_id, "Pricing pages")
    assert "not retried" in str(caught.value) and caught.value.request_id
    assert handle.stats()["POST /v1/brands/{id}/topics"] == {"500": 1}


def test_writes_create_rename_untrack_and_audit(sandbox_factory: Callable[..., SandboxHandle]) -> None:
    handle = sandbox_factory(audit_delay_seconds=0.2)
    brand_id = handle.world.brands[0].id
    with make_client(handle) as api:
        created = api.create_topic(brand_id, "Pricing pages")
        renamed = api.rename_topic(brand_id, created["id"], "Pricing")
        assert renamed["id"] == created["id"] and renamed["name"] == "Pricing"
        assert {"id": created["id"], "name": "Pricing"}.items() <= next(
            t for t in api.list_topics(brand_id) if t["id"] == created["id"]
        ).items()

        tracked = list(api.list_tracked_competitors(brand_id))
        result = api.untrack_competitor(brand_id, tracked[0]["id"])
        assert result == {"id": tracked[0]["id"], "brand_name": tracked[0]["brand_name"], "untracked": True}
        assert tracked[0]["id"] not in {row["id"] for row in api.list_tracked_competitors(brand_id)}

        audit = api.create_audit("https://example.com/pricing", brand_id)
        assert audit["status"] == "pending" and audit["poll"].startswith("/v1/")
        report = api.wait_for_audit(audit["poll"], interval_seconds=0.1)
        assert report["status"] == "complete" and report["id"] == audit["id"]
        assert "score" in report  # fields beyond the assumed shape are kept
        assert api.stats.requests_by_endpoint["GET /v1/audit-reports/{id}"] >= 1


def test_renames_under_hostile_faults_are_read_back_not_repeated_blindly(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    handle = sandbox_factory()
    brand = handle.world.brands[0]
    topic_id = next(t.id for t in brand.topics)
    faults = {"profile": "hostile", "seed": 3, "overrides": {"quota": 0.0, "retry_after_max_s": 1}}
    handle.configure(faults=faults)
    outcomes = []
    with make_client(handle) as api:
        for n in range(8):
            plan = ops.plan_rename_topic(api, brand.id, topic_id, f"Renamed {n}")
            outcomes.append(ops.rename_topic(api, plan))
        sent = api.stats.requests_by_endpoint["PATCH /v1/brands/{id}/topics/{topicId}"]
        final = {t["id"]: t["name"] for t in api.list_topics(brand.id)}[topic_id]
    assert [o.topic.name for o in outcomes] == [f"Renamed {n}" for n in range(8)] and final == "Renamed 7"
    served = handle.stats()["PATCH /v1/brands/{id}/topics/{topicId}"]
    assert sent == sum(served.values())  # every PATCH the client sent, the sandbox counted
    lost = [o for o in outcomes if o.note]
    assert lost, "seed 3 loses some of these PATCHes' answers"
    assert all("the answer was lost" in o.note and "reading it back shows it" in o.note for o in lost)
    assert all(o.note in o.describe() for o in lost)
    # a lost answer is followed by a read-back, and a PATCH is re-sent only when it was not applied
    assert sent == len(outcomes) + sum(o.note.count("sent again") for o in lost)


def test_post_after_a_dropped_connection_is_not_repeated(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    handle = sandbox_factory()
    brand_id = handle.world.brands[0].id
    handle.configure(faults={"profile": "none", "overrides": {"drop": 1.0}})
    with make_client(handle) as api, pytest.raises(TransportError) as caught:
        api.create_topic(brand_id, "Maybe created")
    assert "not retried" in str(caught.value)
    assert sandbox_total(handle.stats()) == 1


def test_posts_under_hostile_faults_succeed_or_say_they_were_not_repeated_and_never_duplicate(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    handle = sandbox_factory()
    brand_id = handle.world.brands[0].id
    faults = {"profile": "hostile", "seed": 8, "overrides": {"quota": 0.0, "retry_after_max_s": 1}}
    handle.configure(faults=faults)
    names = [f"Hostile topic {n}" for n in range(12)]
    created: list[str] = []
    refused: list[str] = []
    with make_client(handle) as api:
        for name in names:
            try:
                created.append(api.create_topic(brand_id, name)["name"])
            except (ServerError, TransportError) as exc:
                assert "not retried" in str(exc)
                refused.append(name)
        listed = [t["name"] for t in api.list_topics(brand_id) if t["name"].startswith("Hostile topic")]
    assert created and refused  # seed 8 refuses some POSTs ambiguously and lets others through
    assert sorted(created + refused) == sorted(names)
    assert len(listed) == len(set(listed))  # no topic was created twice by a retry
    assert set(created) <= set(listed)


def _drops_the_first_delete_only(handle: SandboxHandle, brand_id: str, competitor_id: str) -> None:
    path = f"/v1/brands/{brand_id}/tracked-competitors/{competitor_id}"
    rates = FaultRates(drop=0.5)
    # The sandbox's faults are a pure function of the seed: pick one that drops the first DELETE only.
    seed = next(
        s
        for s in range(1000)
        if decide(rates, s, "DELETE", path, 0).kind == "drop"
        and decide(rates, s, "DELETE", path, 1).kind is None
        and all(
            decide(rates, s, "GET", f"/v1/brands/{brand_id}/tracked-competitors", n).kind is None
            for n in range(3)
        )
    )
    handle.configure(faults={"profile": "none", "seed": seed, "overrides": {"drop": 0.5}})


def test_a_delete_whose_answer_was_dropped_is_read_back_and_not_sent_again(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    handle = sandbox_factory()
    brand = handle.world.brands[0]
    with make_client(handle) as api:
        competitor_id = next(iter(api.list_tracked_competitors(brand.id)))["id"]
        plan = ops.plan_untrack(api, brand.id, competitor_id)
    _drops_the_first_delete_only(handle, brand.id, competitor_id)
    with make_client(handle) as api:
        with pytest.raises(TransportError) as caught:  # the client alone does not repeat it blindly
            api.untrack_competitor(brand.id, competitor_id)
        assert caught.value.may_have_applied and "not retried" in str(caught.value)
    handle.configure(faults={"profile": "none", "overrides": {}})
    with make_client(handle) as api:  # the DELETE was applied before its answer was dropped
        assert competitor_id not in {row["id"] for row in api.list_tracked_competitors(brand.id)}

    handle.track(brand.id, plan.competitor.name)  # track it again, then untrack through the operation
    with make_client(handle) as api:
        plan = ops.plan_untrack(api, brand.id, plan.competitor.name)
    _drops_the_first_delete_only(handle, brand.id, plan.competitor.id)
    handle.reset_stats()
    with make_client(handle) as api:
        outcome = ops.untrack_competitor(api, plan)
    assert outcome.untracked and outcome.note is not None
    assert "the answer was lost" in outcome.note and "reading it back shows it applied" in outcome.note
    assert outcome.note in outcome.describe() and outcome.metadata()["note"] == outcome.note
    assert handle.stats()["DELETE /v1/brands/{id}/tracked-competitors/{competitorId}"] == {"dropped": 1}


def test_a_delete_answered_404_after_a_lost_attempt_counts_as_done(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    """A stale read-back (a replica behind the primary) says "still tracked": the DELETE is sent again,
    answered 404, and the read-back that follows shows it done."""
    sandbox = sandbox_factory()
    brand = sandbox.world.brands[1]
    state = {"deletes": 0, "stale_reads": 1}

    def lose_then_stale(request: httpx.Request, original: httpx.Response) -> httpx.Response:
        if request.method == "DELETE":
            state["deletes"] += 1
            if state["deletes"] == 1:  # applied, but the answer is a 502
                return answer(original, status=502, body={"error": {"code": "bad_gateway", "message": "x"}})
        elif "tracked-competitors" in request.url.path and state["deletes"] == 1 and state["stale_reads"]:
            state["stale_reads"] -= 1
            body = original.json()
            body["data"].append({**tracked, "id": competitor_id})
            return answer(original, body=body)
        return original

    with make_client(sandbox) as api:
        tracked = next(iter(api.list_tracked_competitors(brand.id)))
        competitor_id = tracked["id"]
        plan = ops.plan_untrack(api, brand.id, competitor_id)
    with VisibilityClient(
        sandbox.url, sandbox.keys["workspace"], transport=RewritingProxy(lose_then_stale), **FAST
    ) as api:
        outcome = ops.untrack_competitor(api, plan)
    assert state["deletes"] == 2 and outcome.untracked
    assert outcome.note is not None and "answered 404" in outcome.note and "sent again" in outcome.note
