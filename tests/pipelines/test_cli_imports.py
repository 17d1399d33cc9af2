"""The command line's modules form no circle: the subcommands, the consoles and exit codes, and the
set-up of a run import nothing back from ``pipelines/cli.py``, at module level or inside a function."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The modules ``pipelines/cli.py`` imports its subcommands and shared parts from.
CLI_PARTS = sorted(p for p in (ROOT / "pipelines").glob("cli_*.py"))


def _names_the_cli(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name == "pipelines.cli" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        from_pipelines = node.module == "pipelines" and any(alias.name == "cli" for alias in node.names)
        return node.module == "pipelines.cli" or from_pipelines
    return False


def _imports_of_the_cli(tree: ast.Module) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if _names_the_cli(node)]


def test_no_part_of_the_command_line_imports_pipelines_cli() -> None:
    names = {path.stem for path in CLI_PARTS}
    assert {"cli_operations", "cli_output", "cli_setup"} <= names  # the scan found them
    back = {
        path.name: lines
        for path in CLI_PARTS
        if (lines := _imports_of_the_cli(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert back == {}, f"import pipelines.cli back: {back}"


def test_importing_the_subcommands_loads_no_pipelines_cli() -> None:
    code = (
        "import sys, pipelines.cli_operations, pipelines.cli_output, "
        "pipelines.cli_setup; print('pipelines.cli' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300, check=True
    )
    assert result.stdout.strip() == "False"
