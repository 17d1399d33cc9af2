"""Keeping the key out of every text the client produces: messages, log records, metadata.

Wherever a text the service (or a proxy) chose is quoted (a request id, an error ``code`` or
``message``, a header, a body excerpt), ``scrub`` replaces every registered key, whole (also
reversed, hex, base64 at any offset, spaced out by dashes or blanks), any run of
``MIN_FRAGMENT_CHARS`` or more characters of its secret part (plain or escaped) and any
``Bearer <token>``; ``sanitize`` also makes it printable and bounded, so a hostile answer cannot
forge log lines. A log filter (``install``) scrubs the HTTP libraries' records and ``visibility.api``'s.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from typing import Any

#: a token after "Bearer", unless it is the mask already (scrubbing twice must not add brackets)
_BEARER = re.compile(r"(?i)(bearer\s+)(?!\[redacted\])[^\s'\",;\])]+")
REDACTED = "[redacted]"

#: Longest service-provided text quoted in a message (error ``message``, body excerpt).
MAX_TEXT_CHARS = 300
#: Longest request id, error code or header value quoted.
MAX_TOKEN_CHARS = 128

#: The client's logger and the HTTP libraries' (a filter does not apply to a child's records).
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

#: Shortest run of a key's secret part that is scrubbed on its own (8 hex digits: 32 bits of the key).
MIN_FRAGMENT_CHARS = 8
#: A key's non-secret prefix (``vsk_``, ``vis_live_``): letters ending in ``_`` or ``-``, at most 16.
_KEY_PREFIX = re.compile(r"^(?:[A-Za-z]{1,8}[_-]){1,2}")
#: One character of text as a service may escape it: percent, JSON/Python, HTML entity (escaped once
#: or twice), or itself.
_ESCAPED_CHAR = re.compile(
    r"%(?:25)?(?P<pct>[0-9A-Fa-f]{2})|\\+u(?P<u>[0-9A-Fa-f]{4})|\\+x(?P<x>[0-9A-Fa-f]{2})"
    r"|&#(?:[xX](?P<hx>[0-9A-Fa-f]{1,6})|(?P<dec>[0-9]{1,7}));|(?P<char>[\s\S])"
)
_ESCAPE_MARKS = ("%", "\\", "&#")

_lock = threading.Lock()
#: Keys of every client of this process and their whole-key forms (``key_forms``), longest first (a
#: key that contains another is replaced whole).
_secrets: tuple[str, ...] = ()
#: What a raw body is searched for (``holds_secret``): each key as is and in base64.
_secret_probes: tuple[bytes, ...] = ()
#: Each key's secret part with a dash or a blank allowed between any two characters.
_spaced_pattern: re.Pattern[str] | None = None
#: Every ``MIN_FRAGMENT_CHARS``-long run of the registered keys' secret parts, lower-cased.
_fragments: frozenset[str] = frozenset()
#: Finds any of ``_fragments`` holding a digit (case-insensitive) in one pass; None until a key is.
_fragment_pattern: re.Pattern[str] | None = None
#: Registered keys, in order (``_spaced_pattern`` is built from them).
_spaced_keys: list[str] = []


def secret_part(key: str) -> str:
    """The part of a key that is secret: the key without its type prefix (``vsk_``)."""
    prefix = _KEY_PREFIX.match(key)
    body = key[prefix.end() :] if prefix else key
    return body if len(body) >= MIN_FRAGMENT_CHARS else key


def key_forms(key: str) -> set[str]:
    """The whole key as a service may copy it: as is, reversed, in hex, and in base64 (``_base64_forms``)."""
    raw = key.encode()
    forms = {key, key[::-1], raw.hex(), raw.hex().upper(), *_base64_forms(raw)}
    return {form for form in forms if len(form) >= MIN_FRAGMENT_CHARS}


def _base64_forms(raw: bytes) -> set[str]:
    """``raw`` in base64 wherever it starts in the encoded text (the characters that depend on it
    alone, for each of the three offsets), in the standard and the URL-safe alphabet."""
    forms = set()
    for shift, first in ((0, 0), (1, 2), (2, 3)):
        encoded = base64.b64encode(b"\0" * shift + raw).decode().rstrip("=")
        core = encoded[first : len(encoded) - (1 if (shift + len(raw)) % 3 else 0)]
        forms |= {core, core.translate(_URL_SAFE)}
    return forms


_URL_SAFE = str.maketrans("+/", "-_")


def register_secret(value: str) -> None:
    """Remember a key so that ``scrub`` removes it from any text (thread-safe, idempotent)."""
    global _secrets, _secret_probes, _spaced_pattern, _fragments, _fragment_pattern
    with _lock:
        if value and value not in _secrets:
            _secrets = tuple(sorted({*_secrets, *key_forms(value)}, key=len, reverse=True))
            probes = {value, *_base64_forms(value.encode())}
            _secret_probes = tuple(sorted({*_secret_probes, *(form.encode() for form in probes)}))
            spaced = [r"[-\s]?".join(map(re.escape, secret_part(key))) for key in (value, *_spaced_keys)]
            _spaced_keys.append(value)
            _spaced_pattern = re.compile("|".join(spaced))
            body = secret_part(value).lower()
            runs = {body[i : i + MIN_FRAGMENT_CHARS] for i in range(len(body) - MIN_FRAGMENT_CHARS + 1)}
            _fragments = _fragments | runs
            # A run starts a match only if it holds a digit: a key may contain words ("deadline")
            # that ordinary text holds too; a match then grows over the key's other runs both ways.
            starts = sorted(run for run in _fragments if any(ch.isdigit() for ch in run))
            if starts:
                _fragment_pattern = re.compile("|".join(re.escape(run) for run in starts), re.IGNORECASE)


def _decoded(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with escaped characters decoded, and each decoded character's span in ``text``."""
    chars: list[str] = []
    spans: list[tuple[int, int]] = []
    for match in _ESCAPED_CHAR.finditer(text):
        groups = match.groupdict()
        if groups["char"] is not None:
            char = groups["char"]
        else:
            digits = groups["pct"] or groups["u"] or groups["x"] or groups["hx"]
            number = int(digits, 16) if digits is not None else int(groups["dec"] or "0")
            char = chr(number) if number <= 0x10FFFF else "?"
        chars.append(char)
        spans.append(match.span())
    return "".join(chars), spans


def _scrub_fragments(text: str) -> str:
    """Replace every run of ``MIN_FRAGMENT_CHARS`` or more characters of a key's secret part."""
    pattern = _fragment_pattern
    if pattern is None:
        return text
    escaped = any(mark in text for mark in _ESCAPE_MARKS)
    if not escaped and pattern.search(text) is None:  # the common case: one pass in C
        return text
    view, spans = _decoded(text) if escaped else (text, None)
    lowered = view.lower()
    covered: list[tuple[int, int]] = []  # runs of the decoded view, merged
    start = 0
    while True:
        match = pattern.search(lowered, start)
        if match is None:
            break
        begin, end = match.start(), match.end()
        while begin > 0 and lowered[begin - 1 : begin - 1 + MIN_FRAGMENT_CHARS] in _fragments:
            begin -= 1
        while end < len(lowered) and lowered[end - MIN_FRAGMENT_CHARS + 1 : end + 1] in _fragments:
            end += 1
        if covered and begin <= covered[-1][1]:
            covered[-1] = (covered[-1][0], max(end, covered[-1][1]))
        else:
            covered.append((begin, end))
        start = max(match.start() + 1, end - MIN_FRAGMENT_CHARS + 1)
    if not covered:
        return text
    pieces: list[str] = []
    position = 0
    for begin, end in covered:
        source_begin, source_end = (spans[begin][0], spans[end - 1][1]) if spans else (begin, end)
        pieces.append(text[position:source_begin])
        pieces.append(REDACTED)
        position = source_end
    pieces.append(text[position:])
    return "".join(pieces)


def _scrub_whole(text: str) -> str:
    """``text`` without any registered key in its whole-key forms (``key_forms``)."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def scrub(text: str) -> str:
    """``text`` without any registered key (wherever it occurs, whole, in part, escaped, encoded or
    spaced out) or bearer token."""
    text = _scrub_whole(text)
    spaced = _spaced_pattern
    if spaced is not None and ("-" in text or " " in text):
        text = spaced.sub(REDACTED, text)
    return _BEARER.sub(r"\1" + REDACTED, _scrub_fragments(text))


def holds_secret(body: bytes | bytearray) -> bool:
    """Whether a raw body holds a registered key as is or in base64 (one pass a form, in C; hex and
    reversed forms are left to the texts ``scrub`` cleans, each pass costing as much again)."""
    return any(probe in body for probe in _secret_probes)


def scrub_values(value: Any) -> Any:
    """A decoded JSON value with every registered key, in its whole-key forms, replaced in its texts
    and member names (rows that echo the key must not land it). Shorter runs of a key stay: a cited
    URL may hold eight of its characters by chance, and a row is data, not a message."""
    if isinstance(value, str):
        return _scrub_whole(value)
    if isinstance(value, list):
        return [scrub_values(item) for item in value]
    if isinstance(value, dict):
        return {_scrub_whole(name): scrub_values(item) for name, item in value.items()}
    return value


def sanitize(value: object, limit: int = MAX_TEXT_CHARS) -> str:
    """A server-provided value made safe to quote: scrubbed (before the cut, which so never leaves
    the start of a key behind), printable, at most ``limit`` characters."""
    text = scrub(value if isinstance(value, str) else str(value))
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else "?" for ch in text)
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def sanitize_optional(value: object, limit: int = MAX_TOKEN_CHARS) -> str | None:
    return None if value is None else sanitize(value, limit)


def excerpt(value: object, limit: int = 40) -> str:
    """A short quotation of a server-provided value (strings in quotes, scrubbed before: ``repr``
    could escape a character of the key and so hide it from ``scrub``)."""
    if isinstance(value, str):
        return f"'{sanitize(value, max(1, limit - 2))}'"
    return sanitize(repr(value), limit)


def _redact_record(record: logging.LogRecord) -> bool:
    """Rewrites a record whose rendered message carries a key or a bearer token; never drops records."""
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
    """Attach the filter to the guarded loggers (idempotent: a logger keeps one copy of a filter)."""
    for name in GUARDED_LOGGERS:
        logging.getLogger(name).addFilter(_redact_record)
