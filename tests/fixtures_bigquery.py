"""BigQuery targets for the tests: a local emulator (default) or real BigQuery (opt-in).

``bigquery_target`` is parametrised over:

* ``emulator``: `bqemulator <https://pypi.org/project/bqemulator/>`_ (DuckDB-backed, REST) started in
  a subprocess on 127.0.0.1, once per session (per xdist worker). Run as ``python -m
  tests.fixtures_bigquery REST_PORT GRPC_PORT PARENT_PID`` (it exits when the test process dies), it
  applies two gap-fillers before serving, both explained in docs/BIGQUERY.md:

  1. skip loading DuckDB's ``spatial`` extension, which bqemulator 1.4 downloads at start (offline
     here, and no wheel of it exists for DuckDB 2.0); the tables use no GEOGRAPHY;
  2. pass the job's query parameters to the statements of multi-statement scripts, as BigQuery does
     (bqemulator 1.4 binds them only for single statements).

* ``live`` (marker ``bigquery_live``): real BigQuery, only when ``VISIBILITY_TEST_BIGQUERY`` is
  ``project/dataset`` and Application Default Credentials are available; skipped otherwise.

Each test gets its own table-name prefix, and its tables are dropped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ENV_LIVE = "VISIBILITY_TEST_BIGQUERY"
EMULATOR_PROJECT = "visibility-test"
EMULATOR_DATASET = "visibility"
_START_TIMEOUT_S = 60.0


# --- the emulator process ------------------------------------------------------------------------


def _exit_with_parent(parent: int) -> None:  # pragma: no cover - runs in the subprocess
    """A killed test run (timeout, ^C) must not leave the emulator running: exit when orphaned."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _serve(rest_port: int, grpc_port: int) -> None:  # pragma: no cover - runs in the subprocess
    """Start bqemulator with the two gap-fillers of the module docstring; blocks until SIGTERM."""
    import contextvars

    import bqemulator.jobs.executor as executor
    import bqemulator.scripting.interpreter as interpreter
    from bqemulator.config import PersistenceMode, Settings
    from bqemulator.server import run_forever
    from bqemulator.sql.parameters import bind_parameters
    from bqemulator.storage.engine import DuckDBEngine

    DuckDBEngine._load_spatial = lambda self: None  # type: ignore[method-assign]

    script_params: contextvars.ContextVar[Any] = contextvars.ContextVar("script_params", default=None)
    run_query_body = executor._run_query_body

    async def run_query_body_with_params(**kwargs: Any) -> Any:
        token = script_params.set(kwargs.get("query_params"))
        try:
            return await run_query_body(**kwargs)
        finally:
            script_params.reset(token)

    def bind_with_script_params(sql: str, query_parameters: Any = None) -> Any:
        return bind_parameters(sql, query_parameters if query_parameters is not None else script_params.get())

    executor._run_query_body = run_query_body_with_params
    interpreter.bind_parameters = bind_with_script_params  # type: ignore[assignment]

    run_forever(
        Settings(
            persistence_mode=PersistenceMode.EPHEMERAL,
            rest_host="127.0.0.1",
            rest_port=rest_port,
            grpc_host="127.0.0.1",
            grpc_port=grpc_port,
            default_project_id=EMULATOR_PROJECT,
            enable_format_extensions=False,
            log_level="warning",
        )
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1) as resp:  # loopback only
            return bool(resp.status == 200)
    except OSError:
        return False


@dataclass
class EmulatorProcess:
    url: str
    proc: subprocess.Popen[bytes]
    #: the emulator's log and its upload staging folder (else ``<tmp>/bqemu_uploads``, left behind)
    work: Path

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.work, ignore_errors=True)


def start_emulator(attempts: int = 3) -> EmulatorProcess:
    """The emulator on free loopback ports; retried when a port was taken in between."""
    pytest.importorskip("bqemulator", reason="bqemulator is not installed (pip install -e '.[dev]')")
    root = Path(__file__).resolve().parent.parent
    last = ""
    for _ in range(attempts):
        rest, grpc = _free_port(), _free_port()
        work = Path(tempfile.mkdtemp(prefix="bqemulator-"))
        log = work / "emulator.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.fixtures_bigquery", str(rest), str(grpc), str(os.getpid())],
                cwd=root,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "BQEMU_UPLOAD_STAGING_DIR": str(work / "uploads")},
            )
        url = f"http://127.0.0.1:{rest}"
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            if _healthy(url):
                return EmulatorProcess(url, proc, work)
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        last = log.read_text(errors="replace")[-4000:]
        shutil.rmtree(work, ignore_errors=True)
    raise RuntimeError(f"bqemulator did not start:\n{last}")


@pytest.fixture(scope="session")
def bigquery_emulator() -> Iterator[str]:
    """The emulator's REST endpoint for this session (or xdist worker)."""
    server = start_emulator()
    try:
        yield server.url
    finally:
        server.stop()


# --- targets -------------------------------------------------------------------------------------


@dataclass
class BigQueryTarget:
    """Where a test's tables go: a client, a project and dataset, and a per-test table prefix."""

    kind: str  # "emulator" or "live"
    client: Any  # google.cloud.bigquery.Client
    project: str
    dataset: str
    prefix: str

    def warehouse(self, **options: Any) -> Any:
        from resources.warehouse.bigquery import BigQueryWarehouse

        return BigQueryWarehouse(self.project, self.dataset, client=self.client, **options)

    def table_names(self) -> list[str]:
        return [t.table_id for t in self.client.list_tables(f"{self.project}.{self.dataset}")]

    def drop_own_tables(self) -> None:
        from google.api_core.exceptions import NotFound

        for name in self.table_names():
            if name.startswith(self.prefix) or (
                name.startswith("_visibility_staging_") and self.prefix in name
            ):
                with contextlib.suppress(NotFound):
                    self.client.delete_table(f"{self.project}.{self.dataset}.{name}", not_found_ok=True)


def _emulator_client(url: str) -> Any:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import bigquery

    return bigquery.Client(
        project=EMULATOR_PROJECT,
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options=ClientOptions(api_endpoint=url),
    )


def _live_client() -> tuple[Any, str, str]:
    given = os.environ.get(ENV_LIVE, "")
    if not given:
        pytest.skip(f"set {ENV_LIVE}=project/dataset (and credentials) to run against real BigQuery")
    project, _, dataset = given.partition("/")
    if not project or not dataset or "/" in dataset:
        pytest.fail(f"{ENV_LIVE} must be project/dataset, got {given!r}")
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import bigquery

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/bigquery"])
    except DefaultCredentialsError as exc:
        pytest.skip(f"{ENV_LIVE} is set but no Google credentials were found: {exc}")
    return bigquery.Client(project=project, credentials=credentials), project, dataset


@pytest.fixture(params=["emulator", pytest.param("live", marks=pytest.mark.bigquery_live)])
def bigquery_target(request: pytest.FixtureRequest) -> Iterator[BigQueryTarget]:
    """The same tests on the emulator and, when configured, on real BigQuery."""
    if request.param == "emulator":
        client = _emulator_client(request.getfixturevalue("bigquery_emulator"))
        project, dataset = EMULATOR_PROJECT, EMULATOR_DATASET
        client.create_dataset(f"{project}.{dataset}", exists_ok=True)
    else:
        client, project, dataset = _live_client()
    # table names start with the prefix, so parallel tests (and runs) never share a table
    target = BigQueryTarget(request.param, client, project, dataset, f"t{uuid.uuid4().hex[:10]}_")
    try:
        yield target
    finally:
        target.drop_own_tables()
        client.close()


if __name__ == "__main__":  # pragma: no cover
    _exit_with_parent(int(sys.argv[3]))
    _serve(int(sys.argv[1]), int(sys.argv[2]))
