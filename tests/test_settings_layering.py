"""Settings in their layer, read from the source: the layers below ``pipelines/`` neither import
it nor read the environment, ``settings.py`` imports no Dagster, and every default and the list of
warehouse schemes live in one place."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from resources.warehouse.resource import WarehouseResource
from resources.warehouse.urls import WAREHOUSE_SCHEMES
from settings import Settings

ROOT = Path(__file__).resolve().parents[1]
#: Layers below pipelines/.
LOWER_LAYERS = ("assets", "resources", "sync", "report")
CODE = ("settings.py", "assets", "pipelines", "resources", "sync", "report")


def _modules(*places: str) -> Iterator[tuple[Path, ast.Module]]:
    for place in places:
        path = ROOT / place
        files = [path] if path.is_file() else sorted(path.rglob("*.py")) if path.is_dir() else []
        for file in files:
            yield file, ast.parse(file.read_text(encoding="utf-8"), filename=str(file))


def _imported(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


_ENV_NAMES = frozenset({"environ", "environb", "getenv", "putenv", "unsetenv"})


def _environment_reads(tree: ast.Module) -> Iterator[int]:
    """Lines that touch ``os.environ`` / ``os.getenv`` (or import them from ``os``)."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in _ENV_NAMES
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            yield node.lineno
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and _ENV_NAMES & {a.name for a in node.names}
        ):
            yield node.lineno


def _relative(file: Path) -> str:
    return str(file.relative_to(ROOT))


def test_no_lower_layer_imports_pipelines_or_reads_the_environment() -> None:
    seen = 0
    upward: list[str] = []
    reads: list[str] = []
    for file, tree in _modules(*LOWER_LAYERS):
        seen += 1
        upward += [f"{_relative(file)}: {m}" for m in _imported(tree) if m.split(".")[0] == "pipelines"]
        reads += [f"{_relative(file)}:{line}" for line in _environment_reads(tree)]
    assert seen > 40  # the scan found the modules
    assert not upward, f"imports from pipelines/ below it: {upward}"
    assert not reads, f"environment read below pipelines/ (use settings.py): {reads}"


def test_the_scan_finds_an_environment_read_and_an_upward_import() -> None:
    tree = ast.parse("import os\nfrom pipelines.config import Settings\nx = os.environ.get('X')\n")
    assert list(_environment_reads(tree)) == [3]
    assert "pipelines.config" in set(_imported(tree))


def test_settings_is_the_ground_floor_and_dagster_free() -> None:
    ((_, tree),) = _modules("settings.py")
    roots = {m.split(".")[0] for m in _imported(tree)}
    assert not roots & {"assets", "pipelines", "dagster", "sync"}, roots
    code = "import sys, settings; print(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster'))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_only_settings_reads_visibility_variables_from_the_environment() -> None:
    found: list[str] = []
    for file, tree in _modules(*CODE):
        if file.name == "settings.py" and file.parent == ROOT:
            continue
        for node in ast.walk(tree):
            key = None
            if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                reads_env = node.func.attr in {"get", "getenv", "pop"} and (
                    (isinstance(owner, ast.Attribute) and owner.attr == "environ")
                    or (isinstance(owner, ast.Name) and owner.id == "os")
                )
                key = node.args[0] if reads_env else None
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
                key = node.slice if node.value.attr == "environ" else None
            if isinstance(key, ast.Constant) and str(key.value).startswith("VISIBILITY_"):
                found.append(f"{_relative(file)}:{node.lineno} {key.value}")
    assert not found, found


def test_every_default_is_defined_once() -> None:
    assigned: Counter[str] = Counter()
    literal: Counter[str] = Counter()
    for file, tree in _modules(*CODE):
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if isinstance(target, ast.Name) and target.id.startswith("DEFAULT_"):
                    assigned[target.id] += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in ("duckdb:///data/visibility.duckdb", "64MB"):
                literal[f"{node.value} in {_relative(file)}"] += 1
    assert assigned["DEFAULT_WAREHOUSE_URL"] == 1 and assigned["DEFAULT_LOOKBACK_DAYS"] == 1
    assert [name for name, count in assigned.items() if count > 1] == []
    assert sorted(literal) == [
        "64MB in resources/warehouse/urls.py",
        "duckdb:///data/visibility.duckdb in resources/warehouse/urls.py",
    ]


def test_the_warehouse_schemes_are_listed_once() -> None:
    lists: list[str] = []
    for file, tree in _modules(*CODE):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                names = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if len(names & set(WAREHOUSE_SCHEMES)) >= 2:
                    lists.append(_relative(file))
    assert set(lists) == {"resources/warehouse/urls.py"}


@pytest.mark.parametrize(
    ("resource_default", "settings_default"),
    [
        (WarehouseResource.model_fields["url"].default, Settings.model_fields["warehouse_url"].default),
        (WarehouseResource.model_fields["schema_name"].default, Settings.model_fields["schema_name"].default),
        (
            WarehouseResource.model_fields["duckdb_landing_memory_limit"].default,
            Settings.model_fields["duckdb_memory_limit"].default,
        ),
    ],
)
def test_the_resources_default_to_the_settings_defaults(
    resource_default: object, settings_default: object
) -> None:
    assert resource_default == settings_default


def test_the_sync_core_imports_neither_dagster_nor_the_layers_above_it() -> None:
    """``sync/`` is the Dagster-free core: assets/ and pipelines/ build on it, never the reverse."""
    above = {"dagster", "dagster_webserver", "assets", "pipelines", "report"}
    found = {
        f"{_relative(file)}: {name}"
        for file, tree in _modules("sync")
        for name in _imported(tree)
        if name.split(".")[0] in above
    }
    assert found == set(), f"the core imports from above it: {sorted(found)}"


def test_resources_import_nothing_from_the_layers_above_them() -> None:
    """The API client and the warehouse engines serve the core; they never reach back into it."""
    above = {"sync", "assets", "pipelines", "report"}
    found = {
        f"{_relative(file)}: {name}"
        for file, tree in _modules("resources")
        for name in _imported(tree)
        if name.split(".")[0] in above
    }
    assert found == set(), f"resources/ imports from above it: {sorted(found)}"


_LOADS_THE_CORE = """
import pkgutil, sys, importlib
import sync
for info in pkgutil.iter_modules(sync.__path__):
    importlib.import_module(f"sync.{{info.name}}")
# then a real warehouse opened for a landing, as the driver opens it
from resources.warehouse.urls import warehouse_for
from sync.catalog import ALL_TABLES
config = {{"url": "duckdb:///{db}", "schema_name": "visibility", "lock_timeout_seconds": 30.0,
          "duckdb_landing_memory_limit": "1GB"}}
with warehouse_for(config, landing=True) as warehouse, warehouse.session():
    for spec in ALL_TABLES.values():
        warehouse.ensure_table(spec)
above = {{"dagster", "dagster_webserver", "assets", "pipelines"}}
loaded = sorted(name for name in sys.modules if name.split(".")[0] in above)
print(loaded)
"""


def test_the_sync_core_loads_no_dagster_however_deep(tmp_path: Path) -> None:
    """Follows imports transitively: every ``sync.*`` module, and what opening a warehouse for a
    landing imports and runs, in a fresh interpreter that must end without ``dagster`` loaded."""
    code = _LOADS_THE_CORE.format(db=tmp_path / "core.duckdb")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"the core loaded: {done.stdout.strip()}"
    assert (tmp_path / "core.duckdb").exists()  # the landing's path really ran
