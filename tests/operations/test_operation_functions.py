"""The Dagster-free operations against the sandbox: names resolve, each change lands as the spec
says, repeats change nothing, and what cannot be done is refused with a clear message."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from resources.api import write_operations
from resources.api.client import VisibilityClient
from resources.api.errors import NotFoundError
from sandbox.testing import SandboxHandle
from tests.operations.helpers import changes, first_brand, topic_names, tracked_names


def test_a_brand_resolves_by_id_and_by_name_in_any_case(client: VisibilityClient) -> None:
    brand = first_brand(client)
    by_id = write_operations.resolve_brand(client, brand["id"].upper())
    by_name = write_operations.resolve_brand(client, f"  {brand['name'].swapcase()} ")
    assert by_id == by_name == write_operations.Named(brand["id"], brand["name"])


def test_an_unknown_brand_is_refused_naming_the_brands_the_key_reaches(client: VisibilityClient) -> None:
    names = [row["name"] for row in client.list_brands()]
    with pytest.raises(write_operations.OperationError, match="has the id or name") as caught:
        write_operations.resolve_brand(client, "No Such Brand")
    message = str(caught.value)
    assert "No Such Brand" in message and "reachable with this key" in message
    assert all(f"'{name}'" in message for name in names)


def test_a_name_shared_by_two_topics_asks_for_the_id(client: VisibilityClient) -> None:
    brand = write_operations.resolve_brand(client, first_brand(client)["id"])
    first = client.create_topic(brand.id, "Twins")
    second = client.create_topic(brand.id, "twins")
    with pytest.raises(write_operations.OperationError, match="give the id") as caught:
        write_operations.resolve_topic(client, brand, "TWINS")
    assert first["id"] in str(caught.value) and second["id"] in str(caught.value)
    assert write_operations.resolve_topic(client, brand, second["id"]).name == "twins"


def test_untracking_removes_the_competitor_from_the_tracked_set(
    client: VisibilityClient, sandbox: SandboxHandle
) -> None:
    brand = first_brand(client)
    competitor = tracked_names(client, brand["id"])[0]
    plan = write_operations.plan_untrack(client, brand["name"], competitor.lower())
    assert changes(sandbox) == {}  # the plan only reads
    outcome = write_operations.untrack_competitor(client, plan)
    assert outcome.untracked and outcome.competitor.name == competitor
    assert competitor not in tracked_names(client, brand["id"])
    assert "untracked" in outcome.describe() and competitor in outcome.describe()
    with pytest.raises(write_operations.OperationError, match="tracked by brand"):
        write_operations.plan_untrack(
            client, brand["name"], competitor
        )  # a second untrack is refused by name


def test_creating_a_topic_twice_creates_it_once(client: VisibilityClient, sandbox: SandboxHandle) -> None:
    brand = first_brand(client)
    created = write_operations.create_topic(
        client, write_operations.plan_create_topic(client, brand["id"], " Integrations ")
    )
    assert created.action == "created" and created.topic.name == "Integrations"
    assert topic_names(client, brand["id"]).count("Integrations") == 1
    sandbox.reset_stats()
    again = write_operations.plan_create_topic(client, brand["id"], "integrations")
    assert not again.changes and again.existing == created.topic
    assert write_operations.create_topic(client, again).action == "unchanged"
    assert changes(sandbox) == {}  # no POST the second time
    assert topic_names(client, brand["id"]).count("Integrations") == 1


def test_renaming_a_topic_keeps_its_id_and_prompts(client: VisibilityClient, sandbox: SandboxHandle) -> None:
    brand = first_brand(client)
    before = next(iter(client.list_topics(brand["id"])))
    outcome = write_operations.rename_topic(
        client, write_operations.plan_rename_topic(client, brand["name"], before["name"], "Costs")
    )
    assert (outcome.action, outcome.previous_name, outcome.topic.id) == (
        "renamed",
        before["name"],
        before["id"],
    )
    after = {row["id"]: row for row in client.list_topics(brand["id"])}[before["id"]]
    assert after["name"] == "Costs" and after["prompt_count"] == before["prompt_count"]
    sandbox.reset_stats()
    same = write_operations.plan_rename_topic(client, brand["name"], "costs", "Costs")
    assert not same.changes and write_operations.rename_topic(client, same).action == "unchanged"
    assert changes(sandbox) == {}  # already so named: nothing sent


def test_an_audit_is_requested_once_and_polled_to_its_finished_report(
    client: VisibilityClient, sandbox: SandboxHandle
) -> None:
    brand = first_brand(client)
    url = f"https://{brand['domain']}/pricing"
    plan = write_operations.plan_audit(client, brand["name"], url, poll_interval_seconds=0.1)
    pending = write_operations.submit_audit(client, plan)
    assert pending.status == "pending" and not pending.complete and pending.poll.endswith(pending.audit_id)
    finished = write_operations.await_audit(client, pending, plan)
    assert finished.complete and finished.completed_at is not None and finished.report is not None
    assert finished.report["url"] == url
    fields = finished.key_fields()
    assert isinstance(fields["score"], int) and fields["findings"] == len(finished.report["findings"])
    assert f"score {fields['score']}" in finished.describe()
    assert changes(sandbox) == {"POST /v1/audit-reports": {"202": 1}}


def test_an_audit_still_pending_at_the_timeout_names_its_poll_path(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    slow = sandbox_factory(audit_delay_seconds=60.0)
    with VisibilityClient(slow.url, slow.keys["workspace"]) as client:
        plan = write_operations.plan_audit(
            client,
            first_brand(client)["id"],
            "https://example.com/",
            timeout_seconds=0.3,
            poll_interval_seconds=0.1,
        )
        pending = write_operations.submit_audit(client, plan)
        with pytest.raises(write_operations.AuditStillPendingError) as caught:
            write_operations.await_audit(client, pending, plan)
    assert caught.value.outcome == pending
    assert pending.poll in str(caught.value) and "still pending after 0.3s" in str(caught.value)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "example.com/page", "https://", "https://a b.com/"])
def test_a_malformed_audit_url_is_refused_before_any_request(
    url: str, client: VisibilityClient, sandbox: SandboxHandle
) -> None:
    sandbox.reset_stats()
    with pytest.raises(write_operations.InvalidInputError, match="absolute http"):
        write_operations.plan_audit(client, "anything", url)
    assert sandbox.stats() == {}


def test_a_brand_outside_a_scoped_key_is_unknown_to_it(sandbox: SandboxHandle) -> None:
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as workspace:
        ids = [row["id"] for row in workspace.list_brands()]
    with VisibilityClient(sandbox.url, sandbox.keys["scoped"]) as scoped:
        reachable = {row["id"] for row in scoped.list_brands()}
        outside = next(brand_id for brand_id in ids if brand_id not in reachable)
        with pytest.raises(write_operations.OperationError):
            write_operations.resolve_brand(scoped, outside)
        with pytest.raises(NotFoundError):  # what the service itself says about it
            next(iter(scoped.list_topics(outside)))


def test_a_topic_name_with_control_characters_is_refused_before_any_request_and_shown_escaped() -> None:
    with pytest.raises(write_operations.InvalidInputError) as caught:
        write_operations.validate_topic_name("Pricing\x1b[31m red\x07\rX")
    message = str(caught.value)
    assert "Pricing\\x1b[31m red\\x07\\rX" in message and message.isprintable()
    assert (
        write_operations.visible("ok name") == "ok name"
        and write_operations.visible("a\u202eb") == "a\\u202eb"
    )


def test_an_untrack_answered_404_on_its_first_send_is_refused_not_counted_as_done() -> None:
    """Nothing says this request was ever applied: the competitor was gone before it (another
    user, a stale plan), so the 404 is the answer, and the tracked set is not read back."""
    from tests.api.proxies import Seen, fake_service

    def script(seen: Seen) -> tuple[int, dict[str, str], object]:
        if seen.method == "DELETE":
            return 404, {}, {"error": {"code": "not_found", "message": "not tracked"}}
        return 200, {}, {"data": [], "has_more": False, "next_cursor": None}

    plan = write_operations.UntrackPlan(
        write_operations.Named("b1", "One"), write_operations.Named("c1", "Rival")
    )
    with (
        fake_service(script) as service,
        VisibilityClient(service.url, "vsk_untrack0123456789abcdef0123") as api,
        pytest.raises(NotFoundError),
    ):
        write_operations.untrack_competitor(api, plan)
    assert [seen.method for seen in service.seen] == ["DELETE"]
