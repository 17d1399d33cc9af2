"""Placeholder, replaced by the CLI helper's module at merge."""

from __future__ import annotations

from enum import StrEnum


class FailureKind(StrEnum):
    CONFIGURATION = "configuration"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"
    TRANSIENT = "transient"
    RESPONSE_SHAPE = "response_shape"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def stops_the_sync(self) -> bool:
        return self in (
            FailureKind.CONFIGURATION,
            FailureKind.REFUSED,
            FailureKind.UNREACHABLE,
            FailureKind.CANCELLED,
        )


def failure_kind(exc: BaseException) -> FailureKind:
    from resources.api import errors as api_errors

    if isinstance(
        exc,
        (
            api_errors.AuthenticationError,
            api_errors.SubscriptionRequiredError,
            api_errors.PermissionDeniedError,
        ),
    ):
        return FailureKind.REFUSED
    if isinstance(exc, (api_errors.TransportError, api_errors.QuotaExceededError)):
        return FailureKind.UNREACHABLE
    from resources.warehouse.contract import WarehouseConfigError
    from settings import ConfigError

    if isinstance(exc, (api_errors.ConfigurationError, WarehouseConfigError, ConfigError)):
        return FailureKind.CONFIGURATION
    if isinstance(exc, api_errors.SyncCancelled):
        return FailureKind.CANCELLED
    return FailureKind.FAILED
