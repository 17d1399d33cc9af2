"""A full disk under DAGSTER_HOME: one line naming the folder, not SQLAlchemy's statement and Dagster's
event JSON (a real tmpfs, filled before the run; needs root to mount)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pipelines.cli import main
from tests.fixtures_spool import tmpfs
from tests.pipelines.test_cli import env  # noqa: F401  (the fixture)

ONE_DAY = ["--start", "2026-10-30", "--end", "2026-10-31", "--engine", "chatgpt", "--quiet"]


@pytest.mark.parametrize("free_kib", [0, 700])  # full before the run; full during it
def test_a_full_dagster_home_is_one_line_naming_the_folder(
    env: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    free_kib: int,
) -> None:
    with tmpfs(tmp_path / "home", "8m") as home:
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        filler = home / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1k"], capture_output=True, check=False)
        if free_kib:
            subprocess.run(["truncate", "-s", f"-{free_kib}K", str(filler)], check=True)
        code = main(["run", *ONE_DAY])
        err = capsys.readouterr().err
        free = shutil.disk_usage(home).free
    assert code == 1 and free < 2**20
    assert "Exception while writing" not in err and "[SQL:" not in err and '"__class__"' not in err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: Dagster could not record the run under DAGSTER_HOME {home} (SQLite: ")
    assert line.endswith(
        "free on its disk): free space there or set DAGSTER_HOME to a folder on a larger disk; every "
        "table whose landing had not committed keeps its previous rows"
    )
