"""The counters of one client's requests: what a table's materialization reports, carried by a
fetch's outcome to its landing (this module imports nothing of the HTTP client)."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

#: Longest service-provided error code kept (codes are also metadata keys).
MAX_CODE_CHARS = 64


def _add(counts: dict[Any, Any], key: Any, amount: float = 1) -> Any:
    counts[key] = counts.get(key, 0) + amount
    return counts[key]


@dataclass
class RequestStats:
    """Counters of one client instance; assets put them in their materialization metadata."""

    requests_by_endpoint: dict[str, int] = field(default_factory=dict)  # endpoint template -> count
    retries_by_cause: dict[str, int] = field(default_factory=dict)  # e.g. rate_limited, 5xx, timeout
    #: seconds waited by why: ``pacing`` (a window), ``concurrency`` (no free slot), ``backoff``
    wait_seconds_by_cause: dict[str, float] = field(default_factory=dict)
    #: Error answers by the service's ``code`` (``rate_limited``, ``internal_error``...), sanitized.
    errors_by_code: dict[str, int] = field(default_factory=dict)
    #: Rows dropped because their ``engine`` is outside the spec's seven, by endpoint template.
    unknown_engine_rows: dict[str, int] = field(default_factory=dict)

    @property
    def total_requests(self) -> int:
        return sum(self.requests_by_endpoint.values())

    @property
    def wait_seconds(self) -> float:
        return sum(self.wait_seconds_by_cause.values())

    @property
    def total_retries(self) -> int:
        return sum(self.retries_by_cause.values())

    def to_metadata(self) -> dict[str, Any]:
        """A JSON-ready view with string keys, for Dagster metadata."""
        return {
            "total_requests": self.total_requests,
            "requests_by_endpoint": dict(sorted(self.requests_by_endpoint.items())),
            "retries_by_cause": dict(sorted(self.retries_by_cause.items())),
            "wait_seconds": round(self.wait_seconds, 3),
            "wait_seconds_by_cause": {k: round(v, 3) for k, v in sorted(self.wait_seconds_by_cause.items())},
            "errors_by_code": dict(sorted(self.errors_by_code.items())),
            "unknown_engine_rows": dict(sorted(self.unknown_engine_rows.items())),
        }


class Counters:
    """``RequestStats`` behind a lock: every thread of a client updates the same counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = RequestStats()

    def request(self, endpoint: str) -> None:
        with self._lock:
            _add(self._stats.requests_by_endpoint, endpoint)

    def error_code(self, code: str) -> None:
        with self._lock:
            _add(self._stats.errors_by_code, code)

    def retry(self, cause: str) -> None:
        with self._lock:
            _add(self._stats.retries_by_cause, cause)

    def wait(self, cause: str, seconds: float) -> None:
        if seconds > 0:
            with self._lock:
                _add(self._stats.wait_seconds_by_cause, cause, seconds)

    def unknown_engine(self, endpoint: str, rows: int) -> int:
        """Count dropped rows; return the endpoint's total so far."""
        with self._lock:
            return _add(self._stats.unknown_engine_rows, endpoint, rows)

    def snapshot(self) -> RequestStats:
        with self._lock:
            return copy.deepcopy(self._stats)
