"""Validation of the client's settings, before any request is sent.

Errors name the setting a user edits (``VISIBILITY_API_URL``, ``VISIBILITY_API_KEY``), and never
echo the key itself.
"""

from __future__ import annotations

import ipaddress

import httpx

from resources.api.errors import ConfigurationError

URL_SETTING = "VISIBILITY_API_URL"
KEY_SETTING = "VISIBILITY_API_KEY"


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
    return text
