"""ASGI middlewares of the core: request ids and scope hooks, and the gate that limits and faults /v1."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandbox.faults import FaultsMiddleware
from sandbox.instance import Sandbox
from sandbox.limits import LimitsMiddleware
from sandbox.routes import match_template


class RequestIdMiddleware:
    """Gives every request an id, sends it as ``X-Request-Id`` on every response, and sets the
    hooks of ``scope["sandbox"]`` (see ``sandbox/routes.py``)."""

    def __init__(self, app: ASGIApp, sb: Sandbox) -> None:
        self.app = app
        self.sb = sb

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = str(uuid.uuid4())
        scope["sandbox"] = {
            "restate": self.sb.restate,
            "stats": self.sb.stats,
            "request_id": request_id,
            "template": match_template(scope["method"], scope["path"]),
        }

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


class V1Gate:
    """Sends ``/v1`` through the limits and faults; admin endpoints are never limited or faulted."""

    def __init__(self, router: ASGIApp, sb: Sandbox) -> None:
        self.router = router
        faults = FaultsMiddleware(router, lambda: sb.config.faults)
        self.v1 = LimitsMiddleware(faults, lambda: sb.config.limits)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/v1" or path.startswith("/v1/")):
            await self.v1(scope, receive, send)
        else:
            await self.router(scope, receive, send)


class Chain:
    """Adapter that lets ``add_middleware`` install a prebuilt chain around the router."""

    def __init__(self, app: ASGIApp, wrapper: Callable[[ASGIApp], ASGIApp]) -> None:
        self.chain = wrapper(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.chain(scope, receive, send)
