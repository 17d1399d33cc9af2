"""Misbehaving services for the client's tests: a rewriting proxy in front of the sandbox, and a tiny
real HTTP server on loopback that answers whatever a test scripts.

Both are real parts: the proxy is an ``httpx.HTTPTransport`` that sends each request to the sandbox
over loopback HTTP and rewrites the answer (as a proxy or a broken service would), the server is the
standard library's ``ThreadingHTTPServer`` on a free loopback port.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

#: Rewrites one answer of the sandbox: (request, answer with its body read) -> the answer to deliver.
Rewrite = Callable[[httpx.Request, httpx.Response], httpx.Response]


def bearer_of(request: httpx.Request) -> str:
    """The key the client sent (what an echoing proxy would copy)."""
    return request.headers["authorization"].removeprefix("Bearer ")


def answer(
    original: httpx.Response,
    *,
    status: int | None = None,
    headers: dict[str, str] | None = None,
    body: Any = None,
    reason: bytes | None = None,
) -> httpx.Response:
    """A copy of ``original`` with some parts replaced (``body`` is JSON; None keeps the bytes)."""
    replaced = {"content-length", "content-encoding", *(name.lower() for name in headers or {})}
    merged = {k: v for k, v in original.headers.items() if k.lower() not in replaced}
    merged.update(headers or {})
    content = original.content if body is None else json.dumps(body).encode()
    extensions = {"reason_phrase": reason} if reason is not None else {}
    return httpx.Response(
        status or original.status_code, headers=merged, content=content, extensions=extensions
    )


class RewritingProxy(httpx.HTTPTransport):
    """Forwards every request to the sandbox over real HTTP, then rewrites the answer."""

    def __init__(self, rewrite: Rewrite) -> None:
        super().__init__()
        self._rewrite = rewrite

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.read()
        response.close()
        return streamed(self._rewrite(request, response))


def streamed(response: httpx.Response) -> httpx.Response:
    """A read answer delivered again as a stream of its decoded bytes, as the wire delivers one."""
    headers = [
        (k, v) for k, v in response.headers.items() if k.lower() not in ("content-encoding", "content-length")
    ]
    return httpx.Response(
        response.status_code,
        headers=headers,
        stream=httpx.ByteStream(response.content),
        extensions=response.extensions,
    )


@dataclass
class Seen:
    """One request the fake service received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class Raw:
    """A body sent as bytes, as is: ``chunks`` one after another, ``pause`` seconds apart (a body that
    drips in), under ``content_length`` (None: no header, the connection's end ends the body)."""

    chunks: Iterable[bytes]
    content_length: int | None = None
    pause: float = 0.0


#: Scripts the fake service: a request -> (status, headers, JSON body, or a ``Raw`` body).
Script = Callable[[Seen], tuple[int, dict[str, str], Any]]


@dataclass
class FakeService:
    url: str
    seen: list[Seen] = field(default_factory=list)


@contextmanager
def fake_service(script: Script) -> Iterator[FakeService]:
    """Serve ``script`` on a free loopback port until the block exits (server and thread stopped)."""
    state = FakeService(url="")

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            parts = urlsplit(self.path)
            seen = Seen(self.command, parts.path, parse_qs(parts.query), dict(self.headers.items()))
            state.seen.append(seen)
            status, headers, body = script(seen)
            if not isinstance(body, Raw):
                payload = json.dumps(body).encode()
                body = Raw([payload], len(payload))
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            if body.content_length is not None:
                self.send_header("Content-Length", str(body.content_length))
            else:
                self.close_connection = True
            self.end_headers()
            try:
                for number, chunk in enumerate(body.chunks):
                    if number and body.pause:
                        time.sleep(body.pause)
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError:  # the client went away mid-body
                self.close_connection = True

        do_GET = do_POST = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def dead_url() -> str:
    """A loopback URL with nobody listening (connections are refused at once)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


#: Rewrites one answer of the service behind ``forwarding``: (request, status, JSON body) -> what
#: ``fake_service`` serves instead.
AnswerRewrite = Callable[[Seen, int, Any], tuple[int, dict[str, str], Any]]


def forwarding(target: str, rewrite: AnswerRewrite) -> Script:
    """A ``fake_service`` script that forwards each GET to ``target`` (the sandbox) with the caller's
    key and serves the answer ``rewrite`` makes of it: a rewriting proxy a process can be pointed at."""
    http = httpx.Client(base_url=target, timeout=60)

    def script(seen: Seen) -> tuple[int, dict[str, str], Any]:
        key = next(v for k, v in seen.headers.items() if k.lower() == "authorization")
        query = [(name, value) for name, values in seen.query.items() for value in values]
        original = http.request(seen.method, seen.path, params=query, headers={"Authorization": key})
        return rewrite(seen, original.status_code, original.json())

    return script
