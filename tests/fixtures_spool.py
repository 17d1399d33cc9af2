"""A private temp directory, so a test can count the spools it leaves behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp directory of this test alone, so spools of parallel tests do not count."""
    path = tmp_path / "tmp"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path
