"""Lenient parsing of the service's rate-limit and ``Retry-After`` headers (DESIGN.md's assumptions).

An absent or unreadable header means "no hint", never an exception: a bad header must not fail a
sync that would otherwise succeed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

RATE_LIMIT_PREFIX = "x-ratelimit-"
ENDPOINT_LIMIT_PREFIX = "x-endpoint-"
#: A reset at or above this is a Unix epoch (10**9 s is ~31 years: no window is that long), at or
#: above ``EPOCH_MS_THRESHOLD`` one in milliseconds; below, the seconds until the reset.
EPOCH_THRESHOLD = 1_000_000_000
EPOCH_MS_THRESHOLD = 100_000_000_000


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _date(text: str) -> dt.datetime | None:
    """An ISO 8601 date (not HTTP's, but seen in the wild) or an HTTP date; UTC when it names no zone."""
    try:
        when = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def _seconds(value: str | None, now: dt.datetime | None, *, epochs: bool) -> float | None:
    """Seconds from ``now`` to what a header names: a number of seconds (with ``epochs``, a Unix
    epoch in seconds or milliseconds above the thresholds) or a date; ``None`` when unreadable."""
    text = (value or "").strip()
    if not text:
        return None
    current = now or dt.datetime.now(dt.UTC)
    current = current if current.tzinfo is not None else current.replace(tzinfo=dt.UTC)
    number = _number(text)
    if number is None:
        when = _date(text)
        return None if when is None else (when - current).total_seconds()
    if epochs and number >= EPOCH_MS_THRESHOLD:
        return number / 1000.0 - current.timestamp()
    if epochs and number >= EPOCH_THRESHOLD:
        return number - current.timestamp()
    return number


def parse_retry_after(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` (seconds or a date). ``None`` for "no hint": absent,
    unreadable, zero, negative or past; the caller then backs off itself, so a server that says ``0``
    cannot make the client hammer it."""
    seconds = _seconds(value, now, epochs=False)
    return seconds if seconds is not None and seconds > 0 else None


def parse_reset(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds until a window resets, from seconds, an epoch (s or ms) or a date; ``0.0`` when it is
    past, ``None`` when absent or unreadable."""
    seconds = _seconds(value, now, epochs=True)
    return None if seconds is None else max(0.0, seconds)


def _count(value: str | None) -> int | None:
    number = _number(value.strip()) if value is not None else None
    return int(number) if number is not None and number >= 0 else None


@dataclass(frozen=True)
class WindowHeaders:
    """One window's ``<prefix>Limit/Remaining/Reset`` triple; any part may be unknown."""

    limit: int | None
    remaining: int | None
    reset_seconds: float | None

    @property
    def present(self) -> bool:
        return self.limit is not None or self.remaining is not None or self.reset_seconds is not None


def parse_window(headers: Mapping[str, str], prefix: str, *, now: dt.datetime | None = None) -> WindowHeaders:
    """Read a limit/remaining/reset triple; ``headers`` must look names up case-insensitively.

    A limit of 0 says no request is ever admitted, which the answer itself belies: the triple is read
    as absent (it would hold every later request back for nothing)."""
    limit = _count(headers.get(prefix + "limit"))
    if limit == 0:
        return WindowHeaders(None, None, None)
    remaining = _count(headers.get(prefix + "remaining"))
    return WindowHeaders(limit, remaining, parse_reset(headers.get(prefix + "reset"), now=now))
