"""`visibility-sync run --brand` takes a brand by id or by name, like the write commands."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from pipelines.cli import main
from pipelines.cli_output import EXIT_CONFIG, EXIT_OK, EXIT_PARTIAL
from resources.api.resource import VisibilityAPIResource
from sandbox.testing import SandboxHandle

ONE_DAY = ["--start", "2026-10-30", "--end", "2026-10-31", "--engine", "all", "--quiet"]


def brands(sandbox: SandboxHandle) -> dict[str, str]:
    api = VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"])
    with api.get_client() as client:
        return {str(b["name"]): str(b["id"]) for b in client.list_brands()}


def test_run_lands_only_the_brand_named(env: Path, sandbox: SandboxHandle) -> None:
    name, brand_id = sorted(brands(sandbox).items())[0]
    assert main(["run", *ONE_DAY, "--brand", f" {name.upper()} "]) == EXIT_OK  # names match as the writes'
    with duckdb.connect(str(env), read_only=True) as con:
        landed = {
            r[0] for r in con.execute("SELECT DISTINCT brand_id FROM visibility.competitor_trends").fetchall()
        }
    assert landed == {brand_id}


def test_an_unknown_brand_name_stops_the_run_before_it_naming_the_known_brands(
    env: Path, sandbox: SandboxHandle, capsys
) -> None:
    known = brands(sandbox)
    sandbox.reset_stats()
    assert main(["run", *ONE_DAY, "--brand", "No Such Brand"]) == EXIT_PARTIAL
    err = " ".join(capsys.readouterr().err.split())
    assert "No Such Brand" in err and all(f"'{n}'" in err for n in known)
    assert sandbox.stats() == {"GET /v1/brands": {"200": 1}}  # nothing synced
    if env.exists():
        with duckdb.connect(str(env), read_only=True) as con:
            tables = con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        assert ("competitor_trends",) not in tables


def test_several_brand_names_are_resolved_from_one_listing_of_the_brands(
    env: Path, sandbox: SandboxHandle
) -> None:
    name = sorted(brands(sandbox))[0]
    sandbox.reset_stats()
    argv = ["run", *ONE_DAY, "--brand", name, "--brand", name.lower(), "--brand", "No Such Brand"]
    assert main(argv) == EXIT_PARTIAL  # the unknown third name stops the run before it
    assert sandbox.stats() == {"GET /v1/brands": {"200": 1}}


def test_an_empty_brand_name_is_a_usage_error_before_any_request(
    env: Path, sandbox: SandboxHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    name = sorted(brands(sandbox))[0]
    sandbox.reset_stats()
    assert main(["run", *ONE_DAY, "--brand", name, "--brand", " "]) == EXIT_CONFIG
    assert "configuration error: the brand is empty" in capsys.readouterr().err
    assert sandbox.stats() == {}
