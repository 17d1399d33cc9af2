"""Small helpers shared by the sandbox tests: an authenticated client and error assertions."""

from __future__ import annotations

from typing import Any

import httpx

from sandbox.testing import SandboxHandle


def client(handle: SandboxHandle, role: str = "workspace") -> httpx.Client:
    """A client of the sandbox with the key of ``role`` (an empty role sends no key)."""
    headers = {"Authorization": f"Bearer {handle.keys[role]}"} if role else {}
    return httpx.Client(base_url=handle.url, headers=headers, timeout=30.0)


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    """The spec's error envelope with this status and code, and a request id to quote."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert response.headers.get("x-request-id")


def data(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]
