"""Validation of the client's settings, before any request is sent.

Errors name the setting a user edits (``VISIBILITY_API_URL``, ``VISIBILITY_API_KEY``,
``VISIBILITY_RETRY_DEADLINE_SECONDS``), and never echo the key itself. The client applies these
rules to what it is given; ``settings.py`` applies the same ones to the environment (one loopback
rule, :func:`is_loopback_host`, also the sandbox's ``--host`` check), so both accept and refuse the
same values with the same messages.
"""

from __future__ import annotations

import ipaddress
import re

import httpx

from resources.api.errors import ConfigurationError

URL_SETTING = "VISIBILITY_API_URL"
KEY_SETTING = "VISIBILITY_API_KEY"
RETRY_DEADLINE_SETTING = "VISIBILITY_RETRY_DEADLINE_SECONDS"
REQUEST_FLOOR_SETTING = "VISIBILITY_REQUEST_BUDGET_FLOOR"
REQUEST_FACTOR_SETTING = "VISIBILITY_REQUEST_BUDGET_FACTOR"
MAX_RESPONSE_SETTING = "VISIBILITY_MAX_RESPONSE_BYTES"
MAX_NEW_COLUMNS_SETTING = "VISIBILITY_MAX_NEW_COLUMNS"
#: The sync's request budget: this many requests for the listings (brands, prompts, snapshots)...
DEFAULT_REQUEST_FLOOR = 10_000
MIN_REQUEST_FLOOR, MAX_REQUEST_FLOOR = 100, 100_000_000
#: ...plus this many per call a table's plan makes (its first page, further pages, retries).
DEFAULT_REQUESTS_PER_CALL = 20
MIN_REQUESTS_PER_CALL, MAX_REQUESTS_PER_CALL = 1, 100_000
#: The largest body of one answer the client reads, raw or decoded (bytes): about 90 times the
#: largest page of the sandbox's large workspace (docs/OPERATIONS.md), far below what would strain a
#: small machine.
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
MIN_MAX_RESPONSE_BYTES, MAX_MAX_RESPONSE_BYTES = 1024 * 1024, 4 * 1024 * 1024 * 1024
#: Unknown fields (beyond a table's declared columns) one table's fetch accepts as new columns; more
#: refuse the table's landing (sync.transforms.check_new_columns). Real additions come a few at a time.
DEFAULT_MAX_NEW_COLUMNS = 50
MIN_MAX_NEW_COLUMNS, MAX_MAX_NEW_COLUMNS = 0, 1000
#: Default and bounds of the retry deadline one sync shares (seconds).
DEFAULT_RETRY_DEADLINE_SECONDS = 300.0
MIN_RETRY_DEADLINE_SECONDS = 1.0
MAX_RETRY_DEADLINE_SECONDS = 86_400.0
#: The shortest key accepted. The spec gives no key format; the sandbox's keys (``vsk_`` and 32 hex
#: digits) are 36 characters. 16 leaves room for other prefixes and shapes while refusing a
#: placeholder or a fragment, and keeps a secret part of at least 8 characters, the shortest run
#: ``redaction.py`` scrubs.
MIN_KEY_CHARS = 16

#: A number as a setting takes it: ASCII digits, an optional sign and (decimals) one point; Python's
#: ``int``/``float`` also take ``1_000``, ``1e3``, ``inf`` and other scripts' digits (``١٢``).
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def parse_integer(text: str) -> int:
    """``text`` as a whole number written in ASCII digits; ``ValueError`` otherwise."""
    if not _INTEGER.fullmatch(text.strip()):
        raise ValueError(text)
    return int(text)


def parse_decimal(text: str) -> float:
    """``text`` as a decimal number written in ASCII digits (no exponent); ``ValueError`` otherwise."""
    if not _DECIMAL.fullmatch(text.strip()):
        raise ValueError(text)
    return float(text)


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 and ``localhost`` (with or without a trailing dot, any case)."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def validate_base_url(url: str) -> str:
    """Return the base URL without a trailing ``/`` or ``/v1`` (paths carry ``/v1`` themselves).

    Plain ``http://`` is refused unless the host is loopback: the key travels in every request.
    """
    text = (url or "").strip()
    if not text:
        raise ConfigurationError(f"{URL_SETTING} is empty; set it to the service's base URL")
    try:
        parsed = httpx.URL(text)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ConfigurationError(f"{URL_SETTING} is not a valid URL ({exc})") from None
    scheme = parsed.scheme.lower()
    if scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(
            f"{URL_SETTING} must be an absolute http(s) URL such as https://api.example.com "
            f"(got scheme {scheme or 'none'!r})"
        )
    if parsed.userinfo:
        raise ConfigurationError(
            f"{URL_SETTING} must not carry a user name or password; the key goes in {KEY_SETTING}"
        )
    if scheme == "http" and not is_loopback_host(parsed.host):
        raise ConfigurationError(
            f"{URL_SETTING} must use https:// (got http:// for host {parsed.host!r}); plain http is "
            "allowed only on loopback (127.0.0.0/8, ::1, localhost), because the key is sent with "
            "every request"
        )
    if parsed.query or parsed.fragment:
        raise ConfigurationError(f"{URL_SETTING} must not have a query string or fragment")
    path = parsed.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return str(parsed.copy_with(path=path or "/")).rstrip("/")


def validate_api_key(key: str | None) -> str:
    """Return the key stripped of surrounding blanks; refuse an empty or malformed one."""
    text = (key or "").strip()
    if not text:
        raise ConfigurationError(f"{KEY_SETTING} is empty; set it to an API key from the dashboard")
    if text.lower().startswith("bearer "):
        raise ConfigurationError(f"{KEY_SETTING} must be the key alone, without the 'Bearer ' prefix")
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        raise ConfigurationError(f"{KEY_SETTING} contains blanks or control characters; paste the key alone")
    if not text.isascii():
        # An HTTP header carries ASCII only: httpx would fail later with a UnicodeEncodeError that
        # names neither the setting nor the cause (and the key is not echoed here either).
        raise ConfigurationError(
            f"{KEY_SETTING} contains non-ASCII characters (a key is plain ASCII); copy it again from "
            "the dashboard, without typographic quotes or look-alike letters"
        )
    if len(text) < MIN_KEY_CHARS:
        raise ConfigurationError(
            f"{KEY_SETTING} is too short to be an API key (at least {MIN_KEY_CHARS} characters); copy "
            "the whole key from the dashboard"
        )
    return text


def origin(url: str) -> str:
    """``scheme://host:port`` of a URL (never its user info, path or query): what messages quote."""
    parsed = httpx.URL(url)
    scheme = parsed.scheme.lower()
    port = parsed.port or {"http": 80, "https": 443}.get(scheme)
    host = parsed.host
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}" if port else f"{scheme}://{host}"


def validate_retry_deadline(value: float | str | None, *, setting: str = RETRY_DEADLINE_SETTING) -> float:
    """Seconds (a number between 1 and 86400) a sync keeps retrying an unreachable service."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_RETRY_DEADLINE_SECONDS
    try:
        seconds = float(value) if isinstance(value, float | int) else parse_decimal(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{setting} must be a number of seconds, got {str(value)[:40]!r}") from None
    if not (MIN_RETRY_DEADLINE_SECONDS <= seconds <= MAX_RETRY_DEADLINE_SECONDS):  # NaN fails too
        raise ConfigurationError(
            f"{setting} must be between {MIN_RETRY_DEADLINE_SECONDS:g} and "
            f"{MAX_RETRY_DEADLINE_SECONDS:g} seconds, got {str(value)[:40]!r}"
        )
    return seconds


def _whole_number(value: int | str | None, setting: str, default: int, low: int, high: int) -> int:
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    text = str(value).strip()
    try:
        number = parse_integer(text)
    except ValueError:
        raise ConfigurationError(f"{setting} must be a whole number, got {text[:40]!r}") from None
    if not low <= number <= high:
        raise ConfigurationError(f"{setting} must be between {low} and {high}, got {text[:40]!r}")
    return number


def validate_request_floor(value: int | str | None) -> int:
    """Requests a sync may make before any table's plan adds to its budget (listings, discovery)."""
    return _whole_number(
        value, REQUEST_FLOOR_SETTING, DEFAULT_REQUEST_FLOOR, MIN_REQUEST_FLOOR, MAX_REQUEST_FLOOR
    )


def validate_requests_per_call(value: int | str | None) -> int:
    """Requests a sync may make per planned call (first page, further pages, retries)."""
    return _whole_number(
        value,
        REQUEST_FACTOR_SETTING,
        DEFAULT_REQUESTS_PER_CALL,
        MIN_REQUESTS_PER_CALL,
        MAX_REQUESTS_PER_CALL,
    )


def validate_max_response_bytes(value: int | str | None) -> int:
    """The largest body of one answer the client reads, raw or decoded, in bytes."""
    return _whole_number(
        value,
        MAX_RESPONSE_SETTING,
        DEFAULT_MAX_RESPONSE_BYTES,
        MIN_MAX_RESPONSE_BYTES,
        MAX_MAX_RESPONSE_BYTES,
    )


def validate_max_new_columns(value: int | str | None) -> int:
    """The most unknown fields one table's fetch lands as new columns."""
    return _whole_number(
        value, MAX_NEW_COLUMNS_SETTING, DEFAULT_MAX_NEW_COLUMNS, MIN_MAX_NEW_COLUMNS, MAX_MAX_NEW_COLUMNS
    )
