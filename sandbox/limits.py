"""Rate limits of the sandbox: the four 429s of the spec, and the headers a client paces itself by.

The spec names four limits (``rate_limited``, ``endpoint_rate_limited``, ``concurrency_limited``,
``quota_exceeded``) but not their values or headers; the values here are demo defaults and the header
names are DESIGN.md's assumptions. Everything is configurable at runtime, because tests and
benchmarks tighten or loosen the limits of a running sandbox through ``POST /_sandbox/config``.

The middleware is pure ASGI (no ``BaseHTTPMiddleware``) so that streaming responses pass through
untouched and the per-request cost stays at a few microseconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from types import UnionType
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandbox.routes import SPENDING_ENDPOINTS

#: Spending endpoints by default, as ``"METHOD /path/{param}"``: the core's list in ``routes.py``
#: (an audit crawls and scores a page). Reads (generation lists, citations, trends) are served from
#: precomputed data and spend nothing.
DEFAULT_SPENDING_ENDPOINTS: tuple[str, ...] = tuple(sorted(SPENDING_ENDPOINTS))

_MAX_TRACKED_KEYS = 10_000  # bounds memory when a client (or a fuzzer) sends many distinct keys


@dataclass
class LimitsConfig:
    """The limits of every caller, identified by the value of its bearer key.

    ``rate_per_second``/``burst`` define a token bucket per key; ``endpoint_limit`` requests per
    ``window_seconds`` (a fixed window that opens with the first request) per key and spending
    endpoint; ``max_concurrent`` requests in flight per key; ``quota`` requests per key per
    ``quota_period_seconds`` (``None``: no quota, as the spec's "monthly request ceiling: none").
    """

    rate_per_second: float = 50.0
    burst: int = 50
    endpoint_limit: int = 10
    window_seconds: float = 60.0
    max_concurrent: int = 8
    quota: int | None = None
    quota_period_seconds: float = 30 * 86_400.0
    spending_endpoints: tuple[str, ...] = field(default=DEFAULT_SPENDING_ENDPOINTS)

    def __post_init__(self) -> None:
        self.spending_endpoints = tuple(self.spending_endpoints)
        self._version = 0  # bumped by update(): even an update to equal values restarts counters
        self.validate()

    def validate(self) -> None:
        """Reject values that would make the limiter divide by zero or never admit anything."""
        for name in ("rate_per_second", "window_seconds", "quota_period_seconds"):
            _require_number(name, getattr(self, name), int | float)
        for name in ("burst", "endpoint_limit", "max_concurrent"):
            _require_number(name, getattr(self, name), int)
        if self.quota is not None:
            _require_number("quota", self.quota, int)
        if not self.rate_per_second > 0:
            raise ValueError("rate_per_second must be > 0")
        if self.burst < 1:
            raise ValueError("burst must be >= 1")
        if self.endpoint_limit < 1:
            raise ValueError("endpoint_limit must be >= 1")
        if not self.window_seconds > 0:
            raise ValueError("window_seconds must be > 0")
        if self.max_concurrent < 1:
            raise ValueError("max_concurrent must be >= 1")
        if self.quota is not None and self.quota < 0:
            raise ValueError("quota must be >= 0 or None")
        if not self.quota_period_seconds > 0:
            raise ValueError("quota_period_seconds must be > 0")
        for spec in self.spending_endpoints:
            _compile_endpoint(spec)

    def update(self, **changes: Any) -> LimitsConfig:
        """Change fields in place, all or nothing; the middleware then starts fresh counters."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"unknown limits setting(s): {', '.join(unknown)}")
        before = self.to_dict()
        try:
            for name, value in changes.items():
                setattr(self, name, tuple(value) if name == "spending_endpoints" else value)
            self.validate()
        except (ValueError, TypeError) as exc:
            for name, value in before.items():
                setattr(self, name, tuple(value) if name == "spending_endpoints" else value)
            raise ValueError(str(exc)) from None
        self._version += 1
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view, for ``GET /_sandbox/config`` and the README."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["spending_endpoints"] = list(self.spending_endpoints)
        return out

    def fingerprint(self) -> tuple[Any, ...]:
        """Cheap identity of the current values: a change resets the limiter's counters."""
        return (self._version, _values(self))


_values = operator.attrgetter(*(f.name for f in fields(LimitsConfig)))


def _require_number(name: str, value: object, kind: type | UnionType) -> None:
    if isinstance(value, bool) or not isinstance(value, kind):
        kind_name = "an integer" if kind is int else "a number"
        raise ValueError(f"{name} must be {kind_name}, got {value!r}")


def _compile_endpoint(spec: str) -> tuple[str, re.Pattern[str]]:
    if not isinstance(spec, str):
        raise ValueError(f"spending endpoint must be a string, got {spec!r}")
    method, sep, template = spec.strip().partition(" ")
    if not sep or not template.startswith("/"):
        raise ValueError(f"spending endpoint must look like 'POST /v1/path/{{id}}', got {spec!r}")
    pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template.rstrip("/")))
    return method.upper(), re.compile(f"^{pattern}/?$")


@dataclass(frozen=True)
class Decision:
    """What the limiter decided for one request, and the headers that describe the caller's budget."""

    headers: list[tuple[bytes, bytes]]
    error_code: str | None = None
    message: str = ""
    retry_after: int | None = None

    @property
    def admitted(self) -> bool:
        return self.error_code is None


@dataclass
class _Window:
    started: float
    count: int = 0


@dataclass
class _KeyState:
    tokens: float
    refilled_at: float
    quota_started: float
    quota_used: int = 0
    in_flight: int = 0
    windows: dict[str, _Window] = field(default_factory=dict)


class Limiter:
    """The four limits as plain state transitions, without ASGI, so they can be reasoned about alone.

    A rejected request consumes nothing: a client that backs off as told is never punished twice.
    Checks run from the most to the least durable limit (quota, bucket, endpoint window,
    concurrency), so the code names the limit that will take longest to clear.
    """

    def __init__(
        self, config: LimitsConfig | Callable[[], LimitsConfig], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._config_source = config if callable(config) else (lambda: config)
        self._clock = clock
        self._keys: OrderedDict[str, _KeyState] = OrderedDict()
        self._fingerprint: tuple[Any, ...] | None = None
        self._spending: list[tuple[str, str, re.Pattern[str]]] = []

    @property
    def config(self) -> LimitsConfig:
        return self._config_source()

    def reset(self) -> None:
        """Forget every caller's counters (requests in flight stay counted until they finish)."""
        for state in self._keys.values():
            state.tokens = float(self.config.burst)
            state.refilled_at = self._clock()
            state.quota_used = 0
            state.quota_started = self._clock()
            state.windows.clear()

    def _current_config(self) -> LimitsConfig:
        config = self.config
        fingerprint = config.fingerprint()
        if fingerprint != self._fingerprint:
            first = self._fingerprint is None
            self._fingerprint = fingerprint
            self._spending = [(spec, *_compile_endpoint(spec)) for spec in config.spending_endpoints]
            if not first:
                self.reset()
        return config

    def spending_endpoint(self, method: str, path: str) -> str | None:
        """The spending endpoint template a request hits, if any."""
        for spec, spec_method, pattern in self._spending:
            if spec_method == method and pattern.match(path):
                return spec
        return None

    def _state(self, key: str, config: LimitsConfig, now: float) -> _KeyState:
        state = self._keys.get(key)
        if state is None:
            state = _KeyState(tokens=float(config.burst), refilled_at=now, quota_started=now)
            self._keys[key] = state
            if len(self._keys) > _MAX_TRACKED_KEYS:
                for old_key, old in list(self._keys.items()):
                    if old.in_flight == 0:
                        del self._keys[old_key]
                        break
        else:
            self._keys.move_to_end(key)
        state.tokens = min(
            float(config.burst), state.tokens + (now - state.refilled_at) * config.rate_per_second
        )
        state.refilled_at = now
        if now - state.quota_started >= config.quota_period_seconds:
            state.quota_started, state.quota_used = now, 0
        return state

    def admit(self, key: str, method: str, path: str) -> Decision:
        """Decide one request; an admitted request must be paired with ``release(key)``."""
        config = self._current_config()
        now = self._clock()
        state = self._state(key, config, now)
        endpoint = self.spending_endpoint(method, path)
        window: _Window | None = None
        if endpoint is not None:
            window = state.windows.get(endpoint)
            if window is None or now - window.started >= config.window_seconds:
                window = state.windows[endpoint] = _Window(started=now)

        code, message, retry_after = None, "", None
        if config.quota is not None and state.quota_used >= config.quota:
            code = "quota_exceeded"
            retry_after = _ceil_seconds(state.quota_started + config.quota_period_seconds - now)
            message = f"The quota of {config.quota} requests per key is used up."
        elif state.tokens < 1.0:
            code = "rate_limited"
            retry_after = _ceil_seconds((1.0 - state.tokens) / config.rate_per_second)
            message = (
                f"Too many requests: at most {config.rate_per_second:g} per second (burst {config.burst})."
            )
        elif window is not None and window.count >= config.endpoint_limit:
            code = "endpoint_rate_limited"
            retry_after = _ceil_seconds(window.started + config.window_seconds - now)
            message = (
                f"Too many requests to {endpoint}: at most {config.endpoint_limit} "
                f"per {config.window_seconds:g} seconds."
            )
        elif state.in_flight >= config.max_concurrent:
            code = "concurrency_limited"
            retry_after = 1
            message = f"Too many requests in flight: at most {config.max_concurrent} at once."
        else:
            state.tokens -= 1.0
            state.quota_used += 1
            state.in_flight += 1
            if window is not None:
                window.count += 1

        headers = _budget_headers(config, state, window, now)
        return Decision(headers=headers, error_code=code, message=message, retry_after=retry_after)

    def release(self, key: str) -> None:
        state = self._keys.get(key)
        if state is not None and state.in_flight > 0:
            state.in_flight -= 1


def _ceil_seconds(seconds: float) -> int:
    """Whole seconds, at least 1: a Retry-After of 0 would invite an immediate, doomed retry."""
    return max(1, math.ceil(seconds - 1e-9))


def _budget_headers(
    config: LimitsConfig, state: _KeyState, window: _Window | None, now: float
) -> list[tuple[bytes, bytes]]:
    full_in = max(0.0, (config.burst - state.tokens) / config.rate_per_second)
    headers = [
        (b"x-ratelimit-limit", str(config.burst).encode()),
        (b"x-ratelimit-remaining", str(max(0, math.floor(state.tokens))).encode()),
        (b"x-ratelimit-reset", str(math.ceil(full_in - 1e-9)).encode()),
    ]
    if window is not None:
        reset = max(0.0, window.started + config.window_seconds - now)
        headers += [
            (b"x-endpoint-limit", str(config.endpoint_limit).encode()),
            (b"x-endpoint-remaining", str(max(0, config.endpoint_limit - window.count)).encode()),
            (b"x-endpoint-reset", str(math.ceil(reset - 1e-9)).encode()),
        ]
    return headers


def caller_key(scope: Scope) -> str:
    """A stable, non-secret id of the caller: a hash of the bearer value (never the key itself)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return "key:" + hashlib.sha256(value.strip()).hexdigest()[:24]
    client = scope.get("client") or ("unknown", 0)
    return f"anonymous:{client[0]}"


def error_response_messages(
    status: int, code: str, message: str, extra_headers: Iterable[tuple[bytes, bytes]] = ()
) -> tuple[Message, Message]:
    """The spec's error envelope as the two ASGI messages of a complete response."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra_headers,
    ]
    return (
        {"type": "http.response.start", "status": status, "headers": headers},
        {"type": "http.response.body", "body": body, "more_body": False},
    )


class LimitsMiddleware:
    """Enforces the limits on ``/v1`` and stamps every ``/v1`` response with the caller's budget.

    Pass the same ``LimitsConfig`` object the sandbox config holds (or a callable returning it):
    the middleware reads it on every request, so ``config.update(...)`` takes effect at once and
    starts fresh counters.
    """

    def __init__(
        self,
        app: ASGIApp,
        config: LimitsConfig | Callable[[], LimitsConfig],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.limiter = Limiter(config, clock)

    @property
    def config(self) -> LimitsConfig:
        return self.limiter.config

    def update(self, **changes: Any) -> LimitsConfig:
        return self.config.update(**changes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/v1" or path.startswith("/v1/")):
            await self.app(scope, receive, send)
            return
        key = caller_key(scope)
        decision = self.limiter.admit(key, scope["method"], path)
        if not decision.admitted:
            assert decision.error_code is not None
            extra = [*decision.headers]
            if decision.retry_after is not None:
                extra.append((b"retry-after", str(decision.retry_after).encode()))
            start, body = error_response_messages(429, decision.error_code, decision.message, extra)
            await send(start)
            await send(body)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *decision.headers]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            self.limiter.release(key)
