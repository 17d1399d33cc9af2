"""Keeping the key out of every text the client produces: messages, log records, metadata.

Two rules, applied wherever a text the service (or a proxy in front of it) chose is quoted, be it a
request id, an error ``code`` or ``message``, a header value or a body excerpt:

* **scrub**: every key registered by a client (``register_secret``) is replaced wherever it occurs,
  not only after ``Bearer``, and any ``Bearer <token>`` is redacted too. A service that echoes the
  ``Authorization`` header into ``X-Request-Id`` must not get the key into an exception.
* **sanitize**: control and format characters become ``?`` and the text is bounded, so a hostile
  answer cannot forge log lines or flood a message.

``VisibilityAPIError`` applies both to everything it renders, the client to what it stores, and a log
filter (``install``) applies ``scrub`` to every record of the HTTP libraries' loggers and of
``visibility.api``: httpx logs the response's reason phrase and httpcore (at DEBUG) the response
headers, both chosen by the server.
"""

from __future__ import annotations

import logging
import re
import threading

#: a token after "Bearer", unless it is the mask already (scrubbing twice must not add brackets)
_BEARER = re.compile(r"(?i)(bearer\s+)(?!\[redacted\])[^\s'\",;\])]+")
REDACTED = "[redacted]"

#: Longest service-provided text quoted in a message (error ``message``, body excerpt).
MAX_TEXT_CHARS = 300
#: Longest request id, error code or header value quoted.
MAX_TOKEN_CHARS = 128

#: The client's own logger (waits, retries) and the loggers of the HTTP libraries. Filters on a logger
#: do not apply to its children's records, so each logger that emits records is listed.
API_LOGGER = "visibility.api"
GUARDED_LOGGERS: tuple[str, ...] = (
    API_LOGGER,
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
)

_installed = False
_lock = threading.Lock()
#: Keys of every client of this process, longest first (a key that contains another is replaced whole).
_secrets: tuple[str, ...] = ()


def register_secret(value: str) -> None:
    """Remember a key so that ``scrub`` removes it from any text (thread-safe, idempotent)."""
    global _secrets
    if not value:
        return
    with _lock:
        if value not in _secrets:
            _secrets = tuple(sorted({*_secrets, value}, key=len, reverse=True))


def redact(text: str) -> str:
    """Redact ``Bearer <token>`` (any token, registered or not)."""
    return _BEARER.sub(r"\1" + REDACTED, text)


def scrub(text: str) -> str:
    """``text`` without any registered key (wherever it occurs) or bearer token."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return redact(text)


def _printable(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def sanitize(value: object, limit: int = MAX_TEXT_CHARS) -> str:
    """A server-provided value made safe to quote: scrubbed, printable, at most ``limit`` characters.

    Scrubbing comes before truncation, so a cut can never leave the start of a key behind.
    """
    text = _printable(scrub(value if isinstance(value, str) else str(value)))
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def sanitize_optional(value: object, limit: int = MAX_TOKEN_CHARS) -> str | None:
    return None if value is None else sanitize(value, limit)


def excerpt(value: object, limit: int = 40) -> str:
    """A short quotation of a server-provided value for an error message (strings in quotes).

    A string is scrubbed before it is quoted: ``repr`` could escape a character of the key and so
    hide it from ``scrub``.
    """
    if isinstance(value, str):
        return f"'{sanitize(value, max(1, limit - 2))}'"
    return sanitize(repr(value), limit)


class SecretRedactingFilter(logging.Filter):
    """Rewrites a record whose rendered message carries a key or a bearer token; never drops records."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logging module's problem, not ours
            return True
        clean = scrub(message)
        if clean != message:
            record.msg = clean
            record.args = ()
        return True


def install() -> None:
    """Attach the filter once per process (idempotent, thread-safe)."""
    global _installed
    with _lock:
        if _installed:
            return
        guard = SecretRedactingFilter()
        for name in GUARDED_LOGGERS:
            logging.getLogger(name).addFilter(guard)
        _installed = True
