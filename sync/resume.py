"""Resume a killed or failed sync: the calls already answered stay on disk and are not asked again.

A fetch journals the rows of its completed calls (already validated, converted and filtered to the
run's cells) in a directory owned by its *selection*: the table and its columns, the cells, the brand
filter, the citation targets, the API's URL and a keyed hash of the key (never the key). Re-running
the same command, or re-executing the failed Dagster run, plans the same calls, reloads the
journalled ones and asks only the rest (bench/RESULTS.md, *Resume*).

Where: under the Dagster instance's storage directory (``visibility_resume``) for a recorded
instance, and under ``TMPDIR`` (``visibility-resume-<uid>``) for the command line's throwaway one.
How long: a journal older than ``KEEP_SECONDS`` is never used, and is removed by the next store
opened on that root; a step that landed every table removes its journals
(:meth:`ResumeStore.finish`). What is trusted: a manifest line is used only whole (one JSON line
written after its file), its file only when its size, CRC-32 and row count match and every call it
holds is one the new plan asks; anything else is dropped and those calls are asked again. Two
processes with the same selection at once: the second fetches without a journal (a lock file).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.ipc as ipc

from resources.warehouse.base import TableSpec
from sync.planning import Call, Cell

#: Bumped when what a journal holds changes: older journals are then never read.
FORMAT = 1
#: A journal is used for this long after its fetch started (the rows are that old at most).
KEEP_SECONDS = 24 * 3600
#: Under a recorded Dagster instance's storage directory.
RESUME_DIR = "visibility_resume"
#: Under ``TMPDIR`` when the instance is a throwaway one (the command line without ``DAGSTER_HOME``).
TEMP_PREFIX = "visibility-resume-"
MANIFEST = "manifest.jsonl"
SELECTION = "selection.json"
LOCK = "lock"


def resume_root(storage_directory: str | None) -> Path:
    """The root of the resumable fetches: the instance's storage, or the temp folder without one."""
    if storage_directory:
        return Path(storage_directory) / RESUME_DIR
    return Path(tempfile.gettempdir()) / f"{TEMP_PREFIX}{os.getuid()}"


def call_key(call: Call) -> str:
    """A stable name of one call (its endpoint and every parameter)."""
    text = "|".join(
        str(v)
        for v in (
            call.endpoint,
            call.brand_id,
            call.window.start,
            call.window.end,
            call.engine,
            call.prompt_id,
            call.domain,
            call.url,
            call.topic_id,
            call.granularity,
        )
    )
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def selection_id(
    spec: TableSpec,
    cells: Iterable[Cell],
    only: Sequence[str],
    targets: Any,
    base_url: str,
    key_fingerprint: str,
) -> str:
    """The name of one selection's journal: a hash of everything that decides its rows."""
    parts = {
        "format": FORMAT,
        "table": spec.name,
        "columns": [[c.name, str(c.type)] for c in spec.arrow_schema],
        "cells": sorted([d.isoformat(), e] for d, e in cells),
        "only": sorted(only),
        "targets": repr(targets),
        "api": base_url,
        "key": key_fingerprint,
    }
    text = json.dumps(parts, sort_keys=True)
    return f"{spec.name}-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


class CallJournal:
    """The journal of one selection: files of rows, and a manifest naming the calls each holds."""

    def __init__(self, directory: Path, lock: IO[bytes]) -> None:
        self.directory = directory
        self._lock = lock
        self._written = len(list(directory.glob("part-*.arrow")))
        #: what :meth:`load` found unusable (for the log)
        self.dropped = 0

    def load(self, wanted: set[str]) -> tuple[set[str], list[pa.Table]]:
        """The calls already answered (of ``wanted``), and their rows: only entries that check out."""
        done: set[str] = set()
        tables: list[pa.Table] = []
        path = self.directory / MANIFEST
        if not path.exists():
            return done, tables
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
                keys = set(entry["calls"])
            except (ValueError, KeyError, TypeError):
                self.dropped += 1
                continue
            if not keys <= wanted or keys & done:
                self.dropped += 1
                continue
            table = self._read(entry)
            if table is None:
                self.dropped += 1
                continue
            done |= keys
            if table.num_rows:
                tables.append(table)
        return done, tables

    def _read(self, entry: dict[str, Any]) -> pa.Table | None:
        if entry.get("file") is None:
            return pa.table({}) if entry.get("rows") == 0 else None
        try:
            data = (self.directory / Path(entry["file"]).name).read_bytes()
            if len(data) != entry["size"] or zlib.crc32(data) != entry["crc32"]:
                return None
            table = ipc.open_file(pa.BufferReader(data)).read_all()
        except (OSError, KeyError, TypeError, pa.ArrowInvalid):
            return None
        return table if table.num_rows == entry["rows"] else None

    def record(self, table: pa.Table, keys: Sequence[str]) -> None:
        """Keep ``table``, the rows of the completed calls ``keys`` (file first, then its manifest line)."""
        if not keys:
            return
        entry: dict[str, Any] = {"calls": list(keys), "rows": table.num_rows, "file": None}
        if table.num_rows:
            sink = pa.BufferOutputStream()
            with ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            data = sink.getvalue().to_pybytes()
            name = f"part-{os.getpid()}-{self._written:06d}.arrow"
            self._written += 1
            tmp = self.directory / f".{name}.tmp"
            tmp.write_bytes(data)
            tmp.replace(self.directory / name)
            entry.update(file=name, size=len(data), crc32=zlib.crc32(data))
        with (self.directory / MANIFEST).open("a") as out:
            out.write(json.dumps(entry) + "\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class ResumeStore:
    """The journals of one root; :meth:`finish` removes the ones opened here, once all landed."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._opened: list[CallJournal] = []

    def journal(self, selection: str) -> CallJournal | None:
        """The selection's journal, locked for this fetch; None when another process holds it or the
        folder cannot be written (the fetch then runs without one)."""
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            sweep_expired(self.root)
            directory = self.root / selection
            directory.mkdir(mode=0o700, exist_ok=True)
            lock = (directory / LOCK).open("a+b")
        except OSError:
            return None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            return None
        if _expired(directory):
            for leftover in directory.iterdir():
                if leftover.name != LOCK:
                    with contextlib.suppress(OSError):
                        leftover.unlink()
        if not (directory / SELECTION).exists():
            (directory / SELECTION).write_text(json.dumps({"format": FORMAT, "created": time.time()}))
        journal = CallJournal(directory, lock)
        self._opened.append(journal)
        return journal

    def release(self) -> None:
        """Let the journals go, kept on disk (the step did not land everything)."""
        for journal in self._opened:
            journal.close()
        self._opened.clear()

    def finish(self) -> None:
        """Remove the journals opened here: their rows have landed."""
        for journal in self._opened:
            journal.remove()
        self._opened.clear()
        with contextlib.suppress(OSError):
            self.root.rmdir()  # only when empty


def _expired(directory: Path, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    try:
        selection = json.loads((directory / SELECTION).read_text())
        return now - float(selection["created"]) > KEEP_SECONDS or selection["format"] != FORMAT
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError):
        return True


def sweep_expired(root: Path, now: float | None = None) -> list[Path]:
    """Remove the journals older than ``KEEP_SECONDS`` that no process holds."""
    removed: list[Path] = []
    for path in root.iterdir():
        if not path.is_dir() or not _expired(path, now):
            continue
        try:
            with (path / LOCK).open("a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        except OSError:
            continue
    return removed


def remaining_calls(calls: Sequence[Call], done: set[str]) -> tuple[Call, ...]:
    return tuple(c for c in calls if call_key(c) not in done)
