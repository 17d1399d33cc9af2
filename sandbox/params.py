"""Request parsing shared by the endpoints (query parameters, JSON bodies) with the spec's 400 codes,
and opaque cursors."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from sandbox.errors import ApiError
from sandbox.world import ENGINES

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DEFAULT_WINDOW_DAYS = 30
DEFAULT_LIMIT = 100


@dataclass(frozen=True)
class Window:
    """``[start, end)``: ``end`` is exclusive, as the spec's ``to``."""

    start: dt.date
    end: dt.date

    @property
    def midpoint(self) -> dt.date:
        return self.start + dt.timedelta(days=(self.end - self.start).days // 2)


def parse_date(value: str, name: str) -> dt.date:
    if not _DATE.match(value):
        raise ApiError("invalid_date", f"'{name}' must be a date as YYYY-MM-DD.")
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ApiError("invalid_date", f"'{name}' is not a valid calendar date.") from None


def parse_window(query: Mapping[str, str], today: dt.date) -> Window:
    """``to`` defaults to tomorrow, ``from`` to 30 days before ``to``; ``from`` must precede ``to``."""
    end = parse_date(query["to"], "to") if "to" in query else today + dt.timedelta(days=1)
    start = (
        parse_date(query["from"], "from") if "from" in query else end - dt.timedelta(days=DEFAULT_WINDOW_DAYS)
    )
    if start >= end:
        raise ApiError("invalid_date", "'from' must be before 'to' ('to' is exclusive).")
    return Window(start, end)


def parse_engine(query: Mapping[str, str]) -> str | None:
    """The engine filter, ``None`` for the all-engine rollup."""
    if "engine" not in query:
        return None
    engine = query["engine"]
    if engine not in ENGINES:
        raise ApiError("invalid_engine", f"'engine' must be one of: {', '.join(ENGINES)}.")
    return engine


def parse_limit(query: Mapping[str, str], maximum: int, default: int = DEFAULT_LIMIT) -> int:
    if "limit" not in query:
        return min(default, maximum)
    raw = query["limit"]
    if not re.fullmatch(r"[0-9]{1,9}", raw):
        raise ApiError("invalid_request", f"'limit' must be an integer between 1 and {maximum}.")
    value = int(raw)
    if not 1 <= value <= maximum:
        raise ApiError("invalid_request", f"'limit' must be between 1 and {maximum}.")
    return value


def parse_uuid_param(query: Mapping[str, str], name: str) -> str | None:
    if name not in query:
        return None
    try:
        return str(uuid.UUID(query[name]))
    except ValueError:
        raise ApiError("invalid_request", f"'{name}' must be a UUID.") from None


def is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def parse_choice(query: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = query.get(name, default)
    if value not in choices:
        raise ApiError("invalid_request", f"'{name}' must be one of: {', '.join(choices)}.")
    return value


class Cursors:
    """Opaque cursors: an offset bound to the query it came from, with a keyed checksum.

    A cursor from another query (other brand, window or engine) or a tampered one answers 400
    ``invalid_request``; the format is private and may change, as the spec says clients never parse it.
    """

    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()

    def _fingerprint(self, path: str, query: Mapping[str, str]) -> str:
        parts = [path, *(f"{k}={v}" for k, v in sorted(query.items()) if k not in ("cursor", "limit"))]
        return hashlib.blake2b("&".join(parts).encode(), key=self._secret, digest_size=6).hexdigest()

    def encode(self, offset: int, path: str, query: Mapping[str, str]) -> str:
        body = f"{offset}.{self._fingerprint(path, query)}"
        check = hashlib.blake2b(body.encode(), key=self._secret, digest_size=4).hexdigest()
        return base64.urlsafe_b64encode(f"{body}.{check}".encode()).decode().rstrip("=")

    def offset(self, path: str, query: Mapping[str, str]) -> int:
        token = query.get("cursor")
        if token is None or token == "":
            return 0
        invalid = ApiError("invalid_request", "'cursor' is not a cursor returned for this query.")
        try:
            text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
            offset_text, fingerprint, check = text.split(".")
        except (ValueError, UnicodeDecodeError):
            raise invalid from None
        body = f"{offset_text}.{fingerprint}"
        expected = hashlib.blake2b(body.encode(), key=self._secret, digest_size=4).hexdigest()
        if check != expected or fingerprint != self._fingerprint(path, query) or not offset_text.isdigit():
            raise invalid
        return int(offset_text)


async def json_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object; the spec requires ``Content-Type: application/json``."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ApiError("invalid_request", "Send the body as JSON with 'Content-Type: application/json'.")
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise ApiError("invalid_request", "The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError("invalid_request", "The body must be a JSON object.")
    return body


def required_string(body: dict[str, Any], name: str, max_length: int = 500) -> str:
    """A required non-empty string field: missing is ``missing_parameter``, wrong is ``invalid_request``."""
    if name not in body or body[name] is None:
        raise ApiError("missing_parameter", f"'{name}' is required.")
    value = body[name]
    if not isinstance(value, str) or not value.strip() or len(value) > max_length:
        raise ApiError(
            "invalid_request", f"'{name}' must be a non-empty string of at most {max_length} characters."
        )
    return value.strip()
