"""Header parsing: every form of Retry-After and X-RateLimit-Reset the client may meet."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest

from resources.api.headers import (
    ENDPOINT_LIMIT_PREFIX,
    RATE_LIMIT_PREFIX,
    parse_reset,
    parse_retry_after,
    parse_window,
)

NOW = dt.datetime(2026, 11, 21, 12, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", 1.0),
        ("120", 120.0),
        (" 7 ", 7.0),
        ("2.5", 2.5),
        ("Sat, 21 Nov 2026 12:00:30 GMT", 30.0),
        ("Saturday, 21-Nov-26 12:01:00 GMT", 60.0),  # RFC 850, obsolete but legal
        ("Sat Nov 21 12:00:05 2026", 5.0),  # asctime, obsolete but legal
        ("2026-11-21T12:00:10Z", 10.0),  # ISO: not HTTP, seen in the wild
    ],
)
def test_retry_after_reads_seconds_and_dates(value: str, expected: float) -> None:
    assert parse_retry_after(value, now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize(
    "value",
    [None, "", "   ", "0", "-1", "-30", "0.0", "Sat, 21 Nov 2026 11:59:00 GMT", "soon", "nan", "inf"],
)
def test_retry_after_gives_no_hint_for_absent_zero_negative_past_or_garbage(value: str | None) -> None:
    assert parse_retry_after(value, now=NOW) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0.0),
        ("1", 1.0),
        ("59", 59.0),
        ("0.25", 0.25),
        (str(int(NOW.timestamp()) + 42), 42.0),  # epoch seconds
        (str(int(NOW.timestamp() * 1000) + 1500), 1.5),  # epoch milliseconds
        ("2026-11-21T12:00:20Z", 20.0),
        ("2026-11-21T12:00:20+00:00", 20.0),
        ("2026-11-21T13:00:20+01:00", 20.0),
        ("2026-11-21T12:00:20", 20.0),  # naive ISO is read as UTC
        ("Sat, 21 Nov 2026 12:00:03 GMT", 3.0),
    ],
)
def test_reset_reads_seconds_epochs_and_times(value: str, expected: float) -> None:
    assert parse_reset(value, now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize("value", [str(int(NOW.timestamp()) - 10), "2026-11-21T11:00:00Z", "-5"])
def test_reset_in_the_past_means_reset_now(value: str) -> None:
    assert parse_reset(value, now=NOW) == 0.0


@pytest.mark.parametrize("value", [None, "", "tomorrow", "nan"])
def test_reset_absent_or_garbage_is_unknown(value: str | None) -> None:
    assert parse_reset(value, now=NOW) is None


def test_window_is_read_case_insensitively_per_prefix() -> None:
    headers = httpx.Headers(
        {
            "X-RateLimit-Limit": "50",
            "x-ratelimit-remaining": "7",
            "X-RATELIMIT-RESET": "2",
            "X-Endpoint-Limit": "10",
            "X-Endpoint-Remaining": "0",
            "X-Endpoint-Reset": "60",
        }
    )
    window = parse_window(headers, RATE_LIMIT_PREFIX, now=NOW)
    assert (window.limit, window.remaining, window.reset_seconds) == (50, 7, 2.0)
    endpoint = parse_window(headers, ENDPOINT_LIMIT_PREFIX, now=NOW)
    assert (endpoint.limit, endpoint.remaining, endpoint.reset_seconds) == (10, 0, 60.0)


def test_window_without_headers_is_absent_and_bad_counts_are_ignored() -> None:
    assert not parse_window(httpx.Headers({}), RATE_LIMIT_PREFIX).present
    window = parse_window(
        httpx.Headers({"X-RateLimit-Limit": "many", "X-RateLimit-Remaining": "-3"}), RATE_LIMIT_PREFIX
    )
    assert window.limit is None and window.remaining is None
