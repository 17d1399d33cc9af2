"""The audit sensor's decisions, as pure functions: no HTTP, no Dagster, no clock."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.sensors.audit_cursor import (
    CURSOR_VERSION,
    AuditState,
    Candidate,
    CursorError,
    Verdict,
    apply_poll,
    block_endpoint,
    choose_submissions,
    dump_cursor,
    parse_cursor,
    polls_due,
    prune,
    rank_candidates,
    record_rejection,
    record_submission,
)
from pipelines.sensors.audits import AuditSensorSettings

T0 = dt.datetime(2026, 5, 4, 9, 0, tzinfo=dt.UTC)
POLICY = AuditSensorSettings(
    audits_per_day=2,
    reaudit_interval_days=7,
    deadline_minutes=10,
    max_polls_per_tick=2,
    max_submissions_per_tick=3,
)


def cand(url: str, brand: str = "b1", reason: str = "newly_cited") -> Candidate:
    return Candidate(url=url, brand_id=brand, reason=reason)


def submitted(state: AuditState, url: str, audit_id: str, at: dt.datetime, brand: str = "b1") -> AuditState:
    state, _ = record_submission(
        state, cand(url, brand), audit_id=audit_id, poll=f"/v1/audit-reports/{audit_id}", now=at
    )
    return state


def test_cursor_round_trips_every_field() -> None:
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    state, _, _ = apply_poll(
        state, "a1", status="pending", now=T0 + dt.timedelta(minutes=1), policy=POLICY, error="x"
    )
    state = block_endpoint(
        record_rejection(state, cand("https://a.example/bad"), now=T0), T0 + dt.timedelta(hours=1)
    )
    assert parse_cursor(dump_cursor(state)) == state


def test_empty_cursor_is_a_fresh_state() -> None:
    assert parse_cursor(None) == AuditState()
    assert parse_cursor("") == AuditState()


def test_cursor_of_another_version_is_refused_not_guessed() -> None:
    with pytest.raises(CursorError, match="version"):
        parse_cursor('{"version": 99, "pending": []}')
    with pytest.raises(CursorError):
        parse_cursor("not json")
    with pytest.raises(CursorError):
        parse_cursor(f'{{"version": {CURSOR_VERSION}, "pending": [{{"id": "x"}}]}}')


def test_dump_is_deterministic() -> None:
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    assert dump_cursor(state) == dump_cursor(parse_cursor(dump_cursor(state)))


def test_complete_poll_finishes_the_audit() -> None:
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    state, verdict, audit = apply_poll(
        state, "a1", status="complete", now=T0 + dt.timedelta(minutes=2), policy=POLICY
    )
    assert verdict is Verdict.COMPLETE
    assert audit.polls == 1
    assert state.pending == ()


def test_pending_poll_before_deadline_keeps_polling() -> None:
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    later = T0 + dt.timedelta(minutes=3)
    state, verdict, _ = apply_poll(state, "a1", status="pending", now=later, policy=POLICY)
    assert verdict is Verdict.PENDING
    assert [(p.id, p.polls, p.last_polled_at) for p in state.pending] == [("a1", 1, later)]


def test_pending_past_deadline_times_out() -> None:
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    state, verdict, _ = apply_poll(state, "a1", status="pending", now=T0 + POLICY.deadline, policy=POLICY)
    assert verdict is Verdict.TIMED_OUT
    assert state.pending == ()


def test_failed_poll_past_deadline_times_out_with_the_error() -> None:
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    state, verdict, audit = apply_poll(
        state, "a1", status=None, error="ServerError 503", now=T0 + dt.timedelta(hours=1), policy=POLICY
    )
    assert verdict is Verdict.TIMED_OUT
    assert audit.last_error == "ServerError 503"


def test_complete_at_the_last_poll_wins_over_the_deadline() -> None:
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    _, verdict, _ = apply_poll(state, "a1", status="complete", now=T0 + dt.timedelta(hours=5), policy=POLICY)
    assert verdict is Verdict.COMPLETE


def test_unknown_audit_cannot_be_polled() -> None:
    with pytest.raises(KeyError):
        apply_poll(AuditState(), "nope", status="complete", now=T0, policy=POLICY)


def test_polls_are_bounded_per_tick_overdue_first_then_least_recently_polled() -> None:
    state = AuditState()
    state = submitted(state, "https://a.example/1", "a1", T0)
    state = submitted(state, "https://a.example/2", "a2", T0 + dt.timedelta(minutes=1))
    state = submitted(state, "https://a.example/3", "a3", T0 + dt.timedelta(minutes=2))
    state, _, _ = apply_poll(state, "a2", status="pending", now=T0 + dt.timedelta(minutes=3), policy=POLICY)
    now = T0 + dt.timedelta(minutes=4)
    assert [p.id for p in polls_due(state, now, POLICY)] == ["a1", "a3"]
    overdue_now = T0 + dt.timedelta(minutes=10, seconds=30)  # only a1 is past its deadline
    state, _, _ = apply_poll(state, "a1", status="pending", now=T0 + dt.timedelta(minutes=9), policy=POLICY)
    assert next(p.id for p in polls_due(state, overdue_now, POLICY)) == "a1"


def test_same_url_is_not_submitted_twice_within_the_reaudit_interval() -> None:
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    state, _, _ = apply_poll(state, "a1", status="complete", now=T0 + dt.timedelta(minutes=2), policy=POLICY)
    day_later = T0 + dt.timedelta(days=1)
    assert choose_submissions(state, [cand("https://a.example/x")], now=day_later, policy=POLICY) == []
    after = T0 + POLICY.reaudit_interval + dt.timedelta(seconds=1)
    state = prune(state, after, POLICY)
    assert choose_submissions(state, [cand("https://a.example/x")], now=after, policy=POLICY) == [
        cand("https://a.example/x")
    ]


def test_pending_url_is_never_submitted_again() -> None:
    policy = AuditSensorSettings(reaudit_interval_days=0, audits_per_day=5)
    state = submitted(AuditState(), "https://a.example/x", "a1", T0)
    assert choose_submissions(state, [cand("https://a.example/x")], now=T0, policy=policy) == []


def test_daily_budget_is_per_brand_and_per_utc_day() -> None:
    state = submitted(AuditState(), "https://a.example/1", "a1", T0)
    wanted = [cand("https://a.example/2"), cand("https://a.example/3"), cand("https://b.example/1", "b2")]
    chosen = choose_submissions(state, wanted, now=T0, policy=POLICY)
    assert chosen == [cand("https://a.example/2"), cand("https://b.example/1", "b2")]
    next_day = dt.datetime(2026, 5, 5, 0, 1, tzinfo=dt.UTC)
    state = submitted(state, "https://a.example/2", "a2", T0)
    assert choose_submissions(state, [cand("https://a.example/3")], now=T0, policy=POLICY) == []
    assert choose_submissions(state, [cand("https://a.example/3")], now=next_day, policy=POLICY) == [
        cand("https://a.example/3")
    ]


def test_refused_urls_cost_no_budget_but_are_not_retried() -> None:
    state = record_rejection(AuditState(), cand("https://a.example/bad"), now=T0)
    wanted = [cand("https://a.example/bad"), cand("https://a.example/1"), cand("https://a.example/2")]
    assert choose_submissions(state, wanted, now=T0, policy=POLICY) == wanted[1:]


def test_the_per_tick_cap_bounds_submissions() -> None:
    wanted = [cand(f"https://a.example/{i}", f"b{i}") for i in range(5)]
    assert len(choose_submissions(AuditState(), wanted, now=T0, policy=POLICY)) == 3


def test_blocked_endpoint_submits_nothing_until_the_block_passes() -> None:
    state = block_endpoint(AuditState(), T0 + dt.timedelta(minutes=5))
    state = block_endpoint(state, T0 + dt.timedelta(minutes=1))  # the later block is kept
    assert (
        choose_submissions(
            state, [cand("https://a.example/1")], now=T0 + dt.timedelta(minutes=4), policy=POLICY
        )
        == []
    )
    later = T0 + dt.timedelta(minutes=6)
    assert prune(state, later, POLICY).endpoint_blocked_until is None
    assert choose_submissions(state, [cand("https://a.example/1")], now=later, policy=POLICY) != []


def test_prune_keeps_a_day_of_submissions_for_the_budget_even_with_no_reaudit_interval() -> None:
    policy = AuditSensorSettings(reaudit_interval_days=0, audits_per_day=1)
    state = submitted(AuditState(), "https://a.example/1", "a1", T0)
    assert len(prune(state, T0 + dt.timedelta(hours=23), policy).submissions) == 1
    assert prune(state, T0 + dt.timedelta(hours=25), policy).submissions == ()


def test_configured_urls_rank_before_newly_cited_and_duplicates_collapse() -> None:
    configured = [cand("https://a.example/c", reason="configured")]
    cited = [cand("https://a.example/n"), cand("https://a.example/c")]
    assert [c.url for c in rank_candidates(configured, cited)] == [
        "https://a.example/c",
        "https://a.example/n",
    ]


def test_unanswered_submission_counts_against_the_budget_and_is_not_resent() -> None:
    state = record_rejection(AuditState(), cand("https://a.example/lost"), now=T0, ambiguous=True)
    state = submitted(state, "https://a.example/1", "a1", T0)  # budget of 2 now spent
    wanted = [cand("https://a.example/lost"), cand("https://a.example/2")]
    assert choose_submissions(state, wanted, now=T0, policy=POLICY) == []
    assert parse_cursor(dump_cursor(state)) == state
