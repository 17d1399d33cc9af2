"""The API settings' names, defaults and bounds, and the URL and key rules.

The client applies the URL and key rules to what it is given, ``settings.py`` to the environment
(with the bounds below), so both refuse the same values with the same messages, which name the
setting and never echo the key. :func:`is_loopback_host` is the project's one loopback rule.
"""

from __future__ import annotations

import ipaddress

import httpx

from resources.api.errors import ConfigurationError

URL_SETTING = "VISIBILITY_API_URL"
KEY_SETTING = "VISIBILITY_API_KEY"
MAX_RESPONSE_SETTING = "VISIBILITY_MAX_RESPONSE_BYTES"
MAX_NEW_COLUMNS_SETTING = "VISIBILITY_MAX_NEW_COLUMNS"
#: The sync's request budget: this many requests for the listings (brands, prompts, snapshots)...
DEFAULT_REQUEST_FLOOR = 10_000
MIN_REQUEST_FLOOR, MAX_REQUEST_FLOOR = 100, 100_000_000
#: ...plus this many per call a table's plan makes (its first page, further pages, retries).
DEFAULT_REQUESTS_PER_CALL = 20
MIN_REQUESTS_PER_CALL, MAX_REQUESTS_PER_CALL = 1, 100_000
#: The largest body of one answer the client reads, raw or decoded: about 90 times the largest page
#: of the sandbox's large workspace (docs/OPERATIONS.md), far below what would strain a small machine.
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
MIN_MAX_RESPONSE_BYTES, MAX_MAX_RESPONSE_BYTES = 1024 * 1024, 4 * 1024 * 1024 * 1024
#: Unknown fields (beyond a table's declared columns) one table's fetch accepts as new columns; more
#: refuse the table's landing (sync.transforms.check_new_columns). Real additions come a few at a time.
DEFAULT_MAX_NEW_COLUMNS = 50
MIN_MAX_NEW_COLUMNS, MAX_MAX_NEW_COLUMNS = 0, 1000
#: Default and bounds of the retry deadline one sync shares (seconds).
DEFAULT_RETRY_DEADLINE_SECONDS = 300.0
MIN_RETRY_DEADLINE_SECONDS, MAX_RETRY_DEADLINE_SECONDS = 1, 86_400
#: The shortest key accepted (the spec gives no format; the sandbox's are 36 characters): refuses a
#: placeholder or a fragment, and keeps a secret part of at least 8, the shortest run redaction scrubs.
MIN_KEY_CHARS = 16


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
