"""The ``visibility-sync`` process carries only what a sync needs: no pandas (pyarrow imports it on a
sync's first Arrow array, only to ask whether the value is a DataFrame)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.pipelines.test_cli_first_run import ROOT, TIMEOUT_SECONDS, demo_env

_PROBE = """
import atexit, sys
from pipelines import cli
def probe():
    print("probe:", "pandas" in sys.modules, flush=True)
atexit.register(probe)
sys.argv = ["visibility-sync", "demo", "--days", "1"]
cli.console_main()
"""

_BLOCKED = """
import sys
import pyarrow as pa
from sync.without_pandas import keep_pandas_out
keep_pandas_out("the probe")
assert pa.array([{"a": 1}]).to_pylist() == [{"a": 1}]  # pyarrow works on, taking pandas for absent
assert "pandas" not in sys.modules
try:
    import pandas
except ModuleNotFoundError as exc:
    print(exc)
"""


def _python(code: str, cwd: Path = ROOT, **options: Any) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (a process of its own: what it imports stays there)."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False, **options
    )


def test_the_command_syncs_without_pandas(tmp_path: Path) -> None:
    done = _python(_PROBE, tmp_path, env=demo_env(), timeout=TIMEOUT_SECONDS * 2)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "prompt_mentions" in done.stdout  # the demo synced: its summary names the tables
    probes = [line for line in done.stdout.splitlines() if line.startswith("probe:")]
    assert probes == ["probe: False"], done.stdout[-2000:]


def test_a_process_that_keeps_pandas_out_says_so_on_import() -> None:
    done = _python(_BLOCKED, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "No module named 'pandas' in the probe"


def test_a_process_that_already_has_pandas_keeps_it() -> None:
    code = (
        "import pandas, sys\nfrom sync.without_pandas import keep_pandas_out\n"
        "keep_pandas_out('x')\nprint(any(type(f).__name__ == '_NoPandas' for f in sys.meta_path))"
    )
    done = _python(code, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"  # nothing blocks what is already loaded
