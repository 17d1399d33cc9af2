"""Pure state machine of the audit sensor: cursor in, decisions out, no I/O.

The cursor (docs/SENSORS.md) holds the pending audits, the recent submissions (re-audit interval
and daily budget) and ``endpoint_blocked_until`` (after a 429 or a spent ``X-Endpoint-Remaining``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from pydantic import TypeAdapter

if TYPE_CHECKING:  # the limits: the sensor's settings resource
    from pipelines.sensors.audits import AuditSensorSettings

CURSOR_VERSION = 1


class CursorError(ValueError):
    """The stored cursor cannot be read; refusing to guess keeps pending audits from being lost."""


class Verdict(StrEnum):
    """What one poll decided about a pending audit."""

    COMPLETE = "complete"
    PENDING = "pending"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class Candidate:
    """A URL the sensor may audit, and why (``newly_cited`` or ``configured``)."""

    url: str
    brand_id: str
    reason: str


@dataclass(frozen=True)
class PendingAudit:
    id: str
    url: str
    brand_id: str
    poll: str
    requested_at: dt.datetime
    reason: str = ""
    polls: int = 0
    last_polled_at: dt.datetime | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class Submission:
    """A URL sent to the service. ``audit_id`` is None when refused (4xx, free) or when the answer
    was lost (``ambiguous``: it may have been charged, so it counts against the budget)."""

    url: str
    brand_id: str
    audit_id: str | None
    submitted_at: dt.datetime
    ambiguous: bool = False

    @property
    def charged(self) -> bool:
        return self.audit_id is not None or self.ambiguous


@dataclass(frozen=True)
class AuditState:
    pending: tuple[PendingAudit, ...] = ()
    submissions: tuple[Submission, ...] = ()
    endpoint_blocked_until: dt.datetime | None = None


# --- cursor (de)serialisation -------------------------------------------------------------------

StateT = TypeVar("StateT")


def read_cursor(raw: str | None, state: TypeAdapter[StateT], fresh: StateT, what: str) -> StateT:
    """A state written by :func:`write_cursor` (``fresh`` when empty); a :class:`CursorError` for
    another version or shape, so that nothing is silently forgotten."""
    if not raw:
        return fresh
    try:
        doc = json.loads(raw)
        version = doc.get("version")
        if version != CURSOR_VERSION:
            raise CursorError(
                f"{what} has version {version!r}, this code reads version {CURSOR_VERSION}; "
                "upgrade the code or reset the cursor after checking what it holds"
            )
        return state.validate_python(doc)
    except CursorError:
        raise
    except (ValueError, AttributeError) as exc:  # pydantic's ValidationError is a ValueError
        raise CursorError(f"{what} is not valid: {exc!r}") from exc


def write_cursor(value: StateT, state: TypeAdapter[StateT]) -> str:
    """Compact, deterministic JSON (sorted keys), so an unchanged state gives an unchanged cursor."""
    doc = {"version": CURSOR_VERSION, **state.dump_python(value, mode="json")}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


_STATE = TypeAdapter(AuditState)


def parse_cursor(raw: str | None) -> AuditState:
    return read_cursor(raw, _STATE, AuditState(), "audit sensor cursor")


def dump_cursor(state: AuditState) -> str:
    return write_cursor(state, _STATE)


# --- polling ------------------------------------------------------------------------------------


def is_overdue(audit: PendingAudit, now: dt.datetime, policy: AuditSensorSettings) -> bool:
    return now - audit.requested_at >= policy.deadline


def polls_due(state: AuditState, now: dt.datetime, policy: AuditSensorSettings) -> list[PendingAudit]:
    """At most ``max_polls_per_tick`` audits to poll: overdue ones first (their last chance), then the
    least recently polled."""

    def order(audit: PendingAudit) -> tuple[int, dt.datetime, dt.datetime]:
        never = dt.datetime.min.replace(tzinfo=dt.UTC)
        return (0 if is_overdue(audit, now, policy) else 1, audit.last_polled_at or never, audit.requested_at)

    return sorted(state.pending, key=order)[: policy.max_polls_per_tick]


def apply_poll(
    state: AuditState,
    audit_id: str,
    *,
    status: str | None,
    now: dt.datetime,
    policy: AuditSensorSettings,
    error: str | None = None,
) -> tuple[AuditState, Verdict, PendingAudit]:
    """Fold one poll result into the state, with the verdict and the audit as polled: ``complete``
    finishes the audit; anything else (``None``: the poll failed, ``error`` says why) keeps it
    pending until the deadline, then times it out."""
    audit = next((p for p in state.pending if p.id == audit_id), None)
    if audit is None:
        raise KeyError(f"audit {audit_id} is not pending")
    polled = replace(audit, polls=audit.polls + 1, last_polled_at=now, last_error=error)
    rest = tuple(p for p in state.pending if p.id != audit_id)
    if status == Verdict.COMPLETE:
        return replace(state, pending=rest), Verdict.COMPLETE, polled
    if is_overdue(polled, now, policy):
        return replace(state, pending=rest), Verdict.TIMED_OUT, polled
    pending = tuple(polled if p.id == audit_id else p for p in state.pending)
    return replace(state, pending=pending), Verdict.PENDING, polled


# --- submitting ---------------------------------------------------------------------------------


def prune(state: AuditState, now: dt.datetime, policy: AuditSensorSettings) -> AuditState:
    """Forget submissions older than the re-audit interval (at least a day: the daily budget) and an
    endpoint block that has passed."""
    horizon = now - max(policy.reaudit_interval, dt.timedelta(days=1))
    kept = tuple(s for s in state.submissions if s.submitted_at > horizon)
    blocked = state.endpoint_blocked_until
    return replace(
        state, submissions=kept, endpoint_blocked_until=blocked if blocked and blocked > now else None
    )


def choose_submissions(
    state: AuditState,
    candidates: Iterable[Candidate],
    *,
    now: dt.datetime,
    policy: AuditSensorSettings,
) -> list[Candidate]:
    """Candidates to submit this tick, in order, within the re-audit interval, each brand's daily budget,
    the endpoint's block and ``max_submissions_per_tick``.
    """
    if state.endpoint_blocked_until is not None and state.endpoint_blocked_until > now:
        return []
    recent_cutoff = now - policy.reaudit_interval
    busy = {p.url for p in state.pending}
    busy |= {s.url for s in state.submissions if s.submitted_at > recent_cutoff}
    day = now.astimezone(dt.UTC).date()
    # refusals cost nothing; an unanswered submission may have been charged
    used = Counter(
        s.brand_id for s in state.submissions if s.charged and s.submitted_at.astimezone(dt.UTC).date() == day
    )
    chosen: list[Candidate] = []
    for candidate in candidates:
        if len(chosen) >= policy.max_submissions_per_tick:
            break
        if candidate.url in busy or used[candidate.brand_id] >= policy.audits_per_day:
            continue
        chosen.append(candidate)
        busy.add(candidate.url)
        used[candidate.brand_id] += 1
    return chosen


def record_submission(
    state: AuditState, candidate: Candidate, *, audit_id: str, poll: str, now: dt.datetime
) -> tuple[AuditState, PendingAudit]:
    """Remember an accepted submission as pending and as spent budget."""
    pending = PendingAudit(
        id=audit_id,
        url=candidate.url,
        brand_id=candidate.brand_id,
        poll=poll,
        requested_at=now,
        reason=candidate.reason,
    )
    submission = Submission(
        url=candidate.url, brand_id=candidate.brand_id, audit_id=audit_id, submitted_at=now
    )
    return (
        replace(state, pending=(*state.pending, pending), submissions=(*state.submissions, submission)),
        pending,
    )


def record_rejection(
    state: AuditState, candidate: Candidate, *, now: dt.datetime, ambiguous: bool = False
) -> AuditState:
    """Remember a URL that got no audit to poll, so it is not sent again within the re-audit interval
    (``ambiguous``: no answer, so it may have been created and charged: never pay twice)."""
    submission = Submission(
        url=candidate.url, brand_id=candidate.brand_id, audit_id=None, submitted_at=now, ambiguous=ambiguous
    )
    return replace(state, submissions=(*state.submissions, submission))


def block_endpoint(state: AuditState, until: dt.datetime) -> AuditState:
    """Stop submitting until ``until`` (keeps the later of two blocks)."""
    current = state.endpoint_blocked_until
    return replace(state, endpoint_blocked_until=until if current is None or until > current else current)


def rank_candidates(configured: Sequence[Candidate], newly_cited: Sequence[Candidate]) -> list[Candidate]:
    """Configured URLs first (a user asked for them), then newly cited pages; one entry per URL."""
    first: dict[str, Candidate] = {}
    for candidate in (*configured, *newly_cited):
        first.setdefault(candidate.url, candidate)
    return list(first.values())
