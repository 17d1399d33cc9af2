"""A service that echoes the key, whole or in base64 or hex, in its rows and in a 400's message: a
recorded sync lands none of it in the warehouse nor in Dagster's run database; a brand whose name
holds eight characters of the key is found by that name (``visibility-sync`` as a process, through
a rewriting proxy on loopback in front of the sandbox)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import duckdb

from pipelines.cli_output import EXIT_PARTIAL
from sandbox.testing import SandboxHandle
from tests.api.proxies import Seen, fake_service, forwarding
from tests.pipelines.test_exit_codes import ONE_DAY, cli_env, run_cli


def test_a_key_echoed_in_rows_and_a_400_reaches_neither_the_warehouse_nor_the_run_database(
    tmp_path: Path, sandbox: SandboxHandle
) -> None:
    key = sandbox.keys["workspace"]
    forms = {"plain": key, "base64": base64.b64encode(key.encode()).decode(), "hex": key.encode().hex()}

    def echo(seen: Seen, status: int, body: Any) -> tuple[int, dict[str, str], Any]:
        if seen.path.endswith("/citations/trends"):
            message = f"key {forms['base64']} ({forms['hex']}) may not ask for this"
            return 400, {}, {"error": {"code": "invalid_request", "message": message}}
        data = body.get("data") if isinstance(body, dict) else None
        for row in data if isinstance(data, list) else [data] if isinstance(data, dict) else []:
            row.update(echo_plain=f"sent with {key}", echo_base64=forms["base64"])
        return status, {}, body

    home = tmp_path / "dagster_home"
    home.mkdir()
    with fake_service(forwarding(sandbox.url, echo)) as proxy:
        env = cli_env(tmp_path, proxy.url, key, DAGSTER_HOME=str(home), VISIBILITY_START_DATE="2026-10-01")
        code, output = run_cli(["run", *ONE_DAY], env)
    assert code == EXIT_PARTIAL, output
    assert "citations/trends" in output and "[redacted]" in output

    with duckdb.connect(str(tmp_path / "exit.duckdb"), read_only=True) as db:
        tables = [row[0] for row in db.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        landed = {name: repr(db.execute(f'SELECT * FROM visibility."{name}"').fetchall()) for name in tables}
    assert any("sent with [redacted]" in text for text in landed.values())
    stored = [*landed.values(), *(p.read_bytes().decode("latin-1") for p in home.rglob("*") if p.is_file())]
    for form, text in forms.items():
        assert not any(text in blob for blob in stored), f"the key ({form}) was stored"


def test_run_brand_finds_a_brand_whose_name_holds_eight_characters_of_the_key(
    tmp_path: Path, sandbox: SandboxHandle
) -> None:
    """The name is compared as the service spells it; only what is printed is scrubbed."""
    key = sandbox.keys["workspace"]
    brand = sandbox.world.brands[0]
    name = f"Echo Wise FP{key.removeprefix('vsk_')[:8]}FP"

    def rename(seen: Seen, status: int, body: Any) -> tuple[int, dict[str, str], Any]:
        data = body.get("data") if isinstance(body, dict) else None
        for row in data if isinstance(data, list) else [data] if isinstance(data, dict) else []:
            if row.get("id") == brand.id and "name" in row:
                row["name"] = name
        return status, {}, body

    with fake_service(forwarding(sandbox.url, rename)) as proxy:
        env = cli_env(tmp_path, proxy.url, key, VISIBILITY_START_DATE="2026-10-01")
        code, output = run_cli(["run", "--brand", name, *ONE_DAY], env)
    assert code == 0, output
    assert key.removeprefix("vsk_")[:8] not in output
