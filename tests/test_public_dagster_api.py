"""Only Dagster's public API: no module of ``dagster._…`` (nor of its libraries' private modules) is
imported by the product or the benchmarks, and in the tests only where no public API does the job.

Private modules change in any Dagster release without notice; pyproject.toml requires a range of
releases, so code that imports one may break on the next patch. Read from each file's syntax tree:
``import dagster._x``, ``from dagster._x import y``, ``from dagster import _x``, and a string naming
a private module (``importlib.import_module("dagster._x")``, ``python -m dagster._x``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dagster", "dagster_graphql", "dagster_webserver", "dagster_postgres", "dagster_k8s")
PRIVATE = re.compile(rf"^({'|'.join(PACKAGES)})\._\w*(\.\w+)*$")
PRODUCT = ("assets", "pipelines", "resources", "sync", "report", "sandbox", "settings.py", "bench")

#: Tests that still import a private module, each with the reason no public API does the job.
#: A new private import in any other test (or another module in these) fails.
TESTS_ALLOWED: dict[str, dict[str, str]] = {
    "tests/assets/test_launch_shapes.py": {
        "dagster._core.execution.backfill": "records a job backfill (PartitionBackfill) without launching it",
    },
    "tests/report/test_report_sensor.py": {
        "dagster._core.execution.backfill": "records a backfill and sets its status (PartitionBackfill); "
        "the terminal statuses our own set must equal",
    },
    "tests/checks/test_freshness.py": {
        "dagster._core.definitions.freshness": "the freshness states the daemon records",
        "dagster._core.events": "a materialization stored at a chosen age (StepMaterializationData)",
        "dagster._core.instance.utils": "the run id of a run-less event",
        "dagster._core.remote_origin": "the code location the daemon evaluates, loaded in process",
        "dagster._core.test_utils": "the daemon's workspace context",
        "dagster._core.types.loadable_target_origin": "the code location the daemon evaluates",
        "dagster._daemon.freshness": "one iteration of the freshness daemon",
    },
    "tests/deploy/test_compose.py": {
        "dagster._core.workspace.config_schema": "the workspace YAML validated without a code server",
    },
    "tests/deploy/test_image.py": {
        "dagster._grpc.client": "asks the image's code server what it serves, as the webserver does",
    },
    "tests/deploy/test_production_instance.py": {
        "dagster._core.instance.config": "the instance YAML validated without connecting to Postgres",
    },
    "tests/pipelines/test_config_redaction.py": {
        "dagster._core.snap.mode": "the resource snapshot Dagster stores with each run",
    },
    "tests/pipelines/test_launch_matrix.py": {
        "dagster._core.instance.ref": "a running stack's instance opened while the test's command-line "
        "thread runs (DagsterInstance.get() reads the process-wide DAGSTER_HOME)",
    },
    "tests/pods.py": {
        "dagster._cli.api": "the arguments of `dagster api execute_run` a run launcher passes its run",
        "dagster._core.launcher.base": "the health result run monitoring asks a run launcher for",
    },
    "tests/pipelines/test_pod_backfill.py": {
        "dagster._core.instance.ref": "the running stack's instance opened to read a backfill as its runs do",
    },
    "tests/processes/test_orphans.py": {
        "dagster._core.test_utils": "records a run in a given status without executing it",
    },
}


def python_files(*names: str) -> Iterator[Path]:
    for name in names:
        path = ROOT / name
        if path.is_file():
            yield path
        else:
            yield from sorted(p for p in path.rglob("*.py") if ".venv" not in p.parts)


def private_imports(source: str) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every private Dagster module the source imports or names."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        else:
            continue
        for name in names:
            if PRIVATE.match(name):
                yield node.lineno, name
                break


def offences(files: Iterator[Path], allowed: dict[str, dict[str, str]]) -> list[str]:
    found = []
    for path in files:
        shown = path.relative_to(ROOT).as_posix()
        for line, name in private_imports(path.read_text(encoding="utf-8")):
            if not any(name == m or name.startswith(f"{m}.") for m in allowed.get(shown, {})):
                found.append(f"{shown}:{line}: {name}")
    return found


def test_the_product_and_benchmarks_import_no_private_dagster_module() -> None:
    assert offences(python_files(*PRODUCT), {}) == []


def test_tests_import_private_dagster_modules_only_where_no_public_api_exists() -> None:
    tests = (path for path in python_files("tests") if path != Path(__file__).resolve())
    assert offences(tests, TESTS_ALLOWED) == []


def test_every_form_of_a_private_import_is_found() -> None:
    source = "\n".join(
        [
            "import dagster._core.storage.tags",
            "from dagster._core.storage.tags import BACKFILL_ID_TAG",
            "from dagster import _check",
            "from dagster_graphql._schema import x",
            "import importlib; importlib.import_module('dagster_k8s._launcher')",
            "cmd = ['python', '-m', 'dagster._daemon', 'run']",
            "from dagster import asset, DagsterInstance",  # public: not found
            "from dagster_postgres import PostgresEventLogStorage",  # public: not found
            "note = 'see dagster._core for how it works'",  # prose, not a module name: not found
        ]
    )
    assert [line for line, _ in private_imports(source)] == [1, 2, 3, 4, 5, 6]
