"""The service's address and key, and how hard a sync may press it: clients that share one budget.

Dagster-free, so a process can open clients before (or without) importing Dagster: the command line
starts its fetches while Dagster imports (``sync/head_start.py``), then hands the same budget to the
``api`` resource (:meth:`resources.api.resource.VisibilityAPIResource.share_budget`), which builds
its clients here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from resources.api.budget import RequestBudget
from resources.api.client import VisibilityClient
from resources.api.config import (
    DEFAULT_MAX_NEW_COLUMNS,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_FLOOR,
    DEFAULT_REQUESTS_PER_CALL,
    DEFAULT_RETRY_DEADLINE_SECONDS,
    RETRY_DEADLINE_SETTING,
    validate_api_key,
    validate_base_url,
)
from resources.api.errors import ConfigurationError


@dataclass(frozen=True, repr=False)
class ApiAccess:
    """What every client of a sync is opened with; the key is held, never shown (``repr``)."""

    api_url: str
    api_key: str
    max_concurrency: int = 8
    timeout_seconds: float = 30.0
    retry_deadline_seconds: float = DEFAULT_RETRY_DEADLINE_SECONDS
    backoff_base_seconds: float = 0.5
    request_budget_floor: int = DEFAULT_REQUEST_FLOOR
    request_budget_factor: int = DEFAULT_REQUESTS_PER_CALL
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    max_new_columns: int = DEFAULT_MAX_NEW_COLUMNS

    def __repr__(self) -> str:
        return f"ApiAccess(api_url={self.api_url!r}, api_key='[hidden]')"

    def validate(self) -> None:
        """Raise ``ConfigurationError`` naming the setting (VISIBILITY_API_URL/KEY/RETRY_DEADLINE_SECONDS)
        when it is wrong."""
        validate_base_url(self.api_url)
        validate_api_key(self.api_key)
        if not self.retry_deadline_seconds > 0:  # the environment's bounds are settings.py's
            raise ConfigurationError(
                f"{RETRY_DEADLINE_SETTING} must be a positive number of seconds, "
                f"got {self.retry_deadline_seconds!r}"
            )
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")

    def new_budget(self) -> RequestBudget:
        """A sync's one budget: its outage clock, cancel switch, wait hook and request allowance."""
        return RequestBudget(
            self.max_concurrency,
            retry_deadline_seconds=self.retry_deadline_seconds,
            request_floor=self.request_budget_floor,
            requests_per_call=self.request_budget_factor,
        )

    def client(
        self, budget: RequestBudget, *, retry_deadline_seconds: float | None = None
    ) -> VisibilityClient:
        """A new client on ``budget`` (use it in a ``with`` block); settings are validated first.

        ``retry_deadline_seconds`` shortens each call's retry deadline (and the timeout with it) for
        callers that must stay short, such as sensor ticks and ``visibility-sync check``.
        """
        self.validate()
        deadline = self.retry_deadline_seconds if retry_deadline_seconds is None else retry_deadline_seconds
        return VisibilityClient(
            self.api_url,
            self.api_key,
            max_concurrency=self.max_concurrency,
            timeout_seconds=min(self.timeout_seconds, deadline),
            retry_deadline_seconds=deadline,
            backoff_base_seconds=self.backoff_base_seconds,
            budget=budget,
            max_response_bytes=self.max_response_bytes,
            max_new_columns=self.max_new_columns,
        )


class SyncApi:
    """One budget and the clients on it: the driver's ``Api`` (``get_client``, ``cancel``) without
    Dagster, for a process that fetches before its ``api`` resource exists."""

    def __init__(self, access: ApiAccess) -> None:
        access.validate()
        self.access = access
        self.budget = access.new_budget()

    def __repr__(self) -> str:
        return f"SyncApi({self.access!r})"

    def get_client(self) -> VisibilityClient:
        return self.access.client(self.budget)

    def cancel(self) -> None:
        self.budget.cancel()
