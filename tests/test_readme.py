"""The README's two commands are the project's contract with a new user and with CI."""

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
