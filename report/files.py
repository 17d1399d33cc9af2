"""Writing a rendered report to disk, for the CLI and the asset alike.

Written to a temporary file next to the target, then renamed over it: a browser or the Dagster UI
opening the path while a new report is written sees the old report or the new one, never half a PNG.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from report.data import ReportData
from report.render import render_html, render_png

#: What the output's suffix selects: a self-contained HTML page (PNG embedded) or the PNG alone.
HTML_SUFFIXES = (".html", ".htm")
PNG_SUFFIXES = (".png",)


def is_report_path(path: Path) -> bool:
    return path.suffix.lower() in (*HTML_SUFFIXES, *PNG_SUFFIXES)


def report_bytes(data: ReportData, path: Path, png: bytes | None = None) -> bytes:
    """The file's content for ``path``'s suffix; ``png`` reuses an image already rendered."""
    suffix = path.suffix.lower()
    if suffix not in (*HTML_SUFFIXES, *PNG_SUFFIXES):
        raise ValueError(f"{path}: a report is written as .html or .png, not {suffix or 'no suffix'!r}")
    png = png if png is not None else render_png(data)
    return render_html(data, png).encode("utf-8") if suffix in HTML_SUFFIXES else png


def write_report(path: Path, data: ReportData, png: bytes | None = None) -> int:
    """Write the report (HTML or PNG by suffix), creating the folder; returns the bytes written."""
    content = report_bytes(data, path, png)
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
