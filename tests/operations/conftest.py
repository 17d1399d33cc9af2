"""Fixtures of the operation tests: a sandbox of their own per test (operations change its state), in
place of the session's, so the CLI tests' ``env`` (its URL and key, a fresh DuckDB file) points at it;
and a client on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from resources.api.client import VisibilityClient
from sandbox.testing import SandboxHandle
from tests.pipelines.test_cli import env  # noqa: F401  (on this folder's ``sandbox``)


@pytest.fixture
def sandbox(sandbox_factory: Callable[..., SandboxHandle]) -> SandboxHandle:
    """A fresh sandbox (audits complete after 0.5 s), stopped after the test."""
    return sandbox_factory()


@pytest.fixture
def client(sandbox: SandboxHandle) -> Iterator[VisibilityClient]:
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"], retry_deadline_seconds=5.0) as opened:
        yield opened
