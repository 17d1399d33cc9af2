"""What a user changes on the service: audit one URL, untrack a competitor, create or rename a topic.

Each operation is a *plan* (``plan_*``: names resolved with read-only calls, shown for confirmation)
and the change, whose outcome gives the line a user reads (``describe()``) and Dagster metadata. A
POST is never repeated (no idempotency key); a PATCH or DELETE whose answer was lost is read back.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import urlsplit

from resources.api.client import VisibilityClient
from resources.api.errors import NotFoundError, VisibilityAPIError
from resources.api.redaction import sanitize
from resources.failures import FailureKind

#: Most sends of one rename or untrack (a read-back after each lost answer decides on the next).
MAX_WRITE_SENDS = 3
#: Most candidate names an "unknown name" message lists.
_LISTED_NAMES = 10
#: Longest name or URL quoted in a message.
_MAX_NAME_CHARS = 200
DEFAULT_AUDIT_TIMEOUT_SECONDS = 300.0
DEFAULT_POLL_INTERVAL_SECONDS = 2.0
#: Longest audit wait and poll interval, for the ``audit`` command's flags and the job's fields alike.
MAX_AUDIT_TIMEOUT_SECONDS = 86_400.0
MAX_POLL_INTERVAL_SECONDS = 600.0

Metadata = dict[str, str | int | float | bool | None]


@dataclass(frozen=True)
class Plan:
    """What an operation will do, resolved and ready to be confirmed."""

    @property
    def changes(self) -> bool:
        """False when the change is already there: nothing will be sent."""
        return True

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Outcome:
    """What an operation did: ``describe()`` is the line a user reads."""

    @property
    def ok(self) -> bool:
        """False when the service answered but did not do it (untracked: false)."""
        return True

    def describe(self) -> str:
        raise NotImplementedError

    def metadata(self) -> Metadata:
        """The fields: a named record as ``<field>_id`` and ``<field>_name``, a time in ISO 8601."""
        values: Metadata = {}
        for name in (field.name for field in fields(self)):
            value = getattr(self, name)
            if isinstance(value, Named):
                values |= {f"{name}_id": value.id, f"{name}_name": value.shown}
            elif isinstance(value, dt.datetime):
                values[name] = value.isoformat()
            elif not isinstance(value, Mapping):
                values[name] = value
        return values


class OperationError(ValueError):
    """An operation cannot be carried out as asked (no record or several have the name given)."""


class InvalidInputError(OperationError):
    """A malformed argument (URL, name), found before any request: a usage error (exit 2)."""

    failure_kind = FailureKind.CONFIGURATION


class AuditStillPendingError(TimeoutError):
    """The audit was requested (and charged) but had not completed when the wait ended."""

    def __init__(self, outcome: AuditOutcome, waited_seconds: float) -> None:
        self.outcome = outcome
        super().__init__(
            f"audit {outcome.audit_id} of {outcome.url} still {outcome.status} after {waited_seconds:g}s; "
            f"it may still complete: its report is at {outcome.poll}"
        )


@dataclass(frozen=True)
class Named:
    """A record the user named: ``name`` as the service spells it (look-ups compare it), ``shown``
    scrubbed and bounded (printed or stored)."""

    id: str
    name: str

    @property
    def shown(self) -> str:
        return _quoted(self.name)

    def __str__(self) -> str:
        return f"'{self.shown}' ({self.id})"


def _quoted(value: object) -> str:
    return sanitize(value, _MAX_NAME_CHARS)


def _wanted(kind: str, ref: str) -> str:
    """``ref`` without its surrounding blanks; an empty one is refused before any request."""
    wanted = ref.strip()
    if not wanted:
        raise InvalidInputError(f"the {kind} is empty: give its id or its name")
    return wanted


def _resolve(kind: str, ref: str, rows: Iterable[Mapping[str, Any]], where: str, name_field: str) -> Named:
    """The one row whose id is ``ref``, or whose name is ``ref`` (case-insensitively)."""
    wanted = _wanted(kind, ref)
    candidates = [Named(row["id"], row[name_field]) for row in rows]  # both validated as strings
    for candidate in candidates:
        if candidate.id.lower() == wanted.lower():
            return candidate
    named = [c for c in candidates if c.name.casefold() == wanted.casefold()]
    if len(named) == 1:
        return named[0]
    if named:
        ids = ", ".join(c.id for c in named)
        raise OperationError(
            f"{len(named)} {kind}s {where} are named '{_quoted(wanted)}' ({ids}): give the id"
        )
    listed = ", ".join(f"'{c.shown}'" for c in candidates[:_LISTED_NAMES])
    more = f" and {len(candidates) - _LISTED_NAMES} more" if len(candidates) > _LISTED_NAMES else ""
    known = f"; known: {listed}{more}" if candidates else f"; there is no {kind} {where}"
    raise OperationError(f"no {kind} {where} has the id or name '{_quoted(wanted)}'{known}")


def resolve_brand(client: VisibilityClient, ref: str) -> Named:
    """A brand by id or name, among the brands the key reaches (``GET /v1/brands``)."""
    return resolve_brands(client, [ref])[0]


def resolve_brands(client: VisibilityClient, refs: Sequence[str]) -> list[Named]:
    """Brands by id or name, from one listing of the brands the key reaches."""
    wanted = [_wanted("brand", ref) for ref in refs]
    brands = list(client.list_brands())
    return [_resolve("brand", ref, brands, "reachable with this key", "name") for ref in wanted]


def resolve_topic(client: VisibilityClient, brand: Named, ref: str) -> Named:
    """A topic of ``brand`` by id or name."""
    return _resolve("topic", ref, client.list_topics(brand.id), f"of brand {brand}", "name")


def validate_audit_url(url: str) -> str:
    """An absolute http(s) URL, as the audit endpoint needs."""
    candidate = url.strip()
    parts = urlsplit(candidate)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in candidate):
        raise InvalidInputError(
            f"the URL to audit must be an absolute http(s) URL such as https://example.com/page, "
            f"got '{_quoted(url)}'"
        )
    return candidate


def visible(text: str) -> str:
    """``text`` with control and format characters escaped (``\\x1b``): safe to print on a terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def validate_topic_name(name: str) -> str:
    """A topic name without surrounding blanks; refused empty or with control characters."""
    cleaned = name.strip()
    if not cleaned:
        raise InvalidInputError("the topic name is empty")
    if not cleaned.isprintable():
        raise InvalidInputError(
            f"the topic name '{visible(cleaned)[:_MAX_NAME_CHARS]}' holds control characters; "
            "give it as plain text"
        )
    return cleaned


Row = dict[str, Any]


def _send_and_confirm(
    send: Callable[[], Row], applied: Callable[[], Row | None], what: str
) -> tuple[Row, str | None]:
    """Send a PATCH or DELETE; after an answer that does not say whether it was applied, read the
    record back (``applied``: the row as changed, or None) instead of repeating it blindly. Returns
    the answer (or the row read back) and how the outcome was learnt (None: the first answer said)."""
    notes: list[str] = []
    for _ in range(MAX_WRITE_SENDS):
        try:
            return send(), "; ".join(notes) or None
        except NotFoundError:
            done = applied() if notes else None
            if done is None:
                raise
            notes.append("the repeated request was answered 404 and reading it back shows it done")
            return done, "; ".join(notes)
        except VisibilityAPIError as exc:
            if not exc.may_have_applied:
                raise
            lost = f"the answer was lost ({_quoted(exc.detail.split(';')[0])})"
            done = applied()
            if done is not None:
                notes.append(f"{lost}; reading it back shows it applied")
                return done, "; ".join(notes)
            notes.append(f"{lost}; reading it back shows it not applied, so it was sent again")
    raise OperationError(
        f"{what}: not applied after {MAX_WRITE_SENDS} attempts ({'; '.join(notes)}); nothing changed"
    )


# audit one URL


@dataclass(frozen=True)
class AuditPlan(Plan):
    brand: Named
    url: str
    wait: bool = True
    timeout_seconds: float = DEFAULT_AUDIT_TIMEOUT_SECONDS
    poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS

    def describe(self) -> str:
        waiting = f", then wait up to {self.timeout_seconds:g}s for its report" if self.wait else ""
        cost = " (an audit spends the workspace's audit budget)"
        return f"audit {self.url} for brand {self.brand}{waiting}{cost}"


@dataclass(frozen=True)
class AuditOutcome(Outcome):
    """An audit as last seen: ``pending`` right after the request, ``complete`` with its report."""

    audit_id: str
    brand: Named
    url: str
    status: str
    poll: str
    requested_at: dt.datetime
    completed_at: dt.datetime | None = None
    report: Mapping[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def report_json(self) -> str | None:
        return None if self.report is None else json.dumps(self.report, sort_keys=True)

    def key_fields(self) -> Metadata:
        """The report's headline, where it has one (the spec does not define the report's fields)."""
        report = self.report or {}
        headline: Metadata = {}
        score = report.get("score")
        if isinstance(score, int | float) and not isinstance(score, bool):
            headline["score"] = score
        findings = report.get("findings")
        if isinstance(findings, list):
            checks = [f for f in findings if isinstance(f, Mapping) and isinstance(f.get("passed"), bool)]
            failed = [_quoted(f.get("id") or f.get("title") or "?") for f in checks if not f["passed"]]
            headline["findings"] = len(findings)
            if checks:
                headline["checks_failed"] = len(failed)
                headline["failed_checks"] = ", ".join(failed) or None
        return headline

    def describe(self) -> str:
        head = f"audit {self.audit_id} of {self.url} for brand {self.brand}: {self.status}"
        if not self.complete:
            return f"{head}; its report will be at {self.poll}"
        fields = self.key_fields()
        parts = []
        if "score" in fields:
            parts.append(f"score {fields['score']:g}")
        if "checks_failed" in fields:
            failed = f" ({fields['failed_checks']})" if fields["failed_checks"] else ""
            parts.append(f"{fields['checks_failed']} of {fields['findings']} checks failed{failed}")
        elif "findings" in fields:
            parts.append(f"{fields['findings']} findings")
        return head + (", " + ", ".join(parts) if parts else "")

    def metadata(self) -> Metadata:
        return {**super().metadata(), **self.key_fields()}


def plan_audit(
    client: VisibilityClient,
    brand: str,
    url: str,
    *,
    wait: bool = True,
    timeout_seconds: float = DEFAULT_AUDIT_TIMEOUT_SECONDS,
    poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS,
) -> AuditPlan:
    """Validate the URL first (no request on a typo), then resolve the brand."""
    checked = validate_audit_url(url)
    return AuditPlan(resolve_brand(client, brand), checked, wait, timeout_seconds, poll_interval_seconds)


def submit_audit(client: VisibilityClient, plan: AuditPlan) -> AuditOutcome:
    """``POST /v1/audit-reports``: the pending audit (sent once; never repeated after no answer)."""
    requested_at = dt.datetime.now(dt.UTC)
    created = client.create_audit(plan.url, plan.brand.id)
    return AuditOutcome(
        audit_id=str(created["id"]),
        brand=plan.brand,
        url=str(created.get("url") or plan.url),
        status=str(created.get("status") or "pending"),
        poll=str(created["poll"]),
        requested_at=requested_at,
    )


def await_audit(client: VisibilityClient, pending: AuditOutcome, plan: AuditPlan) -> AuditOutcome:
    """Poll until the report is complete; ``AuditStillPendingError`` when ``plan.timeout_seconds`` pass."""
    report = client.wait_for_audit(
        pending.poll, timeout_seconds=plan.timeout_seconds, interval_seconds=plan.poll_interval_seconds
    )
    if report.get("status") != "complete":
        raise AuditStillPendingError(pending, plan.timeout_seconds)
    return replace(
        pending, status=str(report.get("status")), completed_at=dt.datetime.now(dt.UTC), report=report
    )


# untrack a competitor


@dataclass(frozen=True)
class UntrackPlan(Plan):
    brand: Named
    competitor: Named

    def describe(self) -> str:
        return (
            f"untrack competitor {self.competitor} of brand {self.brand}: it leaves share of voice and "
            "competitor trends; its mentions are kept"
        )


@dataclass(frozen=True)
class UntrackOutcome(Outcome):
    brand: Named
    competitor: Named
    untracked: bool
    #: how the outcome was learnt when the first answer was lost (read back, sent again)
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.untracked

    def describe(self) -> str:
        done = "untracked" if self.untracked else "NOT untracked (the service said untracked: false)"
        return f"competitor {self.competitor} of brand {self.brand}: {done}" + (
            f" ({self.note})" if self.note else ""
        )


def plan_untrack(client: VisibilityClient, brand: str, competitor: str) -> UntrackPlan:
    resolved = resolve_brand(client, brand)
    rows = client.list_tracked_competitors(resolved.id)
    where = f"tracked by brand {resolved}"
    return UntrackPlan(resolved, _resolve("competitor", competitor, rows, where, "brand_name"))


def untrack_competitor(client: VisibilityClient, plan: UntrackPlan) -> UntrackOutcome:
    """``DELETE /v1/brands/{id}/tracked-competitors/{competitorId}``; read back after a lost answer."""

    def untracked() -> Row | None:
        still = {str(row.get("id")) for row in client.list_tracked_competitors(plan.brand.id)}
        return None if plan.competitor.id in still else {"id": plan.competitor.id, "untracked": True}

    answer, note = _send_and_confirm(
        lambda: client.untrack_competitor(plan.brand.id, plan.competitor.id),
        untracked,
        f"untrack competitor {plan.competitor}",
    )
    return UntrackOutcome(plan.brand, plan.competitor, answer.get("untracked") is True, note)


# topics


@dataclass(frozen=True)
class TopicOutcome(Outcome):
    """``action``: ``created``, ``renamed``, or ``unchanged`` (nothing was sent)."""

    brand: Named
    topic: Named
    action: str
    previous_name: str | None = None
    prompt_count: int | None = None
    #: how the outcome was learnt when the first answer was lost (read back, sent again)
    note: str | None = None

    def describe(self) -> str:
        if self.action == "renamed":
            renamed = f"renamed from '{self.previous_name}' to '{self.topic.shown}'"
            note = f" ({self.note})" if self.note else ""
            return f"topic {self.topic.id} of brand {self.brand}: {renamed}{note}"
        if self.action == "created":
            return f"topic {self.topic} of brand {self.brand}: created"
        return f"topic {self.topic} of brand {self.brand}: unchanged (already so named); nothing was sent"


@dataclass(frozen=True)
class CreateTopicPlan(Plan):
    brand: Named
    name: str
    #: A topic of the brand already so named (case-insensitively): nothing is created.
    existing: Named | None = None

    @property
    def changes(self) -> bool:
        return self.existing is None

    def describe(self) -> str:
        if self.existing is not None:
            return f"brand {self.brand} already has topic {self.existing}: nothing to create"
        return f"create topic '{_quoted(self.name)}' for brand {self.brand}"


@dataclass(frozen=True)
class RenameTopicPlan(Plan):
    brand: Named
    topic: Named
    new_name: str

    @property
    def changes(self) -> bool:
        return self.topic.name != self.new_name

    def describe(self) -> str:
        if not self.changes:
            return f"topic {self.topic} of brand {self.brand} is already so named: nothing to rename"
        return (
            f"rename topic {self.topic} of brand {self.brand} to '{_quoted(self.new_name)}' "
            "(its prompts stay filed under it)"
        )


def plan_create_topic(client: VisibilityClient, brand: str, name: str) -> CreateTopicPlan:
    cleaned = validate_topic_name(name)
    resolved = resolve_brand(client, brand)
    existing = next(
        (
            Named(row["id"], row["name"])
            for row in client.list_topics(resolved.id)
            if row["name"].strip().casefold() == cleaned.casefold()
        ),
        None,
    )
    return CreateTopicPlan(resolved, cleaned, existing)


def create_topic(client: VisibilityClient, plan: CreateTopicPlan) -> TopicOutcome:
    """``POST /v1/brands/{id}/topics``, unless the plan found the topic already there."""
    if plan.existing is not None:
        return TopicOutcome(plan.brand, plan.existing, "unchanged")
    row = client.create_topic(plan.brand.id, plan.name)
    topic = Named(row["id"], row["name"])
    return TopicOutcome(plan.brand, topic, "created", prompt_count=row.get("prompt_count"))


def plan_rename_topic(client: VisibilityClient, brand: str, topic: str, new_name: str) -> RenameTopicPlan:
    cleaned = validate_topic_name(new_name)
    resolved = resolve_brand(client, brand)
    return RenameTopicPlan(resolved, resolve_topic(client, resolved, topic), cleaned)


def rename_topic(client: VisibilityClient, plan: RenameTopicPlan) -> TopicOutcome:
    """``PATCH /v1/brands/{id}/topics/{topicId}``; nothing is sent when the name is already right."""
    if not plan.changes:
        return TopicOutcome(plan.brand, plan.topic, "unchanged")

    def renamed() -> Row | None:
        rows = client.list_topics(plan.brand.id)
        row = next((r for r in rows if str(r.get("id")) == plan.topic.id), None)
        return row if row is not None and row.get("name") == plan.new_name else None

    row, note = _send_and_confirm(
        lambda: client.rename_topic(plan.brand.id, plan.topic.id, plan.new_name),
        renamed,
        f"rename topic {plan.topic}",
    )
    topic = Named(row["id"], row["name"])
    return TopicOutcome(
        plan.brand,
        topic,
        "renamed",
        previous_name=plan.topic.shown,
        prompt_count=row.get("prompt_count"),
        note=note,
    )
