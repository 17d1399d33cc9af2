"""Run a sandbox in-process for tests and benchmarks: uvicorn on a free loopback port, in a thread."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from sandbox.app import create_app
from sandbox.config import SandboxConfig
from sandbox.instance import Sandbox
from sandbox.world import World

_START_TIMEOUT_SECONDS = 30.0


@dataclass
class SandboxHandle:
    """A running sandbox: its URL, its keys by role, its world, and its admin endpoints."""

    url: str
    keys: dict[str, str]
    world: World
    sandbox: Sandbox

    def _admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = httpx.request(method, self.url + path, json=body, timeout=30.0)
        response.raise_for_status()
        return response.json()

    def stats(self) -> dict[str, dict[str, int]]:
        """Requests by endpoint template and status since the last reset."""
        return self._admin("GET", "/_sandbox/stats")

    def reset_stats(self) -> None:
        self._admin("POST", "/_sandbox/stats/reset")

    def restate(self) -> int:
        """Bump the revision: the last ``restate_days`` days change values."""
        return int(self._admin("POST", "/_sandbox/restate")["revision"])

    def configure(self, **changes: Any) -> dict[str, Any]:
        """Change delays, ``fail_endpoints``, ``limits={...}`` or ``faults={...}`` of the running sandbox."""
        return self._admin("POST", "/_sandbox/config", changes)

    def track(self, brand_id: str, brand_name: str) -> dict[str, Any]:
        """Track a discovered competitor (again); its backfill then runs for the configured delay."""
        return self._admin("POST", "/_sandbox/track", {"brand_id": brand_id, "brand_name": brand_name})[
            "data"
        ]


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def serve_in_thread(app: Any, name: str) -> Iterator[str]:
    """Serve an ASGI ``app`` with uvicorn on a free loopback port in a background thread; yields its
    base URL. On exit the server stops and its thread is joined (the sandbox, a test's proxy)."""
    sock = _free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
        )
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"{name}-{port}", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + _START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError(f"the {name} server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextlib.contextmanager
def run_sandbox(config: SandboxConfig | None = None) -> Iterator[SandboxHandle]:
    """Serve a sandbox until the block exits; the server stops and its thread is joined on exit."""
    app = create_app(config or SandboxConfig())
    with serve_in_thread(app, "sandbox") as url:
        sb: Sandbox = app.state.sandbox
        yield SandboxHandle(url, dict(sb.world.keys_by_role), sb.world, sb)
