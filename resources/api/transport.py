"""One HTTP exchange with the service: an ``Answer`` (any status, body decoded) or a ``Failure``
(nothing usable arrived), judged by ``calls``. The body is read as it streams in, within
``max_response_bytes`` raw and decoded, and by the call's retry deadline: never held whole.
"""

from __future__ import annotations

import functools
import http.cookiejar
import logging
import ssl
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from resources.api import endpoints as ep
from resources.api import json_body
from resources.api.budget import RequestBudget
from resources.api.config import MAX_RESPONSE_SETTING
from resources.api.errors import ResponseShapeError
from resources.api.redaction import (
    API_LOGGER,
    MAX_TOKEN_CHARS,
    excerpt,
    holds_secret,
    sanitize_optional,
    scrub_values,
)

logger = logging.getLogger(API_LOGGER)


@dataclass
class Failure:
    """An attempt that went wrong; quoted when the retry loop gives up."""

    cause: str
    detail: str
    status: int | None = None
    code: str | None = None
    request_id: str | None = None

    @property
    def unreachable(self) -> bool:
        """Nothing usable (no answer, a 5xx, a 408, a success that is not JSON): runs the outage clock."""
        return self.status is None or self.status >= 500 or self.status == 408 or self.cause == "not_json"

    def outage_cause(self) -> str:
        if self.status is None:
            return self.cause
        return f"HTTP {self.status}" + (f" {self.code}" if self.code else "")


@dataclass(frozen=True)
class Answer:
    """What the service answered: status, decoded body, request id and headers."""

    status: int
    body: Any
    request_id: str | None
    #: lower-case names (read once: every lookup in httpx's ``Headers`` scans them all)
    headers: Mapping[str, str]
    #: the first bytes of a body that is not JSON, for the error that quotes it
    raw_start: bytes = b""

    @property
    def content_type(self) -> str:
        return (self.headers.get("content-type") or "").split(";")[0].strip().lower()

    @property
    def is_json_object(self) -> bool:
        """A JSON object, under a JSON content type (or none): what every success must be."""
        media = self.content_type
        declared_json = not media or media == "application/json" or media.endswith("+json")
        return isinstance(self.body, dict) and declared_json

    @property
    def usable(self) -> bool:
        """An answer a retry cannot improve on (the outage clock stops)."""
        if self.status >= 500 or self.status == 408:
            return False
        return not (200 <= self.status < 300 and not self.is_json_object)


class TooSlow(Exception):
    """The answer was still arriving when the call's retry deadline passed."""


def _identity(chunk: bytes, max_length: int) -> bytes:
    return chunk


def _decoder(encoding: str) -> Callable[[bytes, int], bytes] | None:
    """``decode(chunk, max_length)`` for an encoding the client asks for, None for another: at most
    ``max_length`` bytes a chunk; ``decode(b"", n)`` at the end checks that the stream is complete."""
    if encoding == "identity":
        return _identity
    if encoding not in ("gzip", "x-gzip", "deflate"):
        return None
    inflater: Any = None

    def decode(chunk: bytes, max_length: int) -> bytes:
        nonlocal inflater
        if inflater is None:
            if not chunk:
                return b""  # no body at all (a 204, or the end of an empty one)
            if encoding != "deflate":
                wbits = zlib.MAX_WBITS | 16
            else:  # RFC 9110's zlib stream, or the raw deflate some servers send
                wrapped = len(chunk) >= 2 and chunk[0] & 0x0F == 8 and (chunk[0] << 8 | chunk[1]) % 31 == 0
                wbits = zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS
            inflater = zlib.decompressobj(wbits)
        if not chunk:
            if not inflater.eof:
                raise zlib.error("the compressed body ends early")
            return b""
        return inflater.decompress(chunk, max_length)

    return decode


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps no cookie: the service authenticates by key alone, and httpx's jar parses
    every response's headers into an ``email.message.Message``: CPU on every request for nothing."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One verified TLS context (httpx's defaults) for every client of the process: httpx would load
    the CA bundle again for each of a sync's clients."""
    return httpx.create_ssl_context()


class Transport:
    """The pooled ``httpx.Client`` of one ``VisibilityClient``: sends one request, reads its answer."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        budget: RequestBudget,
        timeout_seconds: float,
        max_concurrency: int,
        max_response_bytes: int,
        transport: httpx.BaseTransport | None,
    ) -> None:
        self._budget = budget
        self._timeout_seconds = timeout_seconds
        self._max_response_bytes = max_response_bytes
        # httpx masks the Authorization value in its Headers repr; it never logs request headers.
        self.http = httpx.Client(
            base_url=base_url,
            headers={
                "Authorization": f"Bearer {key}",
                "User-Agent": "visibility-sync",
                "Accept": "application/json",
                # the encodings ``_decoder`` reads within the body cap (not br or zstd)
                "Accept-Encoding": "gzip, deflate",
            },
            timeout=httpx.Timeout(timeout_seconds, connect=min(10.0, timeout_seconds)),
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
            follow_redirects=False,
            cookies=_NoCookies(),
            verify=tls_context(),
            transport=transport,
        )

    def exchange(
        self,
        endpoint: ep.Endpoint,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        give_up_at: float,
    ) -> tuple[Answer | None, Failure | None]:
        """One HTTP exchange: an answer (any status, body decoded), or a transport failure. It ends
        by ``give_up_at`` (the call's retry deadline, ``time.monotonic()``), or ``timeout_seconds``
        after it starts for the last try at the deadline."""
        started = time.monotonic()
        give_up_at = max(give_up_at, started + self._timeout_seconds)
        try:
            request = self.http.build_request(endpoint.method, path, params=params, json=body)
            response = self.http.send(request, stream=True)
            try:
                headers = dict(response.headers.items())
                # Whatever the server (or a proxy) put in the header is quoted in messages and logs.
                request_id = sanitize_optional(headers.get("x-request-id"), MAX_TOKEN_CHARS)
                content = self._read_body(endpoint, response, headers, request_id, give_up_at)
            finally:
                response.close()
        except TooSlow as exc:
            return None, Failure("timeout", str(exc))
        except httpx.TimeoutException as exc:
            sent = not isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
            return None, Failure("timeout" if sent else "connect_timeout", type(exc).__name__)
        except httpx.ConnectError as exc:
            return None, Failure("connect_error", type(exc).__name__)
        except (httpx.DecodingError, zlib.error) as exc:  # a compressed body cut short or corrupt
            return None, Failure("invalid_body", type(exc).__name__)
        except httpx.RequestError as exc:  # a dropped connection, read/write errors, anything else
            return None, Failure("connection_dropped", type(exc).__name__)
        decoded: Any = None
        if content:
            try:
                decoded = json_body.loads(content)
            except (ValueError, UnicodeDecodeError, RecursionError):
                decoded = None
            if decoded is not None and holds_secret(content):
                # a service (or a proxy) that echoes the key: no row, name or message may carry it
                decoded = scrub_values(decoded)
                logger.warning(
                    "%s: the answer holds the API key; replaced by [redacted] before use [X-Request-Id %s]",
                    endpoint.key,
                    request_id,
                )
        logger.debug(
            "%s %s -> %s in %.3fs [X-Request-Id %s]",
            endpoint.method,
            endpoint.template,
            response.status_code,
            time.monotonic() - started,
            request_id,
        )
        raw_start = bytes(content[:80]) if decoded is None else b""
        return Answer(response.status_code, decoded, request_id, headers, raw_start), None

    def _read_body(
        self,
        endpoint: ep.Endpoint,
        response: httpx.Response,
        headers: Mapping[str, str],
        request_id: str | None,
        give_up_at: float,
    ) -> bytes | bytearray:
        """The body, decoded, within ``max_response_bytes`` and by ``give_up_at``; a cancelled sync
        stops it at the next chunk."""
        cap = self._max_response_bytes
        encoding = (headers.get("content-encoding") or "identity").strip().lower()
        decoder = _decoder(encoding)

        def too_large(what: str) -> ResponseShapeError:
            error = ResponseShapeError(
                f"the answer's body is larger than {cap} bytes ({what}; {MAX_RESPONSE_SETTING}): "
                "not read further",
                endpoint=endpoint.key,
                status=response.status_code,
                request_id=request_id,
            )
            error.may_have_applied = endpoint.method != "GET"
            return error

        if decoder is None:
            raise ResponseShapeError(
                f"the answer is encoded as {excerpt(encoding, 40)}, which the client did not ask for "
                "and cannot read",
                endpoint=endpoint.key,
                status=response.status_code,
                request_id=request_id,
            )
        declared_text = headers.get("content-length", "")
        declared = int(declared_text) if declared_text.isdigit() else None
        if declared is not None and declared > cap:
            raise too_large(f"Content-Length {declared}")
        body = bytearray()  # json_body decodes it as is: no copy of the whole body
        raw = size = 0
        for chunk in response.iter_raw():
            raw += len(chunk)
            if raw > cap:
                raise too_large(f"{raw} bytes received")
            piece = decoder(chunk, cap - size + 1)
            size += len(piece)
            if size > cap:
                raise too_large(f"{encoding} body expanding past it after {raw} bytes received")
            body += piece
            self._budget.check_cancelled(endpoint.key)  # a cancelled sync reads no further
            if time.monotonic() > give_up_at and (declared is None or raw < declared):
                raise TooSlow(f"the answer was still arriving at the retry deadline ({size} bytes read)")
        if decoder is not _identity:
            decoder(b"", 1)  # the compressed stream must be complete
        return body
