"""Pure parsing of the service's retry and rate-limit headers.

The spec does not name these headers (DESIGN.md's assumptions table does), so every parser here is
lenient: an absent or unreadable header means "no hint", never an exception, because a bad header
must not fail a sync that would otherwise succeed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

#: A reset value at or above this is read as a Unix epoch, below it as seconds until the reset.
#: 10**9 seconds is ~31 years: no real window is that long, and every epoch since 2001 is larger.
EPOCH_THRESHOLD = 1_000_000_000
#: A reset value at or above this is read as an epoch in milliseconds.
EPOCH_MS_THRESHOLD = 100_000_000_000


def _utc(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(dt.UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=dt.UTC)


def _parse_number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _parse_http_date(text: str) -> dt.datetime | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _parse_iso(text: str) -> dt.datetime | None:
    candidate = text.strip()
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(candidate)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def parse_retry_after(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or an HTTP-date).

    Returns ``None`` for "no hint": absent, unreadable, zero, negative, or a date in the past. The
    caller then backs off on its own, so a server that says ``0`` cannot make the client hammer it.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    seconds = _parse_number(text)
    if seconds is None:
        when = _parse_http_date(text) or _parse_iso(text)
        if when is None:
            return None
        seconds = (when - _utc(now)).total_seconds()
    return seconds if seconds > 0 else None


def parse_reset(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds until a rate-limit window resets, from seconds-until, an epoch (s or ms) or a time.

    Returns ``None`` when absent or unreadable, and ``0.0`` when the reset is already past.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    number = _parse_number(text)
    current = _utc(now)
    if number is not None:
        if number >= EPOCH_MS_THRESHOLD:
            seconds = number / 1000.0 - current.timestamp()
        elif number >= EPOCH_THRESHOLD:
            seconds = number - current.timestamp()
        else:
            seconds = number
    else:
        when = _parse_iso(text) or _parse_http_date(text)
        if when is None:
            return None
        seconds = (when - current).total_seconds()
    return max(0.0, seconds)


def _parse_count(value: str | None) -> int | None:
    if value is None:
        return None
    number = _parse_number(value.strip())
    if number is None or number < 0:
        return None
    return int(number)


@dataclass(frozen=True)
class WindowHeaders:
    """One window's ``<prefix>Limit/Remaining/Reset`` triple; any part may be unknown."""

    limit: int | None
    remaining: int | None
    reset_seconds: float | None

    @property
    def present(self) -> bool:
        return self.limit is not None or self.remaining is not None or self.reset_seconds is not None


RATE_LIMIT_PREFIX = "x-ratelimit-"
ENDPOINT_LIMIT_PREFIX = "x-endpoint-"


def parse_window(headers: Mapping[str, str], prefix: str, *, now: dt.datetime | None = None) -> WindowHeaders:
    """Read a limit/remaining/reset triple; ``headers`` must look names up case-insensitively.

    A limit of 0 on an answer says that no request is ever admitted, which the answer itself belies:
    the triple is read as absent (it would hold every later request back for nothing)."""
    limit = _parse_count(headers.get(prefix + "limit"))
    if limit == 0:
        return WindowHeaders(None, None, None)
    return WindowHeaders(
        limit=limit,
        remaining=_parse_count(headers.get(prefix + "remaining")),
        reset_seconds=parse_reset(headers.get(prefix + "reset"), now=now),
    )
