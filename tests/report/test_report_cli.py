"""``visibility-sync report``: HTML or PNG from the configured warehouse, or a message to sync first."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.cli_output import EXIT_CONFIG, EXIT_OK
from tests.report.conftest import Synced


@pytest.fixture
def warehouse_env(monkeypatch: pytest.MonkeyPatch, synced: Synced) -> Synced:
    """Only the synced DuckDB file configured: the report needs neither the API's URL nor its key."""
    for name in list(os.environ):
        if name.startswith(("VISIBILITY_", "DAGSTER_HOME")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", f"duckdb:///{synced.db}")
    return synced


def test_report_writes_a_self_contained_html_page(warehouse_env: Synced, tmp_path: Path, capsys) -> None:
    output = tmp_path / "out" / "report.html"
    assert main(["report", "--output", str(output)]) == EXIT_OK
    page = output.read_text(encoding="utf-8")
    embedded = re.search(r'<img [^>]*src="data:image/png;base64,([^"]+)"', page)
    assert embedded and base64.b64decode(embedded.group(1)).startswith(b"\x89PNG")
    assert not re.search(r'<(script|link)\b|src="http', page)  # opens offline, from a mail or a share
    for (name,) in warehouse_env.query("SELECT name FROM brands WHERE is_current"):
        assert f"<h2>{name}" in page
    out = " ".join(capsys.readouterr().out.split())
    assert "3 brand(s)" in out and str(output) in out


def test_report_writes_a_png_when_asked(warehouse_env: Synced, tmp_path: Path) -> None:
    output = tmp_path / "report.png"
    assert main(["report", "--output", str(output), "--days", "7"]) == EXIT_OK
    assert output.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_report_on_a_warehouse_without_tables_says_to_run_a_sync_first(
    warehouse_env: Synced, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    missing = tmp_path / "nothing.duckdb"
    monkeypatch.setenv("VISIBILITY_WAREHOUSE", f"duckdb:///{missing}")
    assert main(["report", "--output", str(tmp_path / "r.html")]) == EXIT_CONFIG
    err = " ".join(capsys.readouterr().err.split())
    assert "VISIBILITY_WAREHOUSE" in err and "run `visibility-sync run` first" in err
    assert not missing.exists() and not (tmp_path / "r.html").exists()


def test_report_refuses_an_output_it_cannot_write_before_reading_anything(
    warehouse_env: Synced, tmp_path: Path, capsys
) -> None:
    assert main(["report", "--output", str(tmp_path / "report.pdf")]) == EXIT_CONFIG
    assert "--output" in capsys.readouterr().err
    assert main(["report", "--days", "0"]) == EXIT_CONFIG
    assert "--days" in capsys.readouterr().err
