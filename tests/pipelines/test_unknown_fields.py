"""A service that adds unknown fields to its rows: up to ``VISIBILITY_MAX_NEW_COLUMNS`` of them land
as new columns; more refuse the table's landing, naming the table, the count and the setting, with
the warehouse as it was and the memory of the same sync without them (``visibility-sync run`` as a
process, through a rewriting proxy on loopback in front of the sandbox)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from pipelines.cli_output import EXIT_OK, EXIT_UNAVAILABLE
from sandbox.testing import SandboxHandle
from sync import tables
from tests.api.proxies import Seen, fake_service, forwarding
from tests.pipelines.test_exit_codes import ONE_DAY, ROOT, cli_env

#: Two weeks of one engine: enough mention rows that holding 1,500 fields each would show in RSS.
WEEKS = ["--start", "2026-10-17", "--end", "2026-10-31", "--engine", "chatgpt", "--quiet"]
#: Peak RSS of the sync with 1,500 unknown fields a row, at most this many times that without them.
RSS_RATIO = 1.5


def widened(fields: int) -> Callable[[Seen, int, Any], tuple[int, dict[str, str], Any]]:
    """A proxy rewrite: every prompt mention row gains ``fields`` unknown integer fields."""

    def rewrite(seen: Seen, status: int, body: Any) -> tuple[int, dict[str, str], Any]:
        if seen.path.endswith("/mentions") and isinstance(body, dict) and isinstance(body.get("data"), list):
            for n, row in enumerate(body["data"]):
                row.update({f"f{k:04d}": n + k for k in range(fields)})
        return status, {}, body

    return rewrite


def run_measured(args: list[str], env: dict[str, str], log: Path) -> tuple[int, str, int]:
    """Exit code, output (blanks folded) and peak RSS in KiB of one ``visibility-sync`` process
    (``os.wait4``: that child's own, whatever ran before)."""
    with log.open("w+") as output:
        process = subprocess.Popen(
            [sys.executable, "-c", "from pipelines.cli import console_main; console_main()", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            if process.returncode is None and process.poll() is None:
                process.kill()
        process.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        return process.returncode, " ".join(output.read().split()), usage.ru_maxrss


def mentions_table(tmp_path: Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    with duckdb.connect(str(tmp_path / "exit.duckdb"), read_only=True) as db:
        columns = [r[0] for r in db.execute("DESCRIBE visibility.prompt_mentions").fetchall()]
        rows = db.execute("SELECT * FROM visibility.prompt_mentions ORDER BY ALL").fetchall()
    return columns, rows


def sync_through(
    tmp_path: Path, sandbox: SandboxHandle, fields: int, days: list[str] = WEEKS, **settings: str
) -> tuple[int, str, int]:
    """A sync of ``days`` through a proxy adding ``fields`` unknown fields to each mention row."""
    key = sandbox.keys["workspace"]
    with fake_service(forwarding(sandbox.url, widened(fields))) as proxy:
        env = cli_env(tmp_path, proxy.url, key, VISIBILITY_START_DATE="2026-10-01", **settings)
        return run_measured(["run", *days], env, tmp_path / f"run-{fields}.log")


def test_a_service_adding_1500_fields_a_row_is_refused_leaving_the_table_and_the_memory_as_without_them(
    tmp_path: Path, sandbox: SandboxHandle
) -> None:
    code, output, plain_rss = sync_through(tmp_path, sandbox, 0)
    assert code == EXIT_OK, output
    before = mentions_table(tmp_path)
    assert len(before[1]) > 100, "too few rows for the memory comparison to mean anything"

    code, output, wide_rss = sync_through(tmp_path, sandbox, 1500)
    assert wide_rss <= RSS_RATIO * plain_rss, (wide_rss, plain_rss)
    assert code == EXIT_UNAVAILABLE, output  # an answer not of the spec's shape
    assert "prompt_mentions: the service sent 1500 unknown fields" in output
    assert "VISIBILITY_MAX_NEW_COLUMNS=50" in output
    assert mentions_table(tmp_path) == before  # neither a column nor a row changed


def test_the_new_columns_setting_decides_how_many_unknown_fields_land_as_columns(
    tmp_path: Path, sandbox: SandboxHandle
) -> None:
    code, output, _ = sync_through(tmp_path, sandbox, 60, ONE_DAY)
    assert code == EXIT_UNAVAILABLE, output  # an answer not of the spec's shape
    assert "60 unknown fields" in output and "VISIBILITY_MAX_NEW_COLUMNS=50" in output

    code, output, _ = sync_through(tmp_path, sandbox, 60, ONE_DAY, VISIBILITY_MAX_NEW_COLUMNS="60")
    assert code == EXIT_OK, output
    columns, rows = mentions_table(tmp_path)
    declared = [c.name for c in tables.PROMPT_MENTIONS.columns]
    new = [c for c in columns if c not in declared and not c.startswith("_")]  # not _loaded_at, _run_id
    assert new == [f"f{k:04d}" for k in range(60)] and rows
