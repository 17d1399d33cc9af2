"""The warehouse's modules import each other in one direction: no circle, none hidden in a function.

Read from the source (no import runs), so a circle fails here even where import order would hide it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "resources.warehouse"
FOLDER = Path(__file__).resolve().parents[2] / "resources" / "warehouse"
#: where a function imports an engine on purpose: only the engine a URL names is loaded
LAZY_ENGINE_IMPORTS = {"urls": {"duckdb", "postgres", "bigquery"}}


def _warehouse_module(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        if node.module == PACKAGE:
            return [alias.name for alias in node.names]
        if node.module and node.module.startswith(PACKAGE + "."):
            return [node.module.split(".")[2]]
        return []
    return [a.name.split(".")[2] for a in node.names if a.name.startswith(PACKAGE + ".")]


def _imports() -> dict[str, tuple[set[str], set[str]]]:
    """Each module: the warehouse modules it imports at its top level (``if TYPE_CHECKING:`` blocks
    included: a circle of annotations is still a circle), and inside functions."""
    found = {}
    for path in sorted(FOLDER.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top: set[str] = set()
        for statement in tree.body:
            for node in statement.body if isinstance(statement, ast.If) else [statement]:
                if isinstance(node, ast.Import | ast.ImportFrom):
                    top.update(_warehouse_module(node))
        every = {
            name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for name in _warehouse_module(node)
        }
        found[path.stem] = (top, every - top)
    return found


def test_the_warehouse_modules_import_each_other_without_a_circle() -> None:
    graph = {module: top for module, (top, _) in _imports().items()}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import circle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for imported in graph.get(module, ()):
            visit(imported, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert graph["contract"] == set(), "the contract builds on no other warehouse module"


def test_no_function_imports_a_warehouse_module_except_the_engine_choice() -> None:
    hidden = {module: inner for module, (_, inner) in _imports().items() if inner}
    assert hidden == LAZY_ENGINE_IMPORTS
