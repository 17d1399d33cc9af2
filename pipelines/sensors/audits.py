"""The audit sensor: submits URL audits within a budget, polls them, and lands each once
(docs/SENSORS.md). Its decisions are the pure functions of :mod:`pipelines.sensors.audit_cursor`;
this module does the I/O.
"""

import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from dagster import (
    AssetObservation,
    ConfigurableResource,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from assets.audits import (
    TAG_AUDIT_BRAND,
    TAG_AUDIT_ID,
    TAG_AUDIT_STATUS,
    AuditLandingConfig,
    audit_landing_job,
    audit_reports,
)
from pipelines.sensors.audit_cursor import (
    AuditState,
    Candidate,
    PendingAudit,
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
from resources.api.client import VisibilityClient
from resources.api.endpoints import CREATE_AUDIT
from resources.api.errors import (
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    ServiceUnreachableError,
    TransportError,
    VisibilityAPIError,
)
from resources.api.resource import VisibilityAPIResource
from resources.failures import FailureKind, failure_kind
from resources.warehouse import queries
from resources.warehouse.base import Warehouse
from resources.warehouse.resource import WarehouseResource
from settings import AuditPolicy, load_audit_settings

T = TypeVar("T")

AUDIT_SENSOR_NAME = "audit_sensor"
#: The budget key of the audit endpoint (the client names endpoints "METHOD template").
AUDIT_ENDPOINT = CREATE_AUDIT.key
#: When the service refuses with endpoint_rate_limited and gives no reset time.
DEFAULT_ENDPOINT_BACKOFF = dt.timedelta(minutes=5)
#: After 403 (e.g. a trialing workspace may not order audits): try again this much later.
FORBIDDEN_BACKOFF = dt.timedelta(hours=1)
#: No answer after the client's retries within the tick's deadline (the request may have gone through).
SERVICE_UNAVAILABLE = (ServerError, TransportError)
#: Failures that make every further poll of this tick fail or wait too (the service is limiting or
#: failing, not this audit): stop polling until next tick.
POLLING_STOPPERS = frozenset({FailureKind.TRANSIENT, FailureKind.UNREACHABLE})


class AuditSensorSettings(ConfigurableResource, AuditPolicy):
    """Which pages the audit sensor audits and how many audits it may request a day (the
    VISIBILITY_AUDIT_* settings), and how much one tick does."""

    max_polls_per_tick: int = 20
    max_submissions_per_tick: int = 5
    #: Longest a tick waits on the rate-limit budget or retries before giving up for this tick.
    tick_request_deadline_seconds: float = 20.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "AuditSensorSettings":
        """Settings from ``VISIBILITY_AUDIT_*`` variables (defaults where unset); a ConfigError
        naming the variable when one is malformed."""
        return cls(**load_audit_settings(env).model_dump())


@dataclass
class TickLog:
    """What one tick did, for the tick's log line and its skip reason."""

    lines: list[str] = field(default_factory=list)
    run_requests: list[RunRequest] = field(default_factory=list)
    events: list[AssetObservation] = field(default_factory=list)

    def summary(self) -> str:
        return "; ".join(self.lines) or "nothing to do"


def _iso(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat()


def _observation(audit: PendingAudit, status: str, at: dt.datetime) -> AssetObservation:
    """The audit's state on ``audit_reports`` at the tick that saw it (a timed-out audit shows here
    even before its landing run ends)."""
    return AssetObservation(
        asset_key=audit_reports.key,
        metadata={
            "audit_id": audit.id,
            "url": audit.url,
            "brand_id": audit.brand_id,
            "status": status,
            "requested_at": _iso(audit.requested_at),
            "at": _iso(at),
            "polls": audit.polls,
        },
    )


def _host_matches(url: str, domain: str) -> bool:
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    domain = domain.lower().strip().rstrip(".")
    if domain.startswith("www."):
        domain = domain[4:]
    return bool(domain) and (host == domain or host.endswith("." + domain))


def configured_candidates(urls: list[str], domains: Mapping[str, str]) -> tuple[list[Candidate], list[str]]:
    """Configured URLs with the brand whose domain they are on; and the URLs no brand owns."""
    found: list[Candidate] = []
    orphans: list[str] = []
    for url in urls:
        owners = sorted(b for b, d in domains.items() if _host_matches(url, d))
        if owners:
            found.append(Candidate(url=url, brand_id=owners[0], reason="configured"))
        else:
            orphans.append(url)
    return found, orphans


def landing_request(audit: PendingAudit, verdict: Verdict, at: dt.datetime, report: Any = None) -> RunRequest:
    """The run that lands one audit state; keyed so each state lands once."""
    config = AuditLandingConfig(
        audit_id=audit.id,
        brand_id=audit.brand_id,
        url=audit.url,
        status=verdict.value,
        poll=audit.poll,
        requested_at=_iso(audit.requested_at),
        completed_at=_iso(at) if verdict is Verdict.COMPLETE else None,
        timed_out_at=_iso(at) if verdict is Verdict.TIMED_OUT else None,
        report_json=json.dumps(report, sort_keys=True) if verdict is Verdict.COMPLETE else None,
    )
    run_key = audit.id if verdict is not Verdict.PENDING else f"{audit.id}:requested"
    return RunRequest(
        run_key=run_key,
        run_config={"ops": {"audit_reports": {"config": config.model_dump()}}},
        tags={TAG_AUDIT_ID: audit.id, TAG_AUDIT_STATUS: verdict.value, TAG_AUDIT_BRAND: audit.brand_id},
    )


def _error_text(exc: VisibilityAPIError) -> str:
    return f"{type(exc).__name__} {exc.status or ''} {exc.code or ''}".strip()


def poll_pending(
    client: VisibilityClient, state: AuditState, now: dt.datetime, settings: AuditSensorSettings, log: TickLog
) -> AuditState:
    """Poll what is due; queue a landing for every audit that finished or timed out."""
    for audit in polls_due(state, now, settings):
        status: str | None = None
        report: dict[str, Any] | None = None
        error: str | None = None
        try:
            report = client.poll_audit(audit.poll)
            status = str(report.get("status")) if isinstance(report, Mapping) else None
        except VisibilityAPIError as exc:
            if failure_kind(exc) in POLLING_STOPPERS:  # every further poll would wait it out too
                log.lines.append(f"polling stopped for this tick: {_error_text(exc)}")
                break
            error = _error_text(exc)  # this audit's poll failed (404, bad shape): keep going
        state, verdict, polled = apply_poll(
            state, audit.id, status=status, now=now, policy=settings, error=error
        )
        if verdict is Verdict.PENDING:
            continue
        log.run_requests.append(landing_request(polled, verdict, now, report))
        log.events.append(_observation(polled, verdict.value, now))
        if verdict is Verdict.COMPLETE:
            log.lines.append(f"audit {polled.id} of {polled.url} complete after {polled.polls} polls")
        else:
            why = f" (last poll: {polled.last_error})" if polled.last_error else ""
            log.lines.append(
                f"audit {polled.id} of {polled.url} TIMED OUT: pending {now - polled.requested_at} "
                f"past the deadline{why}"
            )
    return state


def _read(
    warehouse: WarehouseResource, what: str, fn: Callable[[Warehouse], T], default: T, log: TickLog
) -> T:
    """One warehouse read; a missing table (nothing synced yet) or a busy file yields ``default``."""
    try:
        with warehouse.get_warehouse() as wh:
            return fn(wh)
    except Exception as exc:  # an unsynced or locked warehouse must not stop polling
        log.lines.append(f"{what} not read from the warehouse ({type(exc).__name__})")
        return default


def gather_candidates(
    warehouse: WarehouseResource, settings: AuditSensorSettings, today: dt.date, log: TickLog
) -> list[Candidate]:
    """Configured URLs, then the brands' own pages first cited within ``new_page_window_days``."""
    since = today - dt.timedelta(days=settings.new_page_window_days)
    configured: list[Candidate] = []
    if settings.urls:
        domains = _read(warehouse, "brand domains", queries.brand_domains, {}, log)
        configured, orphans = configured_candidates(settings.urls, domains)
        if orphans:
            log.lines.append(
                f"{len(orphans)} configured URL(s) on no brand's domain: {', '.join(orphans[:3])}"
            )
    newly = _read(
        warehouse, "newly cited pages", lambda wh: queries.own_pages_first_cited_since(wh, since), [], log
    )
    cited = [Candidate(url=p.url, brand_id=p.brand_id, reason="newly_cited") for p in newly]
    return rank_candidates(configured, cited)


def submit(
    client: VisibilityClient,
    state: AuditState,
    candidates: list[Candidate],
    now: dt.datetime,
    settings: AuditSensorSettings,
    log: TickLog,
) -> AuditState:
    """Submit what the budget allows; every accepted audit goes into the state at once."""
    submitted = 0
    for candidate in choose_submissions(state, candidates, now=now, policy=settings):
        remaining = client.budget.snapshot().endpoint_remaining.get(AUDIT_ENDPOINT)
        if remaining is not None and remaining <= 0:
            log.lines.append("audit endpoint budget spent (X-Endpoint-Remaining 0); submitting next tick")
            break
        try:
            created = client.create_audit(candidate.url, candidate.brand_id)
        except RateLimitError as exc:
            state = block_endpoint(state, now + DEFAULT_ENDPOINT_BACKOFF)
            log.lines.append(f"audit endpoint refused ({_error_text(exc)}); no submission before next window")
            break
        except PermissionDeniedError as exc:
            state = block_endpoint(state, now + FORBIDDEN_BACKOFF)
            log.lines.append(f"audits not allowed for this workspace ({_error_text(exc)}); paused 1 hour")
            break
        except (BadRequestError, NotFoundError) as exc:
            state = record_rejection(state, candidate, now=now)
            log.lines.append(f"audit of {candidate.url} refused: {_error_text(exc)}")
            continue
        except ServiceUnreachableError as exc:
            # never sent (the service was already past the retry deadline): safe to try next tick
            log.lines.append(f"audit of {candidate.url} not sent ({_error_text(exc)}); submitting next tick")
            break
        except SERVICE_UNAVAILABLE as exc:
            # No answer: the audit may exist (and be charged). Never pay twice: do not resend it.
            state = record_rejection(state, candidate, now=now, ambiguous=True)
            log.lines.append(f"audit of {candidate.url} unconfirmed ({_error_text(exc)}); not resent")
            break
        state, pending = record_submission(
            state, candidate, audit_id=str(created["id"]), poll=str(created["poll"]), now=now
        )
        submitted += 1
        log.run_requests.append(landing_request(pending, Verdict.PENDING, now))
        log.events.append(_observation(pending, "pending", now))
    if submitted:
        log.lines.append(f"submitted {submitted} audit(s)")
    return state


def evaluate_tick(
    *,
    state: AuditState,
    client: VisibilityClient,
    warehouse: WarehouseResource,
    settings: AuditSensorSettings,
    now: dt.datetime,
) -> tuple[AuditState, TickLog]:
    """One tick. API errors end the tick early but never lose what it already did."""
    log = TickLog()
    state = prune(state, now, settings)
    try:
        state = poll_pending(client, state, now, settings, log)
        candidates = gather_candidates(warehouse, settings, now.date(), log)
        state = submit(client, state, candidates, now, settings, log)
    except VisibilityAPIError as exc:
        log.lines.append(f"tick ended early: {_error_text(exc)}")
    if state.pending:
        log.lines.append(f"{len(state.pending)} audit(s) pending")
    return state, log


@sensor(
    name=AUDIT_SENSOR_NAME,
    job=audit_landing_job,
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.STOPPED,
    description="Submits URL audits (newly cited own pages and configured URLs) within a daily budget, "
    "polls them, and lands each in audit_reports once (run key = audit id). Off by default: audits "
    "cost money. Cursor format and settings: docs/SENSORS.md.",
)
def audit_sensor(
    context: SensorEvaluationContext,
    api: VisibilityAPIResource,
    warehouse: WarehouseResource,
    audit_settings: AuditSensorSettings,
) -> SensorResult:
    state = parse_cursor(context.cursor)
    now = dt.datetime.now(dt.UTC)
    with api.get_client(retry_deadline_seconds=audit_settings.tick_request_deadline_seconds) as client:
        state, log = evaluate_tick(
            state=state, client=client, warehouse=warehouse, settings=audit_settings, now=now
        )
    context.log.info(log.summary())
    cursor = dump_cursor(state)
    if not log.run_requests:
        return SensorResult(skip_reason=log.summary(), cursor=cursor, asset_events=log.events)
    return SensorResult(run_requests=log.run_requests, cursor=cursor, asset_events=log.events)
