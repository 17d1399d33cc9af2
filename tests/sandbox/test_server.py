"""The sandbox as users start it: ``python -m sandbox`` prints its URL and keys, then serves."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from sandbox.config import SandboxConfig
from sandbox.server import banner

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_python_m_sandbox_prints_url_and_keys_and_serves_them() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "--port", str(port), "--seed", "5"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        while not any(line.startswith("Press Ctrl+C") for line in lines):
            line = process.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        output = "".join(lines)
        url = f"http://127.0.0.1:{port}"
        assert url in output
        key = next(line.split()[1] for line in lines if line.strip().startswith("workspace "))
        deadline = time.monotonic() + 20
        while True:
            try:
                response = httpx.get(f"{url}/v1/brands", headers={"Authorization": f"Bearer {key}"})
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server never accepted connections"
                time.sleep(0.05)
        assert response.status_code == 200 and response.json()["data"]
        keys = httpx.get(f"{url}/_sandbox/keys").json()["keys"]
        assert all(value in output for value in keys.values())
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_banner_names_the_url_every_key_and_the_admin_endpoints() -> None:
    keys = {"workspace": "vsk_a", "scoped": "vsk_b"}
    text = banner(SandboxConfig(), "http://127.0.0.1:9", keys)
    assert "http://127.0.0.1:9" in text and "vsk_a" in text and "vsk_b" in text
    assert "/_sandbox/stats" in text and "VISIBILITY_API_KEY=vsk_a" in text
