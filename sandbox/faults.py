"""Fault profiles of the sandbox: the misbehaviour a real service shows, on demand and reproducibly.

A client that only ever met a polite server is untested. ``flaky`` injects the occasional 429, 5xx,
stall and reset; ``hostile`` does so often and adds the forms clients get wrong (a ``Retry-After`` of
0, negative or as an HTTP date, HTML error pages, bodies cut mid-stream, ``quota_exceeded``).

Seeding rule: the fate of a request is a pure function of ``(seed, method, path + query, n)``, where
``n`` counts earlier requests with the same method, path and query since the sandbox started (or
since the faults config last changed). The same seed and the same requests therefore give the same
faults whatever the interleaving of concurrent requests, and a retry of a faulted request (``n + 1``)
draws afresh, so retries eventually get through.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from email.utils import format_datetime
from typing import Any, Literal

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandbox.limits import error_response_messages

Profile = Literal["none", "flaky", "hostile"]
PROFILES: tuple[str, ...] = ("none", "flaky", "hostile")

#: 429 codes a well-behaved client retries; ``quota_exceeded`` is drawn separately (never retried).
RETRYABLE_429_CODES: tuple[str, ...] = ("rate_limited", "endpoint_rate_limited", "concurrency_limited")
#: Forms of ``Retry-After`` on injected 429s (absent, delta-seconds, 0, negative, HTTP date).
RETRY_AFTER_FORMS: tuple[str, ...] = ("absent", "seconds", "zero", "negative", "http_date")

_MAX_TRACKED_TARGETS = 200_000


@dataclass(frozen=True)
class FaultRates:
    """Per-request probabilities of each fault, and how bad the slow ones are.

    ``throttle``, ``quota``, ``server_error``, ``drop`` and ``truncate`` replace the response and are
    mutually exclusive (their sum must stay <= 1). ``latency``, ``slow_body``, ``extra_fields`` and
    ``restate`` apply independently to requests that are answered normally.
    """

    throttle: float = 0.0  # 429 with a retryable code
    quota: float = 0.0  # 429 quota_exceeded (long Retry-After)
    server_error: float = 0.0  # 500/502/503, mostly with non-JSON bodies
    drop: float = 0.0  # connection closed before any response (request was processed)
    truncate: float = 0.0  # headers and part of the body, then the connection closes
    latency: float = 0.0  # extra delay before the response
    latency_max_ms: float = 0.0
    slow_body: float = 0.0  # body sent in chunks with pauses
    slow_body_pause_ms: float = 0.0  # longest pause between chunks
    extra_fields: float = 0.0  # unknown fields added to rows of `data` and to the envelope
    restate: float = 0.0  # recent days restated (the app's hook) before the request is served
    retry_after_max_s: int = 2  # largest Retry-After on injected 429/503 (keeps tests fast)

    def validate(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"fault setting {f.name} must be a number, got {value!r}")
            if value < 0:
                raise ValueError(f"fault setting {f.name} must be >= 0")
        exclusive = self.throttle + self.quota + self.server_error + self.drop + self.truncate
        if exclusive > 1.0:
            raise ValueError("throttle + quota + server_error + drop + truncate must be <= 1")
        for name in ("latency", "slow_body", "extra_fields", "restate"):
            if getattr(self, name) > 1.0:
                raise ValueError(f"fault probability {name} must be <= 1")


PROFILE_RATES: dict[str, FaultRates] = {
    "none": FaultRates(),
    "flaky": FaultRates(
        throttle=0.03,
        server_error=0.03,
        drop=0.005,
        truncate=0.005,
        latency=0.05,
        latency_max_ms=200,
        slow_body=0.02,
        slow_body_pause_ms=50,
        extra_fields=0.2,
        restate=0.01,
    ),
    "hostile": FaultRates(
        throttle=0.10,
        quota=0.005,
        server_error=0.08,
        drop=0.02,
        truncate=0.02,
        latency=0.15,
        latency_max_ms=500,
        slow_body=0.08,
        slow_body_pause_ms=100,
        extra_fields=0.5,
        restate=0.05,
    ),
}


@dataclass
class FaultsConfig:
    """Which profile runs, with which seed; ``latency_ms`` is added to every ``/v1`` request.

    ``overrides`` replaces single rates of the profile, e.g. ``{"quota": 0.0}`` for a hostile run
    that a correct client is expected to finish.
    """

    profile: str = "none"
    seed: int = 0
    latency_ms: float = 0.0
    overrides: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.overrides = dict(self.overrides)
        self._version = 0  # bumped by update(): even an update to equal values replays the seed
        self.validate()

    def validate(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown fault profile {self.profile!r}; use one of {', '.join(PROFILES)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if (
            isinstance(self.latency_ms, bool)
            or not isinstance(self.latency_ms, int | float)
            or self.latency_ms < 0
        ):
            raise ValueError("latency_ms must be a number >= 0")
        if not isinstance(self.overrides, dict):
            raise ValueError("overrides must be an object of fault rates")
        names = {f.name for f in fields(FaultRates)}
        unknown = sorted(set(self.overrides) - names)
        if unknown:
            raise ValueError(f"unknown fault rate(s): {', '.join(unknown)}")
        self.rates().validate()

    def rates(self) -> FaultRates:
        return replace(PROFILE_RATES[self.profile], **self.overrides)

    def update(self, **changes: Any) -> FaultsConfig:
        """Change fields in place, all or nothing; request counters restart so seeds replay."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"unknown faults setting(s): {', '.join(unknown)}")
        before = self.to_dict()
        try:
            for name, value in changes.items():
                setattr(self, name, dict(value) if name == "overrides" else value)
            self.validate()
        except (ValueError, TypeError) as exc:
            for name, value in before.items():
                setattr(self, name, value)
            raise ValueError(str(exc)) from None
        self._version += 1
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: (dict(v) if isinstance(v := getattr(self, f.name), dict) else v) for f in fields(self)
        }

    def fingerprint(self) -> tuple[Any, ...]:
        return (
            self._version,
            self.profile,
            self.seed,
            self.latency_ms,
            tuple(sorted(self.overrides.items())),
        )


@dataclass(frozen=True)
class FaultPlan:
    """The fate of one request. ``kind`` is ``None`` when the app answers (possibly slowed or altered)."""

    kind: str | None = None  # throttle | quota | server_error | drop | truncate
    status: int = 200
    code: str | None = None
    retry_after_form: str = "absent"
    retry_after_s: int = 0
    body_style: str = "json"  # json | html | text | empty (server errors)
    latency_s: float = 0.0
    slow_chunks: int = 0
    slow_pause_s: float = 0.0
    chunked: bool = False  # slow body without Content-Length
    extra_fields: bool = False
    restate: bool = False
    salt: int = 0  # drives the values of extra fields

    @property
    def needs_buffering(self) -> bool:
        return self.kind in ("drop", "truncate") or self.slow_chunks > 0 or self.extra_fields


def decide(rates: FaultRates, seed: int, method: str, target: str, occurrence: int) -> FaultPlan:
    """The pure seeding rule: the same arguments always give the same plan."""
    digest = hashlib.sha256(f"{seed}\x00{method}\x00{target}\x00{occurrence}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:16], "big"))
    roll = rng.random()
    plan: dict[str, Any] = {"salt": rng.getrandbits(32)}
    edge = 0.0
    for kind in ("throttle", "quota", "server_error", "drop", "truncate"):
        edge += getattr(rates, kind)
        if roll < edge:
            plan["kind"] = kind
            break
    kind = plan.get("kind")
    if kind == "throttle":
        plan.update(status=429, code=rng.choice(RETRYABLE_429_CODES))
        plan.update(retry_after_form=rng.choice(RETRY_AFTER_FORMS))
        plan["retry_after_s"] = rng.randint(1, max(1, rates.retry_after_max_s))
    elif kind == "quota":
        plan.update(status=429, code="quota_exceeded", retry_after_form="seconds", retry_after_s=86_400)
    elif kind == "server_error":
        status = rng.choice((500, 502, 503))
        style = {500: ("json", "html", "text"), 502: ("html", "empty"), 503: ("html", "text", "empty")}
        plan.update(status=status, body_style=rng.choice(style[status]))
        if status == 500 and plan["body_style"] == "json":
            plan["code"] = "internal_error"
        if status == 503 and rng.random() < 0.5:
            plan.update(
                retry_after_form="seconds", retry_after_s=rng.randint(1, max(1, rates.retry_after_max_s))
            )
    if rng.random() < rates.latency:
        plan["latency_s"] = rng.uniform(0.0, rates.latency_max_ms) / 1000.0
    if kind is None:
        if rng.random() < rates.slow_body:
            plan.update(
                slow_chunks=rng.randint(3, 8),
                slow_pause_s=rng.uniform(0.0, rates.slow_body_pause_ms) / 1000.0,
                chunked=rng.random() < 0.5,
            )
        plan["extra_fields"] = rng.random() < rates.extra_fields
        plan["restate"] = rng.random() < rates.restate
    return FaultPlan(**plan)


def retry_after_value(plan: FaultPlan, now: dt.datetime | None = None) -> bytes | None:
    """The ``Retry-After`` header of a plan, in the plan's form (``None``: no header)."""
    form = plan.retry_after_form
    if form == "seconds":
        return str(plan.retry_after_s).encode()
    if form == "zero":
        return b"0"
    if form == "negative":
        return b"-1"
    if form == "http_date":
        moment = (now or dt.datetime.now(dt.UTC)) + dt.timedelta(seconds=plan.retry_after_s)
        return format_datetime(moment.replace(microsecond=0), usegmt=True).encode()
    return None


_HTML_PAGES = {
    500: b"<html><head><title>500 Internal Server Error</title></head><body><h1>Internal Server Error</h1>"
    b"<p>The server encountered an unexpected condition.</p></body></html>",
    502: b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
    503: b"<!DOCTYPE html><html><head><title>Service Unavailable</title></head><body><h1>503 Service "
    b"Unavailable</h1><p>The service is temporarily overloaded. Please try again later.</p></body></html>",
}
_TEXT_BODIES = {
    500: b"Internal Server Error",
    502: b"Bad Gateway",
    503: b"upstream connect error or disconnect/reset before headers. reset reason: overflow",
}


def error_messages(plan: FaultPlan) -> tuple[Message, Message]:
    """The two ASGI messages of an injected 429 or 5xx."""
    extra: list[tuple[bytes, bytes]] = []
    retry_after = retry_after_value(plan)
    if retry_after is not None:
        extra.append((b"retry-after", retry_after))
    if plan.code is not None:
        messages = {
            "rate_limited": "Too many requests.",
            "endpoint_rate_limited": "Too many requests to this endpoint.",
            "concurrency_limited": "Too many requests in flight.",
            "quota_exceeded": "The quota of this key is used up.",
            "internal_error": "An internal error occurred.",
        }
        return error_response_messages(plan.status, plan.code, messages[plan.code], extra)
    if plan.body_style == "html":
        body, ctype = _HTML_PAGES[plan.status], b"text/html; charset=utf-8"
    elif plan.body_style == "text":
        body, ctype = _TEXT_BODIES[plan.status], b"text/plain; charset=utf-8"
    else:
        body, ctype = b"", b"text/plain; charset=utf-8"
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *extra]
    return (
        {"type": "http.response.start", "status": plan.status, "headers": headers},
        {"type": "http.response.body", "body": body, "more_body": False},
    )


def add_extra_fields(body: bytes, salt: int) -> bytes | None:
    """Add fields the spec does not name to every row of ``data`` and to the envelope.

    Returns ``None`` when the body is not a JSON success envelope (left untouched).
    """
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if not isinstance(payload, dict) or "data" not in payload:
        return None
    rng = random.Random(salt)
    row_extras = {
        "x_sandbox_extra": rng.randint(0, 1_000_000),
        "confidence": round(rng.random(), 4),
        "model_family": rng.choice(("frontier", "search", None)),
        "labels": {"experimental": True},
    }
    data = payload["data"]
    if isinstance(data, list):
        for row in data:
            if isinstance(row, dict):
                for name, value in row_extras.items():
                    row.setdefault(name, value)
    elif isinstance(data, dict):
        for name, value in row_extras.items():
            data.setdefault(name, value)
    payload.setdefault("request_cost", rng.randint(1, 5))
    return json.dumps(payload, separators=(",", ":")).encode()


def _find_transport(send: Send) -> Any:
    """The server's transport behind ``send``, to reset a connection without any response.

    ASGI has no way to say "close without answering"; uvicorn's ``send`` is a method of an object
    holding the transport, possibly wrapped in closures by outer middleware. Best effort, bounded.
    """
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(send, 0)]
    while todo:
        obj, depth = todo.pop()
        if id(obj) in seen or depth > 12:
            continue
        seen.add(id(obj))
        owner = getattr(obj, "__self__", None)
        transport = getattr(owner, "transport", None)
        if callable(getattr(transport, "close", None)) and callable(getattr(transport, "is_closing", None)):
            return transport
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if callable(value):
                todo.append((value, depth + 1))
        wrapped = getattr(obj, "__wrapped__", None)
        if wrapped is not None:
            todo.append((wrapped, depth + 1))
        if owner is not None:
            for name in ("send", "_send", "app"):
                attr = getattr(owner, name, None)
                if callable(attr) and attr is not obj:
                    todo.append((attr, depth + 1))
    return None


async def _close_connection(send: Send) -> bool:
    transport = _find_transport(send)
    if transport is None:
        return False
    transport.close()
    for _ in range(3):  # let the server see the closed connection before the app returns
        await asyncio.sleep(0)
    return True


async def _buffer(app: ASGIApp, scope: Scope, receive: Receive) -> tuple[Message, bytes, list[Message]]:
    """Run the app to completion, keeping its response start, body and any trailing messages."""
    start: Message | None = None
    chunks: list[bytes] = []
    other: list[Message] = []

    async def capture(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
        else:
            other.append(message)

    await app(scope, receive, capture)
    if start is None:
        raise RuntimeError("the app returned without starting a response")
    return start, b"".join(chunks), other


def _with_length(headers: list[tuple[bytes, bytes]], length: int | None) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    if length is not None:
        kept.append((b"content-length", str(length).encode()))
    return kept


class FaultsMiddleware:
    """Injects the faults of the configured profile into ``/v1``; never touches anything else.

    ``on_restate`` is the app's hook that restates recent days; by default the hook the core puts in
    ``scope["sandbox"]["restate"]`` (see ``sandbox/routes.py``), and without either the restate fault
    is skipped. Read the config on every request, so ``config.update(...)`` (``POST /_sandbox/config``)
    applies at once and restarts the request counters.
    """

    def __init__(
        self,
        app: ASGIApp,
        config: FaultsConfig | Callable[[], FaultsConfig],
        on_restate: Callable[[], object] | None = None,
    ) -> None:
        self.app = app
        self._config_source = config if callable(config) else (lambda: config)
        self.on_restate = on_restate
        self._occurrences: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._fingerprint: tuple[Any, ...] | None = None

    @property
    def config(self) -> FaultsConfig:
        return self._config_source()

    def update(self, **changes: Any) -> FaultsConfig:
        return self.config.update(**changes)

    def reset(self) -> None:
        """Restart the request counters: the next requests replay the seed's sequence from the start."""
        self._occurrences.clear()

    def _next_occurrence(self, method: str, target: str) -> int:
        key = (method, target)
        n = self._occurrences.pop(key, 0)
        self._occurrences[key] = n + 1
        if len(self._occurrences) > _MAX_TRACKED_TARGETS:
            self._occurrences.popitem(last=False)
        return n

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/v1" or path.startswith("/v1/")):
            await self.app(scope, receive, send)
            return
        config = self.config
        fingerprint = config.fingerprint()
        if fingerprint != self._fingerprint:
            self._fingerprint = fingerprint
            self.reset()
        if config.latency_ms > 0:
            await asyncio.sleep(config.latency_ms / 1000.0)
        if config.profile == "none" and not config.overrides:
            await self.app(scope, receive, send)
            return

        query = scope.get("query_string", b"").decode("latin-1")
        target = f"{path}?{query}" if query else path
        occurrence = self._next_occurrence(scope["method"], target)
        plan = decide(config.rates(), config.seed, scope["method"], target, occurrence)
        await self._serve(plan, scope, receive, send)

    async def _serve(self, plan: FaultPlan, scope: Scope, receive: Receive, send: Send) -> None:
        if plan.latency_s > 0:
            await asyncio.sleep(plan.latency_s)
        if plan.kind in ("throttle", "quota", "server_error"):
            start, body = error_messages(plan)
            await send(start)
            await send(body)
            return
        restate = self.on_restate or (scope.get("sandbox") or {}).get("restate")
        if plan.restate and restate is not None:
            restate()
        if not plan.needs_buffering:
            await self.app(scope, receive, send)
            return

        start, body, trailing = await _buffer(self.app, scope, receive)
        headers = list(start.get("headers", ()))
        if plan.kind == "drop":
            if await _close_connection(send):
                return
            # No transport to reset: answer the headers only, then end the connection.
            plan = replace(plan, kind="truncate")
            body = body or b"{}"
        if plan.kind == "truncate":
            await send({**start, "headers": _with_length(headers, len(body))})
            await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
            await _close_connection(send)
            return
        if plan.extra_fields and 200 <= start["status"] < 300:
            rewritten = add_extra_fields(body, plan.salt)
            if rewritten is not None:
                body = rewritten
        if plan.slow_chunks > 0:
            await send({**start, "headers": _with_length(headers, None if plan.chunked else len(body))})
            size = max(1, -(-len(body) // plan.slow_chunks))
            for offset in range(0, len(body), size):
                await send(
                    {"type": "http.response.body", "body": body[offset : offset + size], "more_body": True}
                )
                await asyncio.sleep(plan.slow_pause_s)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await send({**start, "headers": _with_length(headers, len(body))})
            await send({"type": "http.response.body", "body": body, "more_body": False})
        for message in trailing:
            await send(message)
