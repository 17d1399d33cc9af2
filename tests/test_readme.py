"""The README's two commands are the project's contract with a new user and with CI; every other block
of README.md, docs/ and deploy/README.md that a user runs is run as written by a test, or says why not."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return [line for block in blocks[:2] for line in block.splitlines() if line and not line.startswith("#")]


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    _, tests = _readme_commands()
    last_line = (ROOT / ".ci/run").read_text().strip().splitlines()[-1]
    assert last_line == tests
    assert "pytest" in tests


def test_the_readmes_first_command_sets_up_and_runs_the_demo() -> None:
    demo, _ = _readme_commands()
    assert demo.startswith("python3 -m venv .venv && ")
    assert demo.endswith("visibility-sync demo")


# --- every block a user runs, in README.md, docs/ and deploy/README.md -----------------------------

#: Blocks run as written by a test (document, first line -> the test file that reads and runs it).
RUN_BY = {
    ("README.md", "# 2. set up and run the tests"): "tests/test_readme.py",  # CI's command, above
    ("README.md", ".venv/bin/pip install -q -e '.[dbt]'"): "tests/pipelines/test_dbt_project.py",
    ("README.md", '.venv/bin/python -c "import duckdb;'): "tests/pipelines/test_dbt_project.py",
    ("docs/DOWNSTREAM.md", "# my_defs.py"): "tests/pipelines/test_downstream_doc.py",
    ("docs/DOWNSTREAM.md", ".venv/bin/dagster asset materialize"): "tests/pipelines/test_downstream_doc.py",
    ("deploy/README.md", "pip install '.[production]'"): "tests/deploy/test_production_instance.py",
}
#: Blocks no test runs as written, each with why: keep it short.
NOT_RUN = {
    ("README.md", "# 1. set up and run the demo"): "creates a venv and installs from PyPI (minutes); the "
    "demo it ends with runs in tests/pipelines/test_cli_first_run.py",
    ("README.md", "visibility-sync sandbox [--host"): "a synopsis of the options, not a command",
    ("README.md", "export DAGSTER_HOME="): "dagster dev serves until stopped; tests/ui drive it",
    ("README.md", ".venv/bin/python bench/run_all.py"): "minutes of benchmarks; tests run their parts",
    ("README.md", "VISIBILITY_TEST_BIGQUERY="): "needs real BigQuery credentials",
    ("docs/ARCHITECTURE.md", "ANSWER_POSITIONS_API = Endpoint("): "a catalog entry, not a program; "
    "tests/assets/test_table_in_one_place.py declares and lands it",
    ("docs/BIGQUERY.md", "gcloud auth application-default login"): "needs Google Cloud credentials",
    ("docs/OPERATIONS.md", "visibility-sync check"): "a list of commands against the service; each is "
    "run by tests/pipelines/test_cli*.py",
    ("docs/OPERATIONS.md", "export DAGSTER_HOME="): "dagster dev serves until stopped; tests/ui drive it",
    ("deploy/README.md", "docker build -f deploy/Dockerfile"): "needs a Docker daemon and a registry; "
    "tests/deploy/test_image.py builds the image where a daemon answers and runs its command here",
    ("deploy/README.md", "export DAGSTER_PG_PASSWORD=... VISIBILITY_API_URL"): "needs Docker Compose; "
    "tests/deploy/test_compose.py checks the file's services, mounts and settings",
    ("deploy/README.md", "kubectl create namespace dagster"): "needs a Kubernetes cluster; "
    "tests/deploy/test_helm_values.py checks the values read both secrets by these names and keys",
    ("deploy/README.md", "docker run --rm IMAGE pip show dagster"): "needs Docker, Helm and a cluster; "
    "tests/deploy/test_helm_values.py validates the values against the chart's schema",
}


def test_every_block_a_user_runs_is_run_by_a_test_or_says_why_not() -> None:
    from tests.doc_blocks import DOCUMENTS, RUNNABLE, blocks

    listed = [*RUN_BY, *NOT_RUN]
    runnable = [b for document in DOCUMENTS for b in blocks(document) if b.language in RUNNABLE]
    matched = {
        (doc, first): [b for b in runnable if b.document == doc and b.first_line.startswith(first)]
        for doc, first in listed
    }
    assert [k for k, found in matched.items() if len(found) != 1] == [], "an entry names no block, or two"
    accounted = {id(b) for found in matched.values() for b in found}
    unaccounted = [(b.document, b.first_line) for b in runnable if id(b) not in accounted]
    assert unaccounted == [], "run each in a test (RUN_BY) or say why not (NOT_RUN)"
    for test in set(RUN_BY.values()) - {"tests/test_readme.py"}:  # read from the document, not copied
        assert "doc_block(" in (ROOT / test).read_text(), test
