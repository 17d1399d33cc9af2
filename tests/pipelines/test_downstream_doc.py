"""docs/DOWNSTREAM.md's example, as written: saved as my_defs.py and materialized with the command the
page gives, on a DuckDB file and schema not named `visibility`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from resources.warehouse.contract import SnapshotScope
from resources.warehouse.urls import warehouse_from_url
from sync import tables
from sync.transforms import rows_to_table
from tests.doc_blocks import ROOT, doc_block
from tests.pipelines.test_downstream_assets import BRAND, land

DOC = "docs/DOWNSTREAM.md"


def test_the_downstream_example_materializes_as_written(tmp_path: Path) -> None:
    url = f"duckdb:///{tmp_path / 'landing.duckdb'}"
    land(warehouse_from_url(url, "brand_data"))
    with warehouse_from_url(url, "brand_data") as warehouse:  # share_of_voice_daily names the brand
        warehouse.ensure_table(tables.BRANDS)
        brands = rows_to_table(tables.BRANDS, [{"id": BRAND, "name": "Acme"}])
        warehouse.upsert_snapshot(tables.BRANDS, brands, "r1", SnapshotScope())

    code = doc_block(DOC, "# my_defs.py")
    (tmp_path / "my_defs.py").write_text(code.text)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    [command] = doc_block(DOC, ".venv/bin/dagster asset materialize").lines()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VISIBILITY_", "DAGSTER_"))}
    env.update(PYTHONPATH=str(ROOT), VISIBILITY_WAREHOUSE=url, VISIBILITY_SCHEMA="brand_data")
    done = subprocess.run(
        command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "RUN_SUCCESS" in done.stderr + done.stdout
    assert "Acme" in done.stdout  # own_sql's rows, read from the schema by the view's name alone
