"""Request accounting of ``/v1``: counts by endpoint template and status, so a sync's cost is visible."""

from __future__ import annotations

import threading
from collections import defaultdict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandbox.routes import scope_template

UNKNOWN_ENDPOINT = "<unknown>"


class RequestStats:
    """Thread-safe counters: ``{"GET /v1/brands": {"200": 3, "429": 1}}``.

    A request whose connection was dropped before any response is counted under status ``"dropped"``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def record(self, endpoint: str, status: str) -> None:
        with self._lock:
            self._counts[endpoint][status] += 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {endpoint: dict(by_status) for endpoint, by_status in sorted(self._counts.items())}

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def middleware(self, app: ASGIApp) -> ASGIApp:
        return StatsMiddleware(app, self)


class StatsMiddleware:
    """Counts every ``/v1`` request, including those answered by the limits and faults middlewares."""

    def __init__(self, app: ASGIApp, stats: RequestStats) -> None:
        self.app = app
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/v1" or path.startswith("/v1/")):
            await self.app(scope, receive, send)
            return
        endpoint = scope_template(scope) or f"{scope['method']} {UNKNOWN_ENDPOINT}"
        status: list[str] = []

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(str(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.stats.record(endpoint, status[0] if status else "dropped")
