"""The code blocks of README.md, docs/ and deploy/README.md as a user reads them: a test runs a block
by its first line."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The documents a user follows, relative to the repository.
DOCUMENTS = (
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
    "deploy/README.md",
)
#: The languages of blocks a user runs (SQL blocks are docs/TABLES.md's examples, generated and run
#: by tests/warehouse/test_dictionary.py; JSON and YAML are shown, not run).
RUNNABLE = ("bash", "python")


@dataclass(frozen=True)
class DocBlock:
    document: str
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0]

    def lines(self) -> list[str]:
        """Its commands: the lines that are neither blank nor a comment."""
        return [line for line in self.text.splitlines() if line.strip() and not line.startswith("#")]


def blocks(document: str) -> list[DocBlock]:
    text = (ROOT / document).read_text()
    found = re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)
    # a block in a list item is indented as the item is: its commands are not
    return [DocBlock(document, lang, textwrap.dedent(body)) for lang, body in found]


def doc_block(document: str, first_line: str) -> DocBlock:
    """The block of ``document`` that opens with ``first_line`` (exactly one)."""
    [block] = [b for b in blocks(document) if b.first_line.startswith(first_line)]
    return block
