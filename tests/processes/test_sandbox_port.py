"""The sandbox on a busy port fails at once, in one line naming the port, before printing its banner
and keys (which would send a user to a server that is not this one)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from sandbox.config import SandboxConfig
from sandbox.server import PortUnavailableError, serve_forever
from tests.processes.helpers import ROOT


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VISIBILITY_")}
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_serve_forever_on_a_busy_port_raises_before_printing_anything(
    busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(PortUnavailableError, match=f"port {busy_port} on 127.0.0.1 is in use"):
        serve_forever(SandboxConfig(), "127.0.0.1", busy_port)

    assert capsys.readouterr().out == ""


def test_python_m_sandbox_on_a_busy_port_exits_2_with_one_line(busy_port: int) -> None:
    result = run(["-m", "sandbox", "--port", str(busy_port)])

    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and f"port {busy_port}" in result.stderr


def test_visibility_sync_sandbox_on_a_busy_port_is_a_usage_error_without_banner(busy_port: int) -> None:
    result = run(["-m", "pipelines.cli", "sandbox", "--port", str(busy_port)])

    assert result.stdout == ""
    assert f"port {busy_port}" in result.stderr and "vsk_" not in result.stderr
    assert result.returncode == 2


def test_port_0_serves_on_a_free_port_and_the_banner_names_it() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "--port", "0"],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.search(r"serving (http://127\.0\.0\.1:(\d+))", first)
        assert match and int(match.group(2)) > 0, first
        deadline = time.monotonic() + 20
        while True:
            try:
                assert httpx.get(f"{match.group(1)}/openapi.json").status_code == 200
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the sandbox never served its port"
                time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=10)
