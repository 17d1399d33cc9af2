"""Serve the sandbox in the foreground (``visibility-sync sandbox``, ``python -m sandbox``)."""

from __future__ import annotations

import errno
import socket
import sys

import uvicorn

from sandbox.app import create_app
from sandbox.config import SandboxConfig


class PortUnavailableError(OSError):
    """The sandbox cannot listen on the host and port asked for; the message names both."""


def banner(config: SandboxConfig, url: str, keys: dict[str, str]) -> str:
    """What a user needs to start: the URL, the keys by role, and the admin endpoints."""
    lines = [
        f"Visibility sandbox serving {url}  (seed {config.seed}, size {config.size}, "
        f"faults {config.faults.profile}, data {config.history_start} .. {config.today} exclusive)",
        "",
        "Try it:",
        f"  export VISIBILITY_API_URL={url}",
        f"  export VISIBILITY_API_KEY={keys['workspace']}",
        "",
        "Keys by role:",
        *(f"  {role:<16} {value}" for role, value in keys.items()),
        "",
        f"Admin: {url}/_sandbox/stats  {url}/_sandbox/keys  {url}/openapi.json",
        "Press Ctrl+C to stop.",
    ]
    return "\n".join(lines)


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (``port`` 0: a free one), or :class:`PortUnavailableError`.

    The server is then handed this very socket, so no other program can take the port between the
    check and the serving.
    """
    address = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: TIME_WAIT is no obstacle
        sock.bind((address, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            message = (
                f"port {port} on {host} is in use (another sandbox or program listens there): "
                "pass another --port, or 0 for any free one"
            )
        else:
            message = f"cannot listen on port {port} of {host}: {exc.strerror or exc}"
        error = PortUnavailableError(message)
        error.errno = exc.errno
        raise error from None
    return sock


def url_of(sock: socket.socket) -> str:
    """The URL a client uses to reach ``sock`` (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if sock.family == socket.AF_INET6 else f"http://{host}:{port}"


def serve_forever(config: SandboxConfig | None = None, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Listen first (a busy port: :class:`PortUnavailableError`, nothing printed), then print the URL
    and the demo keys, then serve until interrupted."""
    sock = listen(host, port)
    try:
        config = config or SandboxConfig()
        app = create_app(config)
        url = url_of(sock)
        sys.stdout.write(banner(config, url, app.state.sandbox.world.keys_by_role) + "\n")
        sys.stdout.flush()
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        server.run(sockets=[sock])
    finally:
        sock.close()
