"""Typed errors of the visibility API client.

An error from an HTTP answer carries the endpoint, the status, the service's ``code`` and the
``X-Request-Id``; every text is scrubbed of the registered keys and sanitized when the error is built
(``redaction``). Each class declares its ``failure_kind`` (``resources/failures.py``).
"""

from __future__ import annotations

from typing import Any

from resources.api.redaction import sanitize_optional, scrub
from resources.failures import FailureKind


class VisibilityAPIError(Exception):
    """Base class of everything the client raises, but ``SyncCancelled``."""

    failure_kind = FailureKind.FAILED
    #: What the user should do about it; appended to the message.
    hint: str = ""
    #: A write that may have been applied although no usable answer came back: read it back first.
    may_have_applied: bool = False

    def __init__(
        self,
        message: str,
        *,
        endpoint: str | None = None,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        self.code = sanitize_optional(code, 64)
        self.request_id = sanitize_optional(request_id)
        self.detail = scrub(message)
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [] if self.status is None else [f"HTTP {self.status}"]
        if self.code:
            parts.append(self.code)
        head = " ".join(parts)
        text = f"{head}: {self.detail}" if head else self.detail
        if self.endpoint:
            text += f" [endpoint {self.endpoint}]"
        if self.request_id:
            text += f" [X-Request-Id {self.request_id}]"
        if self.hint:
            text += f". {self.hint}"
        return scrub(text)


class BadRequestError(VisibilityAPIError):
    """400: missing_parameter, invalid_request, invalid_engine, invalid_date."""

    hint = "The request was rejected as malformed; check the parameters named above"


class AuthenticationError(VisibilityAPIError):
    """401: missing_api_key, invalid_api_key."""

    failure_kind = FailureKind.REFUSED
    hint = (
        "Check VISIBILITY_API_KEY: the key is missing, unknown or revoked (create a new one in the dashboard)"
    )


class SubscriptionRequiredError(VisibilityAPIError):
    """402: subscription_required."""

    failure_kind = FailureKind.REFUSED
    hint = "The workspace's subscription is inactive or past due; renew it in the dashboard"


class PermissionDeniedError(VisibilityAPIError):
    """403: plan_not_eligible, forbidden, brand_scope_forbidden."""

    failure_kind = FailureKind.REFUSED
    hint = "The key or plan does not allow this (plan_not_eligible: the plan has no API access)"


class NotFoundError(VisibilityAPIError):
    """404: not_found (also other workspaces' records and brands outside a scoped key)."""

    @property  # type: ignore[override]
    def hint(self) -> str:
        if self.endpoint and "{" not in self.endpoint:  # a listing that names no record always exists
            return (
                "This endpoint always exists, so the base URL is wrong: check VISIBILITY_API_URL (the "
                "service's root, without a path such as /api or /v1)"
            )
        return "The record does not exist or is outside this key's scope"


class RateLimitError(VisibilityAPIError):
    """429 that retries could not get past before the deadline."""

    failure_kind = FailureKind.TRANSIENT


class QuotaExceededError(VisibilityAPIError):
    """429 quota_exceeded: never retried."""

    failure_kind = FailureKind.UNREACHABLE
    hint = "The workspace's quota is used up; the sync stopped without retrying"


class ServerError(VisibilityAPIError):
    """5xx that persisted past the retry deadline."""

    failure_kind = FailureKind.TRANSIENT
    hint = "The service failed; quote the X-Request-Id when reporting it"


class TransportError(VisibilityAPIError):
    """Timeouts, dropped connections and truncated bodies that persisted past the retry deadline."""

    failure_kind = FailureKind.UNREACHABLE


class ServiceUnreachableError(TransportError):
    """Not sent: the service has failed every attempt for longer than the sync's retry deadline, so
    every further call fails at once (never ambiguous)."""


class PagingError(VisibilityAPIError):
    """The service's paging broke its contract (a repeated cursor or page, an empty page with
    has_more, too many pages); ``pages``: pages read before stopping."""

    failure_kind = FailureKind.RESPONSE_SHAPE

    def __init__(self, message: str, *, pages: int | None = None, **context: Any) -> None:
        self.pages = pages
        super().__init__(message, **context)


class RequestBudgetExceeded(VisibilityAPIError):
    """The sync spent its request budget (a service that never ends a walk). ``requests``: requests
    made by the sync; ``pages``: pages of the walk that met the bound, when a walk did."""

    failure_kind = FailureKind.RESPONSE_SHAPE
    hint = (
        "If the service really holds that much, raise VISIBILITY_REQUEST_BUDGET_FACTOR or "
        "VISIBILITY_REQUEST_BUDGET_FLOOR"
    )

    def __init__(
        self, message: str, *, requests: int | None = None, pages: int | None = None, **context: Any
    ) -> None:
        self.requests = requests
        self.pages = pages
        super().__init__(message, **context)


class ResponseShapeError(VisibilityAPIError):
    """A field is missing or of another type than the spec declares (``field`` names it), so
    nothing of the wrong type is written."""

    failure_kind = FailureKind.RESPONSE_SHAPE

    def __init__(self, message: str, *, field: str | None = None, **context: Any) -> None:
        self.field = field
        super().__init__(message, **context)


class ConfigurationError(VisibilityAPIError):
    """Bad client configuration (base URL, key), raised before any request."""

    failure_kind = FailureKind.CONFIGURATION


class SyncCancelled(Exception):
    """The sync was cancelled (``RequestBudget.cancel()``): raised by every call and wait of the
    clients sharing that budget. Not a ``VisibilityAPIError``: a cancelled sync is not a service
    failure, and handlers that carry on after API errors must not swallow it."""

    failure_kind = FailureKind.CANCELLED

    def __init__(self, *, endpoint: str | None = None) -> None:
        self.endpoint = endpoint
        text = "the sync was cancelled"
        super().__init__(f"{text} [endpoint {endpoint}]" if endpoint else text)


ERROR_BY_STATUS: dict[int, type[VisibilityAPIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    402: SubscriptionRequiredError,
    403: PermissionDeniedError,
    404: NotFoundError,
}
