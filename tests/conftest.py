"""Shared fixtures live in plugin modules, one per part, so each can evolve alone.

Every test gets a temp directory of its own (``TMPDIR``, for it and the processes it starts): what a
sync keeps on disk between attempts on purpose (a failed run's resume journal) then never reaches
another test that happens to ask for the same selection.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fixtures_sandbox",
    "tests.fixtures_postgres",
    "tests.fixtures_bigquery",
    "tests.fixtures_spool",
]


@pytest.fixture(autouse=True)
def own_temp_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)  # recomputed from TMPDIR, restored after the test
    yield folder
