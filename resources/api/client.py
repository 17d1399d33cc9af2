"""The Dagster-free HTTP client of the visibility API (public surface; see docs/ARCHITECTURE.md).

One client per asset or step, one budget per sync: a pooled ``httpx.Client``, the shared
``RequestBudget`` that every thread and every client of the sync passes through, typed methods for
every endpoint, and counters the assets put in their metadata. The policy pieces live in sibling
modules: ``budget`` (pacing, AIMD, the outage clock, cancellation, wait announcements), ``retry``
(what each answer means), ``paging`` (bounded cursor walks), ``endpoints`` (shapes and types),
``headers``, ``redaction`` (the key out of every text).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import hashlib
import http.cookiejar
import logging
import ssl
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import httpx
import tenacity

from resources.api import endpoints as ep
from resources.api import json_body
from resources.api.budget import BudgetExhausted, Permit, RequestBudget, WaitCallback
from resources.api.config import (
    DEFAULT_MAX_NEW_COLUMNS,
    DEFAULT_MAX_RESPONSE_BYTES,
    MAX_RESPONSE_SETTING,
    origin,
    validate_api_key,
    validate_base_url,
)
from resources.api.errors import (
    ERROR_BY_STATUS,
    NotFoundError,
    QuotaExceededError,
    RateLimitError,
    ResponseShapeError,
    ServerError,
    ServiceUnreachableError,
    TransportError,
    VisibilityAPIError,
)
from resources.api.headers import parse_retry_after
from resources.api.paging import DEFAULT_MAX_PAGES, complete_set_fields, iterate_pages
from resources.api.redaction import (
    API_LOGGER,
    MAX_TEXT_CHARS,
    MAX_TOKEN_CHARS,
    excerpt,
    holds_secret,
    register_secret,
    sanitize,
    sanitize_optional,
    scrub_values,
)
from resources.api.redaction import install as install_log_guard
from resources.api.retry import Action, classify, full_jitter, may_retry_after_ambiguous_failure
from resources.api.stats import MAX_CODE_CHARS, RequestStats

T = TypeVar("T")
R = TypeVar("R")

Row = dict[str, Any]

logger = logging.getLogger(API_LOGGER)

#: Failures after which the request may or may not have been applied.
_AMBIGUOUS_CAUSES = frozenset({"timeout", "connection_dropped", "invalid_body", "server_error"})

#: Longest service-provided error message quoted in an exception (kept for imports).
_MAX_MESSAGE_CHARS = MAX_TEXT_CHARS
#: How long a sync retries a service that has answered none of its requests (connection refused, no
#: such host): a wrong URL or a service not started fails within seconds, not after the retry deadline
#: (that deadline is for a service lost after it answered).
NEVER_REACHED_SECONDS = 5.0
#: A backoff that would pass the deadline is cut to end at it (one last try) if this much time is left.
_LAST_TRY_MIN_SECONDS = 0.05
#: At most one warning about rows with an unknown engine per endpoint this often (per client).
_UNKNOWN_ENGINE_WARN_EVERY_SECONDS = 30.0
#: Absolute URLs of query-less paths kept per client (``VisibilityClient._url``).
_URL_CACHE_SIZE = 256


@dataclass(frozen=True)
class CompleteSet:
    """A non-paging, possibly truncated answer (generations, citation URLs)."""

    rows: list[Row]
    total_count: int
    capped: bool
    total_citations: int | None = None  # citation URLs only


class _Counters:
    """``RequestStats`` behind a lock: every thread of a client updates the same counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = RequestStats()

    def request(self, endpoint: str) -> None:
        with self._lock:
            counts = self._stats.requests_by_endpoint
            counts[endpoint] = counts.get(endpoint, 0) + 1

    def response(self, status: int, code: str | None) -> None:
        with self._lock:
            counts = self._stats.responses_by_status
            counts[status] = counts.get(status, 0) + 1
            if code is not None:
                codes = self._stats.errors_by_code
                codes[code] = codes.get(code, 0) + 1

    def retry(self, cause: str) -> None:
        with self._lock:
            counts = self._stats.retries_by_cause
            counts[cause] = counts.get(cause, 0) + 1

    def wait(self, cause: str, seconds: float) -> None:
        if seconds <= 0:
            return
        with self._lock:
            self._stats.wait_seconds += seconds
            by_cause = self._stats.wait_seconds_by_cause
            by_cause[cause] = by_cause.get(cause, 0.0) + seconds

    def unknown_engine(self, endpoint: str, rows: int) -> int:
        """Count dropped rows; return the endpoint's total so far."""
        with self._lock:
            counts = self._stats.unknown_engine_rows
            counts[endpoint] = counts.get(endpoint, 0) + rows
            return counts[endpoint]

    def snapshot(self) -> RequestStats:
        with self._lock:
            return copy.deepcopy(self._stats)


@dataclass
class _Failure:
    """The last thing that went wrong in a retry loop; quoted when the loop gives up."""

    cause: str
    detail: str
    status: int | None = None
    code: str | None = None
    request_id: str | None = None

    @property
    def unreachable(self) -> bool:
        """A transport failure, a 5xx, a 408 or a success that is not JSON: what runs the budget's
        outage clock (the service answers nothing usable)."""
        return self.status is None or self.status >= 500 or self.status == 408 or self.cause == "not_json"

    def outage_cause(self) -> str:
        if self.status is None:
            return self.cause
        return f"HTTP {self.status}" + (f" {self.code}" if self.code else "")


@dataclass(frozen=True)
class _Answer:
    status: int
    body: Any
    request_id: str | None
    #: lower-case names (read once from httpx's ``Headers``, whose every lookup scans them all)
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
        """Whether the service answered something a retry cannot improve on (the outage clock stops)."""
        if self.status >= 500 or self.status == 408:
            return False
        return not (200 <= self.status < 300 and not self.is_json_object)


@dataclass
class _Call:
    """One ``_request``, shared by its attempts: what it sends and what the earlier attempts left."""

    endpoint: ep.Endpoint
    path: str
    params: Mapping[str, Any] | None
    body: Any
    started: float  # the budget's clock
    deadline: float  # the call's own retry deadline, on the budget's clock
    last: _Failure | None = None
    ambiguous: bool = False  # an earlier attempt ended without telling whether it was applied
    not_json: int = 0  # successes that were not JSON: one is retried, the second is a shape error
    attempts: int = 0
    left: float = 0.0  # seconds to the deadline when the last wait was judged


class _Retry(Exception):
    """An attempt the policy retries, and the seconds to wait before the next one."""

    def __init__(self, failure: _Failure, delay: float) -> None:
        super().__init__(failure.cause)
        self.failure = failure
        self.delay = delay


def _retry_of(state: tenacity.RetryCallState) -> _Retry:
    assert state.outcome is not None
    retry = state.outcome.exception()
    assert isinstance(retry, _Retry)
    return retry


class _Skipped(Exception):
    """A ``map_concurrent`` call not started because an earlier one failed."""


#: The end of ``map_concurrent``'s input.
_END: Any = object()


class _TooSlow(Exception):
    """The answer was still arriving when the call's retry deadline passed."""


def _identity(chunk: bytes, max_length: int) -> bytes:
    return chunk


def _decoder(encoding: str) -> Callable[[bytes, int], bytes] | None:
    """``decode(chunk, max_length)`` for a ``Content-Encoding`` the client asks for (``gzip``,
    ``deflate``), None for another: at most ``max_length`` bytes a chunk, so a body that expands
    without end is never held; ``decode(b"", n)`` at the end checks that the stream is complete."""
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


def _iso(day: dt.date | None) -> str | None:
    return day.isoformat() if day is not None else None


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps no cookie: the service authenticates by key alone, so what a server (or a
    proxy) sets is never sent back. httpx otherwise reads every response's headers into its jar,
    building a ``email.message.Message`` of them: CPU on every request for nothing
    (bench/RESULTS.md, *CPU per landed row*)."""

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One verified TLS context for every client of the process (httpx's defaults: certifi, or
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``): httpx would load the CA bundle again for each client, and a
    sync opens about ten (bench/RESULTS.md, *CPU per landed row*)."""
    return httpx.create_ssl_context()


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters without the unset ones (so service defaults apply)."""
    return {name: value for name, value in values.items() if value is not None}


class VisibilityClient:
    """One client per asset or step; its budget (and with it the retry deadline's outage clock, the
    cancel switch and the wait hook) is shared by every client of the sync.

    Thread-safe: ``map_concurrent`` and any caller thread may share one instance.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        max_concurrency: int = 8,
        timeout_seconds: float = 30.0,
        retry_deadline_seconds: float = 300.0,
        user_agent: str = "visibility-sync",
        backoff_base_seconds: float = 0.5,
        backoff_max_seconds: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        budget: RequestBudget | None = None,
        on_wait: WaitCallback | None = None,
        cancel_event: threading.Event | None = None,
        max_pages: int = DEFAULT_MAX_PAGES,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_new_columns: int = DEFAULT_MAX_NEW_COLUMNS,
    ) -> None:
        """``budget``: the sync's shared budget (the resource passes it); without one the client
        makes its own, with ``on_wait`` and ``cancel_event`` (which otherwise belong to the budget).

        ``retry_deadline_seconds``: how long the client keeps retrying, counted per call for 429s and
        from the start of the outage (shared by the budget's clients) for transport failures and
        5xx. ``max_pages``: the most pages one paging walk reads (``paging``).
        ``max_response_bytes``: the largest body read, raw or decoded (``VISIBILITY_MAX_RESPONSE_BYTES``).
        ``max_new_columns``: the most unknown fields a table fetched through this client may bring
        (``VISIBILITY_MAX_NEW_COLUMNS``); the client only carries it to the fetch that checks it.
        """
        if max_concurrency < 1 or max_response_bytes < 1:
            raise ValueError("max_concurrency and max_response_bytes must be at least 1")
        if timeout_seconds <= 0 or retry_deadline_seconds <= 0:
            raise ValueError("timeout_seconds and retry_deadline_seconds must be positive")
        if budget is not None and (on_wait is not None or cancel_event is not None):
            raise ValueError(
                "on_wait and cancel_event belong to the shared budget: give them to RequestBudget"
            )
        self._base_url = validate_base_url(base_url)
        key = validate_api_key(api_key)
        register_secret(key)  # every text quoted from the service is scrubbed of it
        self._origin = origin(self._base_url)
        # names what a key fetched (sync.resume) without holding the key: a keyed hash, not reversible
        self._key_fingerprint = hashlib.blake2b(
            key.encode(), digest_size=16, person=b"visibility-key"
        ).hexdigest()
        self._max_concurrency = max_concurrency
        self._retry_deadline = retry_deadline_seconds
        self._backoff_base = backoff_base_seconds
        self._backoff_max = backoff_max_seconds
        self._max_pages = max_pages
        self._max_response_bytes = max_response_bytes
        self.max_new_columns = max_new_columns
        self._timeout_seconds = timeout_seconds
        self._budget = (
            budget
            if budget is not None
            else RequestBudget(max_concurrency, on_wait=on_wait, cancel_event=cancel_event)
        )
        self._counters = _Counters()
        self._closed = False
        self._engine_warned_at: dict[str, float] = {}
        #: Set by the first quota_exceeded: from then on nothing is sent (the quota will not recover
        #: within a sync, and every further request would be refused too).
        self._quota_error: QuotaExceededError | None = None
        #: path -> its absolute URL (``_url``)
        self._urls: dict[str, httpx.URL] = {}
        install_log_guard()
        # httpx masks the Authorization value in its Headers repr; it never logs request headers.
        self._http = httpx.Client(
            base_url=self._base_url,
            headers={
                "Authorization": f"Bearer {key}",
                "User-Agent": user_agent,
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
        base = self._http.base_url  # httpx's form: its path ends with "/"
        self._base = f"{base.scheme}://{base.netloc.decode('ascii')}{base.raw_path.decode('ascii')}"

    def __repr__(self) -> str:
        return f"VisibilityClient(base_url={self._base_url!r}, max_concurrency={self._max_concurrency})"

    __str__ = __repr__

    # lifecycle
    def close(self) -> None:
        self._closed = True
        self._http.close()

    def __enter__(self) -> VisibilityClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def key_fingerprint(self) -> str:
        """A one-way hash of the key: tells what one key fetched from another's, never the key."""
        return self._key_fingerprint

    @property
    def origin(self) -> str:
        """``scheme://host:port`` of the service: what messages name (never a key or user info)."""
        return self._origin

    @property
    def retry_deadline_seconds(self) -> float:
        return self._retry_deadline

    @property
    def stats(self) -> RequestStats:
        """A consistent copy of the counters (later requests do not change it)."""
        return self._counters.snapshot()

    @property
    def budget(self) -> RequestBudget:
        """The shared budget (read ``budget.snapshot()`` to see the current limits)."""
        return self._budget

    def cancel(self) -> None:
        """Cancel the sync: this client and every client sharing its budget raise ``SyncCancelled``."""
        self._budget.cancel()

    # ------------------------------------------------------------------------------------------
    # The one request path
    # ------------------------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        """Texts quoted from the service go into exceptions: never let them carry the key."""
        return sanitize(text, MAX_TEXT_CHARS)

    def _backoff(self, attempt: int) -> float:
        return full_jitter(attempt, base_seconds=self._backoff_base, cap_seconds=self._backoff_max)

    def _url(self, path: str, params: Mapping[str, Any] | None) -> httpx.URL | None:
        """The URL httpx builds from the base URL, ``path`` and ``params``, parsed once instead of
        three times (httpx parses the relative path, the merged URL and the URL with its query:
        80 to 150 µs of CPU a request); None for a path it does not cover (a query, a fragment, a
        dot segment, no leading "/"), which httpx merges itself."""
        if path[:1] != "/" or path[:2] == "//" or "?" in path or "#" in path or "/." in path:
            return None
        if params:
            return httpx.URL(f"{self._base}{path[1:]}?{httpx.QueryParams(params)}")
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= _URL_CACHE_SIZE:
                self._urls.clear()
            url = self._urls[path] = httpx.URL(self._base + path[1:])
        return url

    def _send_once(
        self,
        endpoint: ep.Endpoint,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        give_up_at: float,
    ) -> tuple[_Answer | None, _Failure | None]:
        """One HTTP exchange: an answer (any status, body decoded), or a transport failure.

        The whole exchange, from connect to the body's last byte, ends by ``give_up_at`` (the call's
        retry deadline, as ``time.monotonic()``), or ``timeout_seconds`` after it starts for the last
        try at the deadline: a body that drips in stops there, at most one read's timeout later. The
        body is read as it streams in, raw and decoded bytes counted against ``max_response_bytes``:
        a compressed body that expands without end is cut at the cap, never held whole
        (``ResponseShapeError``).
        """
        started = time.monotonic()
        give_up_at = max(give_up_at, started + self._timeout_seconds)
        url = self._url(path, params)
        try:
            if url is None:
                request = self._http.build_request(endpoint.method, path, params=params, json=body)
            else:
                request = self._http.build_request(endpoint.method, url, json=body)
            response = self._http.send(request, stream=True)
            try:
                headers = dict(response.headers.items())
                # Whatever the server (or a proxy) put in the header is quoted in messages and logs.
                request_id = sanitize_optional(headers.get("x-request-id"), MAX_TOKEN_CHARS)
                content = self._read_body(endpoint, response, headers, request_id, give_up_at)
            finally:
                response.close()
        except _TooSlow as exc:
            return None, _Failure("timeout", str(exc))
        except httpx.TimeoutException as exc:
            sent = not isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
            return None, _Failure("timeout" if sent else "connect_timeout", type(exc).__name__)
        except httpx.RemoteProtocolError as exc:
            return None, _Failure("connection_dropped", type(exc).__name__)
        except httpx.ConnectError as exc:
            return None, _Failure("connect_error", type(exc).__name__)
        except (httpx.DecodingError, zlib.error) as exc:  # a compressed body cut short or corrupt
            return None, _Failure("invalid_body", type(exc).__name__)
        except httpx.RequestError as exc:  # read/write errors, and anything else on the wire
            return None, _Failure("connection_dropped", type(exc).__name__)
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
        return _Answer(response.status_code, decoded, request_id, headers, raw_start), None

    def _read_body(
        self,
        endpoint: ep.Endpoint,
        response: httpx.Response,
        headers: Mapping[str, str],
        request_id: str | None,
        give_up_at: float,
    ) -> bytes | bytearray:
        """The body, decoded, read within ``max_response_bytes`` and by ``give_up_at``, or until the
        sync is cancelled (``SyncCancelled`` at the next chunk)."""
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

        if response.is_stream_consumed:  # a transport that built its answer in memory, decoded
            if len(response.content) > cap:
                raise too_large(f"{len(response.content)} bytes")
            return response.content
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
                raise _TooSlow(f"the answer was still arriving at the retry deadline ({size} bytes read)")
        if decoder is not _identity:
            decoder(b"", 1)  # the compressed stream must be complete
        return body

    def _sync_deadline(self) -> float:
        """Seconds the sync retries an unreachable service: the budget's, else this client's; at most
        :data:`NEVER_REACHED_SECONDS` while the service has answered nothing."""
        shared = self._budget.retry_deadline_seconds
        deadline = shared if shared is not None else self._retry_deadline
        return deadline if self._budget.answered else min(deadline, NEVER_REACHED_SECONDS)

    def _call_deadline(self, call_deadline: float) -> float:
        """The call's own deadline, or the sync's if an outage (or a run of 429s) started earlier
        (whichever is first)."""
        outage, refused = self._budget.outage, self._budget.refused_since
        starts = [t for t in (outage.since if outage is not None else None, refused) if t is not None]
        if not starts:
            return call_deadline
        return min(call_deadline, min(starts) + self._sync_deadline())

    def _fail_fast(self, endpoint: ep.Endpoint) -> None:
        """Once the sync's outage (or its run of 429s) outlived the retry deadline, fail at once
        instead of retrying again."""
        refused = self._budget.refused_since
        if refused is not None and self._budget.now() - refused >= self._sync_deadline():
            raise RateLimitError(
                f"not sent: the service at {self._origin} has answered every request with 429 for "
                f"{self._budget.now() - refused:.0f}s, past the {self._sync_deadline():g}s retry deadline "
                "the calls of this sync share; run again later",
                endpoint=endpoint.key,
                status=429,
            )
        outage = self._budget.outage
        if outage is None:
            return
        elapsed = self._budget.now() - outage.since
        deadline = self._sync_deadline()
        # the same rule as a call's give-up: a deadline with less than one last try left is spent
        if elapsed < deadline - _LAST_TRY_MIN_SECONDS:
            return
        raise ServiceUnreachableError(
            f"not sent: the service at {self._origin} has failed every attempt for {elapsed:.0f}s "
            f"(last: {outage.cause}), past the {deadline:g}s retry deadline the calls of this sync "
            "share; check that the service is up and reachable, then run again",
            endpoint=endpoint.key,
        )

    def _request(
        self,
        endpoint: ep.Endpoint,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> tuple[dict[str, Any], str | None]:
        """Send until a success, a typed failure, or the retry deadline; return (body, request id).

        A tenacity loop: each attempt (``_attempt``) returns the success, raises a typed error, or
        raises ``_Retry`` with the wait the policy (``retry``, ``_judge``) gives (``_next_wait``);
        tenacity stops when that wait passes the deadline and sleeps through the budget, so a cancel
        ends the wait.
        """
        if self._closed:
            raise VisibilityAPIError("the client is closed", endpoint=endpoint.key)
        self._budget.check_cancelled(endpoint.key)
        if self._quota_error is not None:
            raise self._quota_stop(endpoint)
        self._fail_fast(endpoint)
        started = self._budget.now()
        call = _Call(endpoint, path, params, body, started, started + self._retry_deadline)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Retry),
            wait=self._next_wait,
            stop=lambda state: state.upcoming_sleep > call.left,
            sleep=functools.partial(self._backoff_sleep, endpoint.key),
            before_sleep=self._announce_retry,
            retry_error_callback=self._gave_up,
        )
        return retrying(self._attempt, call)

    def _attempt(self, call: _Call) -> tuple[dict[str, Any], str | None]:
        """One try: (body, request id), a typed error, or ``_Retry`` (the failure and the wait)."""
        budget, endpoint = self._budget, call.endpoint
        try:
            permit = budget.acquire(endpoint.key, deadline=self._call_deadline(call.deadline))
        except BudgetExhausted as exc:
            last = call.last or _Failure("rate_limited", str(exc))
            raise self._give_up(endpoint, last, call.attempts, call.started, extra=str(exc)) from None
        self._counters.wait("pacing", permit.waited_for_rate)
        self._counters.wait("concurrency", permit.waited_for_slot)
        if self._quota_error is not None:
            budget.release(permit, success=False)
            raise self._quota_stop(endpoint)
        try:
            budget.take_request(endpoint.key)
        except BaseException:
            budget.release(permit, success=False)
            raise
        self._counters.request(endpoint.key)
        success = False
        try:
            give_up_at = time.monotonic() + self._call_deadline(call.deadline) - budget.now()
            answer, failure = self._send_once(endpoint, call.path, call.params, call.body, give_up_at)
            if answer is not None:
                budget.observe(permit, answer.headers)
                code = _error_code(answer.body)
                if answer.usable:
                    budget.note_reachable()
                elif answer.status < 300:
                    budget.note_unreachable(f"HTTP {answer.status} not JSON")
                else:
                    budget.note_unreachable(f"HTTP {answer.status}" + (f" {code}" if code else ""))
                self._counters.response(answer.status, code)
                try:
                    outcome = self._judge(endpoint, answer, permit, call.attempts, call.not_json)
                except NotFoundError as exc:
                    if call.ambiguous and endpoint.method == "DELETE":
                        raise NotFoundError(
                            f"{exc.detail}; an earlier attempt ended without an answer and has "
                            "probably applied this DELETE already",
                            endpoint=exc.endpoint,
                            status=exc.status,
                            code=exc.code,
                            request_id=exc.request_id,
                        ) from exc
                    raise
                if isinstance(outcome, dict):
                    success = True
                    budget.note_success()
                    return outcome, answer.request_id
                if answer.status == 429:
                    budget.note_refused()
                failure, delay = outcome
            else:
                assert failure is not None
                budget.note_unreachable(failure.cause)
                if failure.cause in _AMBIGUOUS_CAUSES and not may_retry_after_ambiguous_failure(
                    endpoint.method
                ):
                    raise self._not_repeated(endpoint, failure)
                delay = self._backoff(call.attempts)
        finally:
            budget.release(permit, success=success)
        call.last = failure
        call.ambiguous = call.ambiguous or failure.cause in _AMBIGUOUS_CAUSES
        call.not_json += failure.cause == "not_json"
        call.attempts += 1
        raise _Retry(failure, delay)

    def _next_wait(self, state: tenacity.RetryCallState) -> float:
        """The policy's wait before the next attempt; one that would pass the deadline is cut to end
        at it when the service is unreachable (one last try: retry for all of it, not less). The
        stop (tenacity's, in ``_request``) gives up when the wait still passes it."""
        call: _Call = state.args[0]
        retry = _retry_of(state)
        call.left = self._call_deadline(call.deadline) - self._budget.now()
        if retry.delay > call.left and retry.failure.unreachable and call.left >= _LAST_TRY_MIN_SECONDS:
            retry.delay = call.left
        return retry.delay

    def _gave_up(self, state: tenacity.RetryCallState) -> NoReturn:
        call: _Call = state.args[0]
        assert call.last is not None
        raise self._give_up(call.endpoint, call.last, call.attempts, call.started)

    def _backoff_sleep(self, endpoint: str, seconds: float) -> None:
        """The wait before a retry: ended at once by a cancel (``SyncCancelled``)."""
        if seconds > 0:
            self._budget.sleep(seconds, endpoint=endpoint)
            self._counters.wait("backoff", seconds)

    def _announce_retry(self, state: tenacity.RetryCallState) -> None:
        """Count the retry; say what the coming backoff waits for, and which request it retries (the
        budget throttles the log lines)."""
        call: _Call = state.args[0]
        retry = _retry_of(state)
        endpoint, failure, delay = call.endpoint, retry.failure, retry.delay
        self._counters.retry(failure.cause)
        logger.debug(
            "retrying %s after %s (attempt %d) in %.2fs%s",
            endpoint.key,
            failure.cause,
            call.attempts,
            delay,
            f" [X-Request-Id {failure.request_id}]" if failure.request_id else "",
        )
        if failure.cause == "not_json":
            self._budget.announce(
                "unreachable",
                delay,
                f"retrying {endpoint.key} once at {self._origin}: {failure.detail}",
                warning=True,
            )
        elif failure.unreachable and self._budget.outage is not None:
            what = "unreachable" if failure.status is None else "failing"
            self._budget.announce(
                "unreachable",
                delay,
                f"service {what} at {self._origin} ({failure.outage_cause()}), retrying {endpoint.key} "
                f"for {max(0.0, call.left):.0f} more s",
                warning=True,
            )
        elif delay > 0:
            self._budget.announce(
                "backoff",
                delay,
                f"backoff: waiting {delay:.1f} s before retrying {endpoint.key} after {failure.cause}",
            )

    def _judge(
        self, endpoint: ep.Endpoint, answer: _Answer, permit: Permit, attempt: int, not_json: int = 0
    ) -> dict[str, Any] | tuple[_Failure, float]:
        """A success body, or (the failure, seconds to wait before retrying); raises typed errors."""
        code = _error_code(answer.body)
        decision = classify(answer.status, code)
        action = decision.action
        if action is Action.SUCCESS:
            if not answer.is_json_object:
                # A proxy's HTML page or a cut body: retried once (a cut may be a glitch); the second
                # is a shape error at once, so a service that answers HTML costs seconds, not deadlines.
                what = _not_json_detail(answer)
                if not_json == 0 and may_retry_after_ambiguous_failure(endpoint.method):
                    return _Failure("not_json", what, **_ids(answer)), self._backoff(0)
                if not may_retry_after_ambiguous_failure(endpoint.method):
                    raise self._not_repeated(endpoint, _Failure("invalid_body", what, **_ids(answer)))
                raise ResponseShapeError(
                    f"{what}, twice in a row; a success must be a JSON object (is a proxy or a login "
                    f"page in front of {self._origin}?)",
                    endpoint=endpoint.key,
                    status=answer.status,
                    request_id=answer.request_id,
                )
            if "data" not in answer.body:
                raise ResponseShapeError(
                    "the success body has no 'data' member",
                    field="data",
                    endpoint=endpoint.key,
                    status=answer.status,
                    request_id=answer.request_id,
                )
            return answer.body
        # a failure: what it says (only now: a success never quotes the body or reads Retry-After)
        error = answer.body.get("error") if isinstance(answer.body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        message = self._scrub(message) if isinstance(message, str) else None
        failure = _Failure(
            decision.cause,
            message or f"HTTP {answer.status}",
            status=answer.status,
            code=code,
            request_id=answer.request_id,
        )
        retry_after = parse_retry_after(answer.headers.get("retry-after"))
        if action is Action.QUOTA:
            quota = QuotaExceededError(
                message or "the quota is used up",
                endpoint=endpoint.key,
                status=answer.status,
                code=code,
                request_id=answer.request_id,
            )
            self._quota_error = self._quota_error or quota
            raise quota
        if action is Action.FAIL:
            error_type = ERROR_BY_STATUS.get(answer.status, VisibilityAPIError)
            raise error_type(
                message or f"the service refused the request (HTTP {answer.status})",
                endpoint=endpoint.key,
                status=answer.status,
                code=code,
                request_id=answer.request_id,
            )
        if action is Action.WAIT_GLOBAL:
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            self._budget.block(delay, reason=_block_reason(retry_after, code))
            return failure, 0.0  # the budget holds everyone back; acquire() does the waiting
        if action is Action.WAIT_ENDPOINT:
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            self._budget.block(delay, endpoint.key, reason=_block_reason(retry_after, code))
            return failure, 0.0
        if action is Action.SHED_CONCURRENCY:
            changed = self._budget.concurrency_refused(permit)
            if changed:
                logger.info(
                    "concurrency_limited: in-flight limit lowered to %.1f",
                    self._budget.snapshot().concurrency_limit,
                )
            return failure, self._backoff(0)
        # RETRY: 5xx and 408
        if answer.status == 503 or may_retry_after_ambiguous_failure(endpoint.method):
            delay = retry_after if retry_after is not None else self._backoff(attempt)
            return failure, delay
        raise self._not_repeated(endpoint, failure)

    def _quota_stop(self, endpoint: ep.Endpoint) -> QuotaExceededError:
        first = self._quota_error
        assert first is not None
        return QuotaExceededError(
            f"not sent: the quota was already used up (first refused at {first.endpoint})",
            endpoint=endpoint.key,
            status=first.status,
            code=first.code,
            request_id=first.request_id,
        )

    def _give_up(
        self, endpoint: ep.Endpoint, last: _Failure, attempts: int, started: float, extra: str = ""
    ) -> VisibilityAPIError:
        error_type: type[VisibilityAPIError]
        if last.status == 429 or last.cause.endswith("rate_limited"):
            error_type = RateLimitError
        elif last.status is not None and last.status >= 500:
            error_type = ServerError
        else:
            error_type = TransportError
        now = self._budget.now()
        outage = self._budget.outage
        if last.unreachable and outage is not None:
            # Name the service and how long it has been failing: the clock is the sync's, not the call's.
            retried = now - min(outage.since, started)
            detail = (
                f"gave up after {attempts} attempt(s): the service at {self._origin} failed every attempt "
                f"for {retried:.1f}s (retry deadline {min(self._retry_deadline, self._sync_deadline()):g}s, "
                f"counted from the first failure for every call of this sync); last failure: "
                f"{last.cause} ({last.detail})"
            )
            if not self._budget.answered:
                detail += "; it never answered: check the URL (scheme, host and port) and that it is up"
        else:
            detail = (
                f"gave up after {attempts} attempt(s) within the {self._retry_deadline:g}s retry deadline "
                f"({now - started:.1f}s); last failure at {self._origin}: {last.cause} ({last.detail})"
            )
        if extra:
            detail += f"; {extra}"
        return error_type(
            detail,
            endpoint=endpoint.key,
            status=last.status,
            code=last.code,
            request_id=last.request_id,
        )

    def _not_repeated(self, endpoint: ep.Endpoint, failure: _Failure) -> VisibilityAPIError:
        error_type = ServerError if failure.status is not None and failure.status >= 500 else TransportError
        error = error_type(
            f"{failure.cause} ({failure.detail}) at {self._origin}; not retried because a "
            f"{endpoint.method} may already have been applied and the service offers no idempotency "
            "key: check the result before repeating it",
            endpoint=endpoint.key,
            status=failure.status,
            code=failure.code,
            request_id=failure.request_id,
        )
        error.may_have_applied = True
        return error

    # ------------------------------------------------------------------------------------------
    # Rows: types and engines
    # ------------------------------------------------------------------------------------------

    def _page_rows(self, endpoint: ep.Endpoint, rows: list[Any], request_id: str | None) -> list[Row]:
        """A page's rows validated (with the page's request id) and rid of unknown engines."""
        checked = endpoint.validate_rows(rows, request_id=request_id)
        if not endpoint.engine_rows:
            return checked
        known = [row for row in checked if row.get("engine") in ep.ENGINE_SET]
        if len(known) != len(checked):
            self._drop_unknown_engines(endpoint, checked, len(checked) - len(known), request_id)
        return known

    def _drop_unknown_engines(
        self, endpoint: ep.Endpoint, rows: list[Row], dropped: int, request_id: str | None
    ) -> None:
        """Rows of an engine the spec does not list cannot land in any partition: count and warn."""
        total = self._counters.unknown_engine(endpoint.key, dropped)
        now = time.monotonic()
        last = self._engine_warned_at.get(endpoint.key)
        if last is not None and now - last < _UNKNOWN_ENGINE_WARN_EVERY_SECONDS:
            return
        self._engine_warned_at[endpoint.key] = now
        values = sorted({str(row.get("engine")) for row in rows if row.get("engine") not in ep.ENGINE_SET})
        logger.warning(
            "%s: dropped %d row(s) with an engine outside the spec's seven (%s); %d so far in this client%s",
            endpoint.key,
            dropped,
            ", ".join(sanitize(v, 40) for v in values[:5]),
            total,
            f" [X-Request-Id {request_id}]" if request_id else "",
        )

    # ------------------------------------------------------------------------------------------
    # Shapes of answers
    # ------------------------------------------------------------------------------------------

    def _object(
        self,
        endpoint: ep.Endpoint,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Row:
        payload, request_id = self._request(endpoint, path, params=params, body=body)
        return endpoint.validate(payload["data"], request_id=request_id)

    def pages(self, endpoint: ep.Endpoint, path: str, params: Mapping[str, Any]) -> Iterator[Row]:
        """Every row of a paged endpoint, validated page by page: what a typed method of a paged
        endpoint returns, for an endpoint that has none (a new table reads it here)."""

        def fetch(cursor: str | None) -> tuple[dict[str, Any], str | None]:
            query = dict(params)
            if cursor is not None:
                query["cursor"] = cursor
            return self._request(endpoint, path, params=query)

        limit = params.get("limit")
        return iterate_pages(
            endpoint.key,
            fetch,
            on_page=lambda rows, request_id: self._page_rows(endpoint, rows, request_id),
            limit=limit if isinstance(limit, int) else None,
            max_pages=self._max_pages,
        )

    def _complete(
        self,
        endpoint: ep.Endpoint,
        path: str,
        params: Mapping[str, Any],
        *,
        with_citations: bool = False,
    ) -> CompleteSet:
        payload, request_id = self._request(endpoint, path, params=params)
        rows, total_count, capped, total_citations = complete_set_fields(
            payload, endpoint.key, request_id=request_id, with_citations=with_citations
        )
        return CompleteSet(
            rows=self._page_rows(endpoint, rows, request_id),
            total_count=total_count,
            capped=capped,
            total_citations=total_citations,
        )

    # ------------------------------------------------------------------------------------------
    # Endpoints
    # ------------------------------------------------------------------------------------------

    # brands
    def list_brands(self, *, limit: int = ep.MAX_LIMIT_PAGING) -> Iterator[Row]:
        return self.pages(ep.LIST_BRANDS, ep.LIST_BRANDS.path(), {"limit": limit})

    def get_brand(self, brand_id: str) -> Row:
        return self._object(ep.GET_BRAND, ep.GET_BRAND.path(id=brand_id))

    # topics
    def list_topics(self, brand_id: str, *, limit: int = ep.MAX_LIMIT_PAGING) -> Iterator[Row]:
        return self.pages(ep.LIST_TOPICS, ep.LIST_TOPICS.path(id=brand_id), {"limit": limit})

    def create_topic(self, brand_id: str, name: str) -> Row:
        return self._object(ep.CREATE_TOPIC, ep.CREATE_TOPIC.path(id=brand_id), body={"name": name})

    def rename_topic(self, brand_id: str, topic_id: str, name: str) -> Row:
        path = ep.RENAME_TOPIC.path(id=brand_id, topicId=topic_id)
        return self._object(ep.RENAME_TOPIC, path, body={"name": name})

    # prompts, answers, mentions
    def list_prompts(self, brand_id: str, *, limit: int = ep.MAX_LIMIT_PAGING) -> Iterator[Row]:
        return self.pages(ep.LIST_PROMPTS, ep.LIST_PROMPTS.path(id=brand_id), {"limit": limit})

    def list_answers(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = ep.MAX_LIMIT_ANSWERS,
    ) -> Iterator[Row]:
        params = _params(engine=engine, limit=limit, **{"from": _iso(start), "to": _iso(end)})
        return self.pages(ep.LIST_ANSWERS, ep.LIST_ANSWERS.path(id=brand_id), params)

    def list_prompt_mentions(
        self,
        prompt_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,  # exclusive
        limit: int = ep.MAX_LIMIT_PAGING,
    ) -> Iterator[Row]:
        params = _params(engine=engine, limit=limit, **{"from": _iso(start), "to": _iso(end)})
        return self.pages(ep.LIST_PROMPT_MENTIONS, ep.LIST_PROMPT_MENTIONS.path(id=prompt_id), params)

    # generations
    def list_generations(self, brand_id: str, *, limit: int = ep.MAX_LIMIT_PAGING) -> CompleteSet:
        path = ep.LIST_GENERATIONS.path(id=brand_id)
        return self._complete(ep.LIST_GENERATIONS, path, {"limit": limit})

    # citations
    def citation_trends(
        self,
        brand_id: str,
        *,
        domain: str | None = None,
        url: str | None = None,
        engine: str | None = None,
        topic_id: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
    ) -> Row:
        params = _params(
            domain=domain,
            url=url,
            engine=engine,
            **{ep.TOPIC_FILTER_PARAM: topic_id, "from": _iso(start), "to": _iso(end)},
        )
        return self._object(ep.CITATION_TRENDS, ep.CITATION_TRENDS.path(id=brand_id), params=params)

    def citation_urls(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        topic_id: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
        limit: int = ep.MAX_LIMIT_CITATION_URLS,
    ) -> CompleteSet:
        params = _params(
            engine=engine,
            limit=limit,
            **{ep.TOPIC_FILTER_PARAM: topic_id, "from": _iso(start), "to": _iso(end)},
        )
        path = ep.CITATION_URLS.path(id=brand_id)
        return self._complete(ep.CITATION_URLS, path, params, with_citations=True)

    # competitors
    def list_tracked_competitors(self, brand_id: str) -> Iterator[Row]:
        path = ep.LIST_TRACKED_COMPETITORS.path(id=brand_id)
        return self.pages(ep.LIST_TRACKED_COMPETITORS, path, {})

    def untrack_competitor(self, brand_id: str, competitor_id: str) -> Row:
        path = ep.UNTRACK_COMPETITOR.path(id=brand_id, competitorId=competitor_id)
        return self._object(ep.UNTRACK_COMPETITOR, path)

    def competitor_trends(
        self,
        brand_id: str,
        *,
        engine: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
        granularity: str = "day",
    ) -> Row:
        params = _params(engine=engine, granularity=granularity, **{"from": _iso(start), "to": _iso(end)})
        path = ep.COMPETITOR_TRENDS.path(id=brand_id)
        return self._object(ep.COMPETITOR_TRENDS, path, params=params)

    # audits
    def create_audit(self, url: str, brand_id: str) -> Row:
        return self._object(ep.CREATE_AUDIT, ep.CREATE_AUDIT.path(), body={"url": url, "brand_id": brand_id})

    def poll_audit(self, poll_path: str) -> Row:
        """GET the ``poll`` path of ``create_audit``'s answer (only a path on this service)."""
        return self._object(ep.POLL_AUDIT, self._same_origin_path(poll_path))

    def wait_for_audit(
        self, poll_path: str, *, timeout_seconds: float = 300.0, interval_seconds: float = 2.0
    ) -> Row:
        """Poll until ``status`` is ``complete``; raise ``TimeoutError`` after ``timeout_seconds``.

        The waits between polls end at once when the sync is cancelled (``SyncCancelled``).
        """
        give_up_at = time.monotonic() + timeout_seconds
        while True:
            report = self.poll_audit(poll_path)
            if report.get("status") == "complete":
                return report
            if time.monotonic() + interval_seconds > give_up_at:
                raise TimeoutError(
                    f"audit {sanitize(report.get('id'), 64)} still "
                    f"{excerpt(report.get('status'))} after {timeout_seconds:g}s"
                )
            self._budget.sleep(interval_seconds, endpoint=ep.POLL_AUDIT.key)
            self._counters.wait("audit_poll", interval_seconds)

    def _same_origin_path(self, poll_path: str) -> str:
        """The key must never travel to another host, whatever a response says."""
        target = httpx.URL(poll_path)
        base = httpx.URL(self._base_url)
        if target.is_absolute_url:
            if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
                raise ResponseShapeError(
                    "the audit 'poll' URL points to another origin; refusing to send the key there",
                    endpoint=ep.POLL_AUDIT.key,
                )
            base_path = base.path.rstrip("/")
            path = target.path
            if base_path and path.startswith(base_path + "/"):
                path = path[len(base_path) :]
            return path + (f"?{target.query.decode()}" if target.query else "")
        if not poll_path.startswith("/") or poll_path.startswith("//"):
            raise ResponseShapeError(
                f"the audit 'poll' path must start with '/', got {excerpt(poll_path, 80)}",
                endpoint=ep.POLL_AUDIT.key,
            )
        return poll_path

    # concurrency
    def map_concurrent(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Run independent calls (mentions of many prompts) concurrently within the budget.

        Yields results in input order; after the first failure no new call starts, and the first
        error in input order is raised once the calls in flight end. The pool only supplies callers:
        how many requests are really in flight is decided by the shared budget (AIMD). Up to
        ``16 * max_concurrency`` calls are queued ahead of the oldest unfinished one, so a slow call
        (a long backoff) does not idle the other workers.
        """
        window = 16 * self._max_concurrency
        failed = threading.Event()

        def call(item: T) -> R:
            if failed.is_set():
                raise _Skipped
            try:
                return fn(item)
            except BaseException:
                failed.set()
                raise

        iterator = iter(items)
        pending: deque[Future[R]] = deque()
        pool = ThreadPoolExecutor(max_workers=self._max_concurrency, thread_name_prefix="visibility-api")
        try:
            while True:
                while not failed.is_set() and len(pending) < window:
                    item = next(iterator, _END)
                    if item is _END:
                        break
                    pending.append(pool.submit(call, item))  # type: ignore[arg-type]
                if not pending:
                    return
                try:
                    result = pending.popleft().result()
                except _Skipped:
                    continue
                except BaseException:
                    for future in pending:
                        future.cancel()
                    wait_futures(pending)
                    raise
                yield result
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)


def _error_code(body: Any) -> str | None:
    """The service's stable ``error.code``, when the body is the spec's error envelope."""
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return sanitize(code, MAX_CODE_CHARS) if isinstance(code, str) else None


def _block_reason(retry_after: float | None, code: str | None) -> str:
    """What an announcement of a 429's wait names."""
    if retry_after is not None:
        return "Retry-After"
    return f"backoff after 429 {code or 'rate_limited'}, no Retry-After"


def _not_json_detail(answer: _Answer) -> str:
    """What a success that is not a JSON object was: its content type and its first characters."""
    media = sanitize(answer.content_type or "no content type", 60)
    if isinstance(answer.body, dict) or answer.body is None:
        start = answer.raw_start.decode("utf-8", "replace").strip()
        shown = f"starting {excerpt(start, 60)}" if start else "empty"
    else:
        shown = f"a JSON {type(answer.body).__name__}"
    return f"the answer is not a JSON object ({media}, {shown})"


def _ids(answer: _Answer) -> dict[str, Any]:
    return {"status": answer.status, "request_id": answer.request_id}
