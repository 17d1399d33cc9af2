"""One test per row of docs/OPERATIONS.md's exit-code table: ``visibility-sync`` as a process, against
the sandbox or a small HTTP server on loopback that misbehaves on purpose (``tests/api/proxies.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

from pipelines.cli_output import (
    EXIT_CONFIG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
)
from sandbox.testing import SandboxHandle
from tests.api.proxies import Raw, Seen, fake_service
from tests.api.test_bounded_answers import gzip_bomb

ROOT = Path(__file__).resolve().parents[2]
KEY = "vsk_exitcodes0123456789abcdef0123"
#: Generous: a process's own start (imports) on a busy machine, never a figure the test asserts.
PROCESS_TIMEOUT = 300.0
ONE_DAY = ["--start", "2026-10-30", "--end", "2026-10-31", "--engine", "chatgpt", "--quiet"]


def cli_env(tmp_path: Path, url: str, key: str = KEY, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VISIBILITY_", "DAGSTER_HOME"))}
    env.update(
        VISIBILITY_API_URL=url,
        VISIBILITY_API_KEY=key,
        VISIBILITY_WAREHOUSE=f"duckdb:///{tmp_path / 'exit.duckdb'}",
        PYTHONUNBUFFERED="1",
        **more,
    )
    return env


def start(args: list[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from pipelines.cli import console_main; console_main()", *args],
        cwd=ROOT,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_cli(args: list[str], env: Mapping[str, str]) -> tuple[int, str]:
    process = start(args, env)
    out, err = process.communicate(timeout=PROCESS_TIMEOUT)
    return process.returncode, " ".join((out + err).split())  # the console wraps long lines


def brands(seen: Seen) -> tuple[int, dict[str, str], Any]:
    return 200, {}, {"data": [{"id": "b1", "name": "One"}], "has_more": False, "next_cursor": None}


def test_exit_0_check_with_a_working_key(tmp_path: Path, sandbox: SandboxHandle) -> None:
    code, output = run_cli(["check"], cli_env(tmp_path, sandbox.url, sandbox.keys["workspace"]))
    assert code == EXIT_OK, output


def test_exit_1_a_run_whose_brand_is_out_of_the_key_s_scope(tmp_path: Path, sandbox: SandboxHandle) -> None:
    env = cli_env(tmp_path, sandbox.url, sandbox.keys["workspace"], VISIBILITY_START_DATE="2026-10-01")
    code, output = run_cli(["run", "--brand", str(uuid.uuid4()), *ONE_DAY], env)
    assert code == EXIT_PARTIAL, output
    assert "out of this key's scope" in output


def test_exit_2_a_bad_setting_before_any_request(tmp_path: Path) -> None:
    with fake_service(brands) as service:
        code, output = run_cli(
            ["check"], cli_env(tmp_path, service.url, VISIBILITY_RETRY_DEADLINE_SECONDS="soon")
        )
    assert code == EXIT_CONFIG, output
    assert "VISIBILITY_RETRY_DEADLINE_SECONDS" in output
    assert service.seen == []


def test_exit_3_a_revoked_key(tmp_path: Path, sandbox: SandboxHandle) -> None:
    code, output = run_cli(["check"], cli_env(tmp_path, sandbox.url, sandbox.keys["revoked"]))
    assert code == EXIT_REFUSED, output
    assert "invalid_api_key" in output


def test_exit_4_a_gzip_bomb_is_cut_naming_the_endpoint_and_request_id_with_memory_flat(
    tmp_path: Path,
) -> None:
    """2 MB of gzip that expands to 2 GB on GET /v1/brands: cut at the body cap, never held."""
    bomb = gzip_bomb(2048)
    headers = {"Content-Encoding": "gzip", "X-Request-Id": "req-bomb-1"}
    with fake_service(lambda seen: (200, headers, Raw([bomb], len(bomb)))) as service:
        process = start(["check"], cli_env(tmp_path, service.url))
        peak = 0
        watched = psutil.Process(process.pid)
        while process.poll() is None:
            try:
                peak = max(peak, watched.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.02)
        out, err = process.communicate(timeout=PROCESS_TIMEOUT)
    output = " ".join((out + err).split())
    assert process.returncode == EXIT_UNAVAILABLE, output
    assert "GET /v1/brands" in output and "req-bomb-1" in output and "VISIBILITY_MAX_RESPONSE_BYTES" in output
    assert peak <= 300 * 2**20, f"peak RSS {peak / 2**20:.0f} MB"
    assert len(service.seen) == 1


def test_exit_4_a_body_dripping_in_ends_at_the_retry_deadline(tmp_path: Path) -> None:
    """A byte every second keeps each read alive; the whole answer ends at the 3 s deadline."""
    drip = Raw((b" " for _ in range(5000)), 5000, pause=1.0)
    with fake_service(lambda seen: (200, {}, drip)) as service:
        code, output = run_cli(
            ["check"], cli_env(tmp_path, service.url, VISIBILITY_RETRY_DEADLINE_SECONDS="3")
        )
    assert code == EXIT_UNAVAILABLE, output
    assert "still arriving at the retry deadline" in output


@pytest.mark.parametrize("command", [["check"], ["run", *ONE_DAY]], ids=["check", "run"])
def test_exit_4_a_rate_limit_past_the_retry_deadline(tmp_path: Path, command: list[str]) -> None:
    """``run``: five snapshot tables, each past the deadline, exited 1."""
    refused = {"error": {"code": "rate_limited", "message": "Too many requests."}}
    with fake_service(lambda seen: (429, {"Retry-After": "1"}, refused)) as service:
        code, output = run_cli(command, cli_env(tmp_path, service.url, VISIBILITY_RETRY_DEADLINE_SECONDS="2"))
    assert code == EXIT_UNAVAILABLE, output
    assert "rate_limited" in output  # the code the service answered with


def test_exit_130_interrupted_while_waiting_for_an_answer(tmp_path: Path) -> None:
    arrived: list[Seen] = []

    def hang(seen: Seen) -> tuple[int, dict[str, str], Any]:
        arrived.append(seen)
        return 200, {}, Raw((b" " for _ in range(5000)), 5000, pause=1.0)

    with fake_service(hang) as service:
        process = start(["check"], cli_env(tmp_path, service.url, VISIBILITY_RETRY_DEADLINE_SECONDS="600"))
        waited_until = time.monotonic() + PROCESS_TIMEOUT
        while not arrived and process.poll() is None and time.monotonic() < waited_until:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=PROCESS_TIMEOUT)
    assert process.returncode == EXIT_INTERRUPTED, out + err
