"""Run a command under a pseudo-terminal, as a person at a terminal would see it."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_a_terminal(
    command: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float
) -> tuple[int, str]:
    """Exit code and what the terminal showed (escape sequences removed, carriage returns as lines)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        list(command), stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, env=dict(env), cwd=cwd
    )
    os.close(terminal)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    return code, ANSI.sub("", shown.decode("utf-8", "replace")).replace("\r", "\n")
