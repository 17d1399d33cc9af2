"""Writing a rendered report to disk, for the CLI and the asset alike: to a temporary file renamed
over the target, so a browser or the UI opening it sees the old report or the new one, never half.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from report.data import ReportData
from report.render import render_html, render_png

HTML_SUFFIXES = (".html", ".htm")


def is_report_path(path: Path) -> bool:
    return path.suffix.lower() in (*HTML_SUFFIXES, ".png")


def write_report(path: Path, data: ReportData, png: bytes | None = None) -> int:
    """Write the report, a self-contained HTML page (PNG embedded) or the PNG alone by ``path``'s
    suffix (the CLI checks it), creating the folder; ``png`` reuses an image already rendered.
    Returns the bytes written."""
    png = png if png is not None else render_png(data)
    content = render_html(data, png).encode("utf-8") if path.suffix.lower() in HTML_SUFFIXES else png
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the report from the user's other tools
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(content)
