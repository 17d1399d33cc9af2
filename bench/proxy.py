"""A rewriting reverse proxy in front of the sandbox, for the reliability suite.

It forwards every request to the sandbox and rewrites the answer per :class:`Rewrite` (200 with
HTML, JSON cut short, wrong types, NUL, megabyte strings, endless cursors, huge integers, the key
echoed back), so the real client, CLI and warehouse meet what a broken service or a CDN sends. A
rewrite picks the ``nth`` distinct target of an endpoint and every retry of it (a persistent fault)
and records what it did in :attr:`Rewrite.events`. :func:`run_proxy` serves it on loopback.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx

from sandbox.testing import serve_in_thread

#: Endpoint templates of the spec as path patterns (the proxy sees concrete paths).
MENTIONS = r"^/v1/prompts/[^/]+/mentions$"
ANSWERS = r"^/v1/brands/[^/]+/answers$"
PROMPTS = r"^/v1/brands/[^/]+/prompts$"
BRANDS = r"^/v1/brands$"

#: Headers that belong to one hop, or that the proxy recomputes for the body it sends.
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host", "te"}
    | {"trailer", "upgrade", "proxy-connection"}
)
#: A cursor the proxy invents; a request that carries one never reaches the sandbox with it.
ENDLESS_PREFIX = "endless-"


@dataclass
class ProxyRequest:
    """One request as the proxy received it (the query as ordered pairs, headers lower-cased)."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes

    @property
    def key(self) -> str:
        """The bearer key the client sent ("" without one): echoed back by the key rewrites."""
        auth = self.headers.get("authorization", "")
        return auth[7:].strip() if auth[:7].lower() == "bearer " else ""

    @property
    def target(self) -> str:
        """Path and query: what identifies a request and its retries."""
        return self.path + ("?" + urlencode(self.query) if self.query else "")

    def param(self, name: str) -> str | None:
        return next((v for k, v in self.query if k == name), None)


@dataclass
class ProxyResponse:
    """What the proxy sends back: status, headers (without Content-Length), body bytes."""

    status: int
    headers: dict[str, str]
    body: bytes

    def with_json(self, payload: Any, *, ensure_ascii: bool = True) -> ProxyResponse:
        body = json.dumps(payload, ensure_ascii=ensure_ascii).encode("utf-8")
        return ProxyResponse(self.status, {**self.headers, "content-type": "application/json"}, body)


class Rewrite:
    """Forwards unchanged; subclasses override :meth:`forward` and/or :meth:`respond` (run on the
    proxy's event loop; :attr:`events` and :attr:`requests` are read under :attr:`lock`)."""

    name = "passthrough"
    #: the endpoint and field a correct error message names (None: no particular one)
    endpoint_marker: str | None = None
    field_marker: str | None = None

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self.requests = 0

    def forward(self, request: ProxyRequest) -> ProxyRequest | ProxyResponse:
        """The request to send upstream, or an answer given without asking upstream."""
        return request

    def respond(self, request: ProxyRequest, response: ProxyResponse) -> ProxyResponse:
        """The answer the client gets, from the upstream's."""
        return response

    def record(self, **event: Any) -> None:
        with self.lock:
            self.events.append(event)

    @property
    def applied(self) -> int:
        """How many answers this rewrite changed."""
        with self.lock:
            return len(self.events)


class TargetPicker:
    """The ``nth`` distinct target (path + query) of one endpoint, and every repeat of it (retries)."""

    def __init__(self, pattern: str, nth: int = 2) -> None:
        self.pattern = re.compile(pattern)
        self.nth = nth
        self._seen: dict[str, int] = {}

    def picks(self, request: ProxyRequest) -> bool:
        if not self.pattern.search(request.path):
            return False
        target = request.target
        if target not in self._seen:
            self._seen[target] = len(self._seen) + 1
        return self._seen[target] == self.nth


def _is_json_page(response: ProxyResponse) -> bool:
    return response.status == 200 and response.headers.get("content-type", "").startswith("application/json")


class RowRewrite(Rewrite):
    """Changes one field of the middle row of the picked page to ``mutate(value)``; ``marker_bytes``
    (non-UTF-8 bodies) then replace the UTF-8 bytes of ``marker`` in the encoded body."""

    def __init__(
        self,
        name: str,
        pattern: str,
        field_name: str,
        mutate: Callable[[Any], Any],
        *,
        check_field: bool = True,
        marker: str | None = None,
        marker_bytes: bytes | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.picker = TargetPicker(pattern)
        self.field = field_name
        self.mutate = mutate
        self.endpoint_marker = _marker(pattern)
        self.field_marker = field_name if check_field else None
        self.marker = marker
        self.marker_bytes = marker_bytes

    def respond(self, request: ProxyRequest, response: ProxyResponse) -> ProxyResponse:
        if not self.picker.picks(request) or not _is_json_page(response):
            return response
        payload = json.loads(response.body)
        rows = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(rows, list) or not rows:
            return response
        row = rows[len(rows) // 2]
        served = self.mutate(row.get(self.field))
        row[self.field] = served
        out = response.with_json(payload, ensure_ascii=self.marker is None)
        if self.marker is not None and self.marker_bytes is not None:
            out.body = out.body.replace(self.marker.encode("utf-8"), self.marker_bytes)
        self.record(target=request.target, key=row.get("id"), field=self.field, served=served)
        return out


class BodyRewrite(Rewrite):
    """Replaces the whole body of the picked target's 200 answers (truncated JSON, HTML)."""

    def __init__(
        self, name: str, pattern: str, make: Callable[[ProxyRequest, bytes], tuple[bytes, str]]
    ) -> None:
        super().__init__()
        self.name = name
        self.picker = TargetPicker(pattern)
        self.make = make
        self.endpoint_marker = _marker(pattern)

    def respond(self, request: ProxyRequest, response: ProxyResponse) -> ProxyResponse:
        if not self.picker.picks(request) or response.status != 200:
            return response
        body, content_type = self.make(request, response.body)
        self.record(target=request.target, bytes=len(body))
        return ProxyResponse(200, {**response.headers, "content-type": content_type}, body)


class EndlessCursor(Rewrite):
    """Every page of the picked target says ``has_more: true`` with a new ``next_cursor`` (sent
    upstream without it: the first page again). ``fresh_rows``: the rows get new ids; ``invented``:
    new answers behind them too, so only the sync's request budget can stop the walk."""

    def __init__(self, pattern: str, *, fresh_rows: bool = False, invented: bool = False) -> None:
        super().__init__()
        fresh_rows = fresh_rows or invented
        kind = "invented" if invented else "fresh" if fresh_rows else ""
        self.name = f"endless_cursor_{kind}" if kind else "endless_cursor"
        self.picker = TargetPicker(pattern)
        self.fresh_rows = fresh_rows
        self.invented = invented
        self.endpoint_marker = _marker(pattern)
        self._pages = itertools.count(1)

    def forward(self, request: ProxyRequest) -> ProxyRequest | ProxyResponse:
        cursor = request.param("cursor")
        if cursor is None or not cursor.startswith(ENDLESS_PREFIX):
            return request
        query = [(k, v) for k, v in request.query if k != "cursor"]
        return ProxyRequest(request.method, request.path, query, request.headers, request.body)

    def respond(self, request: ProxyRequest, response: ProxyResponse) -> ProxyResponse:
        endless = (request.param("cursor") or "").startswith(ENDLESS_PREFIX)
        if not (endless or self.picker.picks(request)) or not _is_json_page(response):
            return response
        payload = json.loads(response.body)
        if not isinstance(payload, dict):
            return response
        page = next(self._pages)
        self.record(target=request.target, page=page)
        return response.with_json(endless_page(payload, page, self.fresh_rows, self.invented))


def endless_page(payload: dict[str, Any], page: int, fresh_rows: bool, invented: bool) -> dict[str, Any]:
    """The page ``payload`` made endless: ``has_more`` with a new cursor; ``fresh_rows``: its rows get
    new ids; ``invented``: new answers (``response_id``, ``position``) behind them too."""
    rows = payload.get("data") if fresh_rows or invented else None
    for row in rows if isinstance(rows, list) else ():
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            row["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{row['id']}/{page}"))
            if invented:
                row["response_id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{row['id']}/answer"))
                row["position"] = page
    payload.update(has_more=True, next_cursor=f"{ENDLESS_PREFIX}{page}-{uuid.uuid4().hex}")
    return payload


def _secret_part(key: str) -> str:
    return key.split("_", 1)[-1]


#: How a service may quote a key: what the client must scrub in every form.
ECHO_FORMS: dict[str, Callable[[str], str]] = {
    "key": lambda key: key,
    "tail": _secret_part,
    "tail_upper": lambda key: _secret_part(key).upper(),
    "url_escaped": lambda key: "".join(f"%{ord(ch):02X}" for ch in _secret_part(key)),
    "json_escaped": lambda key: "".join(f"\\u{ord(ch):04x}" for ch in _secret_part(key)),
}


class EchoKey(Rewrite):
    """Echoes the caller's key (in the ``ECHO_FORMS`` ``form``) in ``X-Request-Id`` and error bodies.

    ``fail_first``: the first request to every target answers 503 quoting the key (``Retry-After:
    0``: the run still completes). ``persistent`` (pattern, nth, status, code): the picked target
    always answers ``status`` quoting the key (``html``: as an HTML page), so the run fails.
    """

    def __init__(
        self,
        name: str,
        *,
        fail_first: bool = False,
        persistent: tuple[str, int, int, str] | None = None,
        html: bool = False,
        form: str = "key",
    ) -> None:
        super().__init__()
        self.name = name
        self.form = form
        self.fail_first = fail_first
        self.picker = TargetPicker(persistent[0], persistent[1]) if persistent else None
        self.status = persistent[2] if persistent else 200
        self.code = persistent[3] if persistent else ""
        self.html = html
        self.endpoint_marker = _marker(persistent[0]) if persistent else None
        self._seen: set[str] = set()

    def respond(self, request: ProxyRequest, response: ProxyResponse) -> ProxyResponse:
        key = ECHO_FORMS[self.form](request.key)
        headers = {**response.headers, "x-request-id": key}
        if self.picker is not None and self.picker.picks(request):
            self.record(target=request.target, kind="persistent", status=self.status)
            return self._error(self.status, self.code, key, headers)
        if self.fail_first and request.path.startswith("/v1/") and request.target not in self._seen:
            self._seen.add(request.target)
            self.record(target=request.target, kind="first")
            return self._error(503, "service_unavailable", key, {**headers, "retry-after": "0"})
        self._seen.add(request.target)
        return ProxyResponse(response.status, headers, response.body)

    def _error(self, status: int, code: str, key: str, headers: dict[str, str]) -> ProxyResponse:
        message = f"request by key {key} failed (Authorization: Bearer {key})"
        if self.html:
            body = f"<html><body><h1>Error</h1><p>{message}</p><pre>{key}</pre></body></html>".encode()
            return ProxyResponse(status, {**headers, "content-type": "text/html"}, body)
        payload = {"error": {"code": code, "message": message, "key": key}}
        return ProxyResponse(
            status, {**headers, "content-type": "application/json"}, json.dumps(payload).encode()
        )


def _marker(pattern: str) -> str | None:
    """The word an error message about this endpoint names (``mentions``, ``answers``, ...)."""
    return next((word for word in ("mentions", "answers", "prompts", "brands") if word in pattern), None)


# ---------------------------------------------------------------------------------------------
# the ASGI app and its server


class ProxyApp:
    """The ASGI app: buffer the request, forward it, rewrite the answer, send it whole."""

    def __init__(self, upstream: str, rewrite: Rewrite) -> None:
        self.upstream = upstream.rstrip("/")
        self.rewrite = rewrite
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        request = ProxyRequest(scope["method"], scope["path"], query, headers, body)
        with self.rewrite.lock:
            self.rewrite.requests += 1
        routed = self.rewrite.forward(request)
        if isinstance(routed, ProxyResponse):
            response = routed
        else:
            response = await self._forward(routed)
        response = self.rewrite.respond(request, response)
        out_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
        out_headers.append((b"content-length", str(len(response.body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": out_headers})
        await send({"type": "http.response.body", "body": response.body})

    async def _forward(self, request: ProxyRequest) -> ProxyResponse:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=60.0, limits=httpx.Limits(max_connections=64))
        headers = {k: v for k, v in request.headers.items() if k not in _HOP_HEADERS}
        try:
            upstream = await self._client.request(
                request.method,
                self.upstream + request.path,
                params=request.query,
                headers=headers,
                content=request.body or None,
            )
        except httpx.HTTPError:
            return ProxyResponse(502, {"content-type": "text/plain"}, b"bad gateway (proxy)")
        kept = {k.lower(): v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS}
        return ProxyResponse(upstream.status_code, kept, upstream.content)


@dataclass
class ProxyHandle:
    """A running proxy: its URL and the rewrite (for its counters and events)."""

    url: str
    rewrite: Rewrite


@contextlib.contextmanager
def run_proxy(upstream: str, rewrite: Rewrite | None = None) -> Iterator[ProxyHandle]:
    """Serve the proxy on a free loopback port until the block exits (then stop and join it)."""
    rewrite = rewrite or Rewrite()
    with serve_in_thread(ProxyApp(upstream, rewrite), "proxy") as url:
        yield ProxyHandle(url, rewrite)


# ---------------------------------------------------------------------------------------------
# the catalogue of bad answers the suite uses

#: 2**70: no BIGINT (or int64 Arrow column) holds it; a double holds it only approximately.
HUGE = 2**70
#: the size of the megabyte string (2 MB of text in one field)
BIG_STRING_CHARS = 2 * 1024 * 1024
_BAD_UTF8_MARKER = "\ue000not-utf8\ue000"
_BAD_UTF8_BYTES = b"Caf\xe9 \xff\xfe\xc3("
#: a maintenance page served with 200, as captive portals and misrouted CDNs do
_HTML_PAGE = (
    b"<!doctype html><html><head><title>Maintenance</title></head>"
    b"<body><h1>We'll be right back</h1><p>The service is being upgraded.</p></body></html>"
)


#: kind -> (endpoint, field, the served value from the row's, whether a clear error names the field)
ROW_REWRITES: dict[str, tuple[str, str, Callable[[Any], Any], bool]] = {
    "non_utf8": (MENTIONS, "brand_name", lambda value: _BAD_UTF8_MARKER, False),
    "wrong_type_position": (MENTIONS, "position", lambda value: "first", True),
    "wrong_type_mention_count": (ANSWERS, "mention_count", lambda value: "3", True),
    "nul_text": (MENTIONS, "brand_name", lambda value: f"{value}\x00NUL", False),
    "nul_text_snapshot": (PROMPTS, "text", lambda value: f"{value}\x00NUL", False),
    "big_string": (MENTIONS, "brand_name", lambda value: "x" * BIG_STRING_CHARS, False),
    "huge_number": (ANSWERS, "mention_count", lambda value: HUGE, True),
    "huge_number_double": (MENTIONS, "position", lambda value: HUGE, True),
}


def bad_response(kind: str) -> Rewrite:
    """The rewrite of one bad-response scenario of the suite, by name (see :data:`BAD_KINDS`)."""
    if kind == "truncated_json":  # half the JSON, with a correct Content-Length for what is sent
        return BodyRewrite(kind, MENTIONS, lambda request, body: (body[: len(body) // 2], "application/json"))
    if kind == "html_200":
        return BodyRewrite(kind, ANSWERS, lambda request, body: (_HTML_PAGE, "text/html; charset=utf-8"))
    if kind.startswith("endless_cursor") and kind in BAD_KINDS:
        return EndlessCursor(MENTIONS, fresh_rows=kind.endswith("fresh"), invented=kind.endswith("invented"))
    if kind in ROW_REWRITES:
        pattern, field_name, mutate, check_field = ROW_REWRITES[kind]
        marker = kind == "non_utf8"
        return RowRewrite(
            kind,
            pattern,
            field_name,
            mutate,
            check_field=check_field,
            marker=_BAD_UTF8_MARKER if marker else None,
            marker_bytes=_BAD_UTF8_BYTES if marker else None,
        )
    raise ValueError(f"unknown bad response {kind!r}; use one of {', '.join(BAD_KINDS)}")


#: Every bad-response kind; ``endless_cursor_invented`` is opt-in (only the sync's request budget
#: stops it: some minutes).
BAD_KINDS: tuple[str, ...] = ("truncated_json", "html_200", *ROW_REWRITES, "endless_cursor")
BAD_KINDS += ("endless_cursor_fresh", "endless_cursor_invented")
DEFAULT_BAD_KINDS: tuple[str, ...] = BAD_KINDS[:-1]
