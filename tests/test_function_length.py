"""Readable at a glance: no function of the product is longer than a screen (80 lines).

A longer one mixes steps that read better as named helpers; read from each file's syntax tree, so a
decorator, docstring and body all count.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("assets", "pipelines", "resources", "sync", "report", "settings.py")
MAX_LINES = 80


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
    ]


def test_no_product_function_is_longer_than_80_lines() -> None:
    files = [ROOT / "settings.py"] + [p for name in PRODUCT[:-1] for p in (ROOT / name).rglob("*.py")]
    assert len(files) > 50, "the product's modules were not found"
    too_long = [
        f"{where}: {lines} lines" for f in files for where, lines in _functions(f) if lines > MAX_LINES
    ]
    assert not too_long, "\n".join(too_long)
