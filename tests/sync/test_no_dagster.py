"""The core and its tests stand without Dagster: a fresh interpreter imports every ``sync`` module and
collects every test of tests/sync, and Dagster is never loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import importlib, pkgutil, sys
import pytest
import sync
modules = [m.name for m in pkgutil.iter_modules(sync.__path__, "sync.")]
for name in modules:
    importlib.import_module(name)
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests/sync"])
loaded = sorted(m for m in sys.modules if m == "dagster" or m.startswith("dagster."))
print(f"modules={len(modules)} collected={int(code)} dagster={loaded[:5]}")
"""


def test_importing_the_core_and_collecting_its_tests_loads_no_dagster() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert last.endswith("collected=0 dagster=[]"), done.stdout[-2000:] + done.stderr[-2000:]
    assert not last.startswith("modules=0 "), last
