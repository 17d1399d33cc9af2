"""A guard that keeps bearer tokens out of the HTTP libraries' log records.

httpx and httpcore (0.28 / 1.0) log request lines and *response* headers, never request headers,
so the key does not reach their logs today (the tests check this at DEBUG). This filter is the
belt to those braces: should a future version, or a service echoing the header back, put
``Bearer <token>`` in a record, the token is replaced before any handler sees it.
"""

from __future__ import annotations

import logging
import re
import threading

_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\",;\])]+")
#: Loggers that log records themselves (filters on a logger do not apply to its children's records).
GUARDED_LOGGERS: tuple[str, ...] = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
)

_installed = False
_lock = threading.Lock()


def redact(text: str) -> str:
    return _BEARER.sub(r"\1[redacted]", text)


class BearerRedactingFilter(logging.Filter):
    """Rewrites a record whose rendered message carries a bearer token; never drops records."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record is the logging module's problem, not ours
            return True
        if "bearer" in message.lower():
            record.msg = redact(message)
            record.args = ()
        return True


def install() -> None:
    """Attach the filter once per process (idempotent, thread-safe)."""
    global _installed
    with _lock:
        if _installed:
            return
        guard = BearerRedactingFilter()
        for name in GUARDED_LOGGERS:
            logging.getLogger(name).addFilter(guard)
        _installed = True
