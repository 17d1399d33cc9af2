"""Typed errors of the visibility API client.

Every error that comes from an HTTP answer carries the endpoint, the status, the service's stable
``code`` and the ``X-Request-Id``, so a user can quote it to support. None of them ever contains the
API key or the ``Authorization`` header.
"""

from __future__ import annotations


class VisibilityAPIError(Exception):
    """Base class of everything the client raises."""

    #: What the user should do about it; appended to the message.
    hint: str = ""

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
        self.code = code
        self.request_id = request_id
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
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
        return text


class BadRequestError(VisibilityAPIError):
    """400: missing_parameter, invalid_request, invalid_engine, invalid_date."""

    hint = "The request was rejected as malformed; check the parameters named above"


class AuthenticationError(VisibilityAPIError):
    """401: missing_api_key, invalid_api_key."""

    hint = (
        "Check VISIBILITY_API_KEY: the key is missing, unknown or revoked (create a new one in the dashboard)"
    )


class SubscriptionRequiredError(VisibilityAPIError):
    """402: subscription_required."""

    hint = "The workspace's subscription is inactive or past due; renew it in the dashboard"


class PermissionDeniedError(VisibilityAPIError):
    """403: plan_not_eligible, forbidden, brand_scope_forbidden."""

    hint = "The key or plan does not allow this (plan_not_eligible: the plan has no API access)"


class NotFoundError(VisibilityAPIError):
    """404: not_found (also other workspaces' records and brands outside a scoped key)."""

    hint = "The record does not exist or is outside this key's scope"


class MethodNotAllowedError(VisibilityAPIError):
    """405: method_not_allowed."""


class RateLimitError(VisibilityAPIError):
    """429 that retries could not get past before the deadline."""


class QuotaExceededError(VisibilityAPIError):
    """429 quota_exceeded: never retried."""

    hint = "The workspace's quota is used up; the sync stopped without retrying"


class ServerError(VisibilityAPIError):
    """5xx that persisted past the retry deadline."""

    hint = "The service failed; quote the X-Request-Id when reporting it"


class TransportError(VisibilityAPIError):
    """Timeouts, dropped connections and truncated bodies that persisted past the retry deadline."""


class PagingError(VisibilityAPIError):
    """The service's paging broke its contract (a repeated cursor, an empty page with has_more)."""


class ResponseShapeError(VisibilityAPIError):
    """A required field is missing or of the wrong type; names the endpoint and the field."""


class ConfigurationError(VisibilityAPIError):
    """Bad client configuration (base URL, key), raised before any request."""


ERROR_BY_STATUS: dict[int, type[VisibilityAPIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    402: SubscriptionRequiredError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
}
