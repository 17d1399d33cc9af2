"""Audit polling: the ``poll`` path kept on the service's origin, and the wait for a complete report."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from resources.api import endpoints as ep
from resources.api.budget import RequestBudget
from resources.api.errors import ResponseShapeError
from resources.api.redaction import excerpt, sanitize
from resources.api.stats import Counters

Row = dict[str, Any]


def same_origin_path(poll_path: str, base_url: str) -> str:
    """The path to poll on ``base_url``'s service: the key must never travel to another host,
    whatever a response says."""
    target = httpx.URL(poll_path)
    base = httpx.URL(base_url)
    if target.is_absolute_url:
        if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
            raise ResponseShapeError(
                "the audit 'poll' URL points to another origin; refusing to send the key there",
                endpoint=ep.POLL_AUDIT.key,
            )
        base_path = base.path.rstrip("/")
        path = target.path
        if base_path and path.startswith(base_path + "/"):
            path = path[len(base_path) :]
        return path + (f"?{target.query.decode()}" if target.query else "")
    if not poll_path.startswith("/") or poll_path.startswith("//"):
        raise ResponseShapeError(
            f"the audit 'poll' path must start with '/', got {excerpt(poll_path, 80)}",
            endpoint=ep.POLL_AUDIT.key,
        )
    return poll_path


def wait_for_audit(
    poll: Callable[[], Row],
    budget: RequestBudget,
    counters: Counters,
    *,
    timeout_seconds: float,
    interval_seconds: float,
) -> Row:
    """Poll until ``status`` is ``complete``; raise ``TimeoutError`` after ``timeout_seconds``.

    The waits between polls sleep through the budget, so they end at once when the sync is
    cancelled (``SyncCancelled``).
    """
    give_up_at = time.monotonic() + timeout_seconds
    while True:
        report = poll()
        if report.get("status") == "complete":
            return report
        if time.monotonic() + interval_seconds > give_up_at:
            raise TimeoutError(
                f"audit {sanitize(report.get('id'), 64)} still "
                f"{excerpt(report.get('status'))} after {timeout_seconds:g}s"
            )
        budget.sleep(interval_seconds, endpoint=ep.POLL_AUDIT.key)
        counters.wait("audit_poll", interval_seconds)
