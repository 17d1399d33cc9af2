"""Resume a killed or failed sync: the calls already answered stay on disk and are not asked again.

A fetch journals the rows of its completed calls in a directory named after its *selection* (table,
columns, cells, brand filter, citation targets, API URL, new-column cap, spool bucket and a keyed
hash of the key), under the instance's storage (``visibility_resume``) or ``TMPDIR``, in a folder
private to this user. A re-run plans the same calls, reloads the journalled ones and asks only the
rest; the journal's files are also the fetch's spool (hard links). A manifest line is trusted only
whole, its files only when their sizes, CRC-32s and row counts match; a journal older than
``KEEP_SECONDS`` is dropped, and a step that landed every table removes its own
(:meth:`ResumeStore.finish`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.ipc as ipc

from resources.api.client import VisibilityClient
from resources.warehouse.contract import TableSpec
from sync.planning import Call, Cell
from sync.private_dir import lock_folder, open_private, private_folder, sweep, unlock

#: Bumped when what a journal holds changes: older journals are then never read.
FORMAT = 3
#: A journal is used for this long after its fetch started (the rows are that old at most).
KEEP_SECONDS = 24 * 3600
#: Under a recorded Dagster instance's storage directory.
RESUME_DIR = "visibility_resume"
#: Under ``TMPDIR`` when the instance is a throwaway one (the command line without ``DAGSTER_HOME``).
TEMP_PREFIX = "visibility-resume-"
MANIFEST = "manifest.jsonl"
SELECTION = "selection.json"


def resume_root(storage_directory: str | None) -> Path:
    """The root of the resumable fetches: the instance's storage, or the temp folder without one."""
    if storage_directory:
        return Path(storage_directory) / RESUME_DIR
    return Path(tempfile.gettempdir()) / f"{TEMP_PREFIX}{os.getuid()}"


def call_key(call: Call) -> str:
    """A stable name of one call (its endpoint and every parameter)."""
    c, w = call, call.window  # one f-string: a third of the cost of joining str() of each field
    text = (
        f"{c.endpoint}|{c.brand_id}|{w.start}|{w.end}|{c.engine}|{c.prompt_id}|{c.domain}|{c.url}|"
        f"{c.topic_id}|{c.granularity}"
    )
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def selection_id(
    spec: TableSpec,
    cells: Iterable[Cell],
    only: Sequence[str],
    targets: Any,
    client: VisibilityClient,
    days_per_bucket: int,
) -> str:
    """The name of one selection's journal: a hash of everything that decides its rows (a lowered
    new-column cap asks again, so its check sees every row) and the spool buckets of its files."""
    parts = {
        "format": FORMAT,
        "table": spec.name,
        "columns": [[c.name, str(c.type)] for c in spec.arrow_schema],
        "cells": sorted([d.isoformat(), e] for d, e in cells),
        "only": sorted(only),
        "targets": repr(targets),
        "api": client.base_url,
        "key": client.key_fingerprint,
        "max_new_columns": client.max_new_columns,
        "days_per_bucket": days_per_bucket,
    }
    text = json.dumps(parts, sort_keys=True)
    return f"{spec.name}-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


#: Rows to keep, split by spool bucket: ``(bucket, rows)`` (:meth:`sync.spool.DateSpool.split`).
Pieces = Sequence[tuple[int, pa.Table]]


@dataclass(frozen=True)
class JournalPart:
    """One checked file of kept rows, all in one spool bucket: the spool takes the file itself."""

    path: Path
    num_rows: int
    bucket: int


@dataclass(frozen=True)
class ResumePoint:
    """A paged call a killed fetch had partly read: its rows up to ``cursor`` are kept."""

    cursor: str
    #: partial entries kept for the call (the next one written is numbered so)
    parts: int


class CallJournal:
    """The journal of one selection: files of rows, and a manifest naming the calls each entry holds.

    A complete entry holds the rows of whole calls (``calls``), the last rows of a call whose
    earlier rows are in its ``parts`` partial entries. A partial entry holds the rows of one paged
    call from cursor ``from`` to cursor ``cursor`` (its ``seq``-th part). An entry's rows are in its
    ``files``, one per spool bucket: the fetch's spool takes the files themselves
    (:meth:`sync.spool.DateSpool.adopt`) instead of writing the rows again. One writer at a time
    (the fetch's batch holds its lock while it records).
    """

    def __init__(self, directory: Path, lock: IO[bytes]) -> None:
        self.directory = directory
        self._lock = lock
        self._written = len(list(directory.glob("part-*.arrow")))
        #: what :meth:`load` found unusable (for the log)
        self.dropped = 0
        #: why the fetch stopped journalling (a write failed: the disk full), if it did
        self.write_error: str | None = None

    def _entries(self) -> list[dict[str, Any]]:
        path = self.directory / MANIFEST
        entries: list[dict[str, Any]] = []
        if not path.exists():
            return entries
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict) or not ("calls" in entry or "partial" in entry):
                    raise ValueError(line)
            except ValueError:
                self.dropped += 1  # a line torn by a kill
                continue
            entries.append(entry)
        return entries

    def load(self, wanted: set[str]) -> tuple[set[str], list[JournalPart], dict[str, ResumePoint]]:
        """The calls already answered (of ``wanted``), the files of the rows kept, and where to resume
        partly read calls: only entries that check out."""
        partials: dict[str, dict[int, dict[str, Any]]] = {}
        completes: list[dict[str, Any]] = []
        for entry in self._entries():
            if "partial" not in entry:
                completes.append(entry)
            elif isinstance(entry.get("seq"), int):
                partials.setdefault(str(entry["partial"]), {})[entry["seq"]] = entry  # last wins
        #: per partly read call, its parts that check out and continue each other: (cursor, files)
        chains: dict[str, list[tuple[str, list[JournalPart]]]] = {}
        for key, parts in partials.items():
            chain: list[tuple[str, list[JournalPart]]] = []
            while key in wanted and len(chain) in parts:
                entry = parts[len(chain)]
                files = self._read(entry)
                previous = chain[-1][0] if chain else None
                if files is None or entry.get("from") != previous or not isinstance(entry.get("cursor"), str):
                    break
                chain.append((entry["cursor"], files))
            chains[key] = chain
        done: set[str] = set()
        tables: list[JournalPart] = []
        for entry in completes:
            try:
                keys = {str(k) for k in entry["calls"]}
                parts_of = {str(k): int(v) for k, v in (entry.get("parts") or {}).items()}
            except (KeyError, TypeError, ValueError):
                self.dropped += 1
                continue
            whole = all(len(chains.get(k, [])) >= n for k, n in parts_of.items())
            files = self._read(entry) if keys <= wanted and not keys & done and whole else None
            if files is None:
                self.dropped += 1
                continue
            done |= keys
            tables.extend(p for k in keys for _, ps in chains.get(k, [])[: parts_of.get(k, 0)] for p in ps)
            tables.extend(files)
        points: dict[str, ResumePoint] = {}
        for key, chain in chains.items():
            if key in done or not chain:
                continue
            tables.extend(p for _, ps in chain for p in ps)
            points[key] = ResumePoint(chain[-1][0], len(chain))
        return done, [t for t in tables if t.num_rows], points

    def _read(self, entry: dict[str, Any]) -> list[JournalPart] | None:
        """The entry's files, when each has its recorded size, CRC-32, rows and bucket and they hold
        the entry's rows; else None."""
        parts: list[JournalPart] = []
        try:
            for record in entry["files"]:
                path = self.directory / Path(record["file"]).name
                with open_private(path, "rb") as source:
                    data = source.read()  # one spool bucket's piece of one batch
                if (len(data), zlib.crc32(data)) != (record["size"], record["crc32"]):
                    return None
                rows = ipc.open_file(pa.py_buffer(data)).count_rows()
                if rows != record["rows"] or not isinstance(record["bucket"], int):
                    return None
                parts.append(JournalPart(path, rows, record["bucket"]))
        except (OSError, KeyError, TypeError, ValueError, pa.ArrowInvalid):
            return None
        return parts if sum(p.num_rows for p in parts) == entry.get("rows") else None

    def record(
        self, pieces: Pieces, keys: Sequence[str], parts: dict[str, int] | None = None
    ) -> list[JournalPart]:
        """Keep ``pieces``, the (last) rows of the completed calls ``keys``, files first, then their
        line; the files written are returned, for the spool to take."""
        entry = {"calls": list(keys), "parts": {k: n for k, n in (parts or {}).items() if n}}
        return self._write(pieces, entry)

    def record_part(
        self, key: str, seq: int, pieces: Pieces, start: str | None, cursor: str
    ) -> list[JournalPart]:
        """Keep the rows one paged call read from cursor ``start`` (None: its first page) to ``cursor``."""
        return self._write(pieces, {"partial": key, "seq": seq, "from": start, "cursor": cursor})

    def _write(self, pieces: Pieces, entry: dict[str, Any]) -> list[JournalPart]:
        written: list[JournalPart] = []
        files: list[dict[str, Any]] = []
        for bucket, table in pieces:
            if not table.num_rows:
                continue
            name = f"part-{os.getpid()}-{self._written:06d}.arrow"
            self._written += 1
            tmp, path = self.directory / f".{name}.tmp", self.directory / name
            sink = pa.BufferOutputStream()  # one piece of a batch: checksummed before it is written
            with ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            data = sink.getvalue()
            try:
                with open_private(tmp, "wb") as out:
                    out.write(data)
                tmp.replace(path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            files.append(
                {
                    "file": name,
                    "size": data.size,
                    "crc32": zlib.crc32(data),
                    "rows": table.num_rows,
                    "bucket": bucket,
                }
            )
            written.append(JournalPart(path, table.num_rows, bucket))
        entry.update(rows=sum(p.num_rows for p in written), files=files)
        with open_private(self.directory / MANIFEST, "ab") as manifest:
            manifest.write(json.dumps(entry).encode() + b"\n")
        return written

    def close(self) -> None:
        """Let the journal go (the fetch ended): kept on disk for a re-run, or :meth:`ResumeStore.finish`."""
        if self._lock.closed:
            return
        if not (self.directory / MANIFEST).exists():  # nothing kept: nothing to leave behind
            shutil.rmtree(self.directory, ignore_errors=True)
        unlock(self._lock)


class ResumeStore:
    """The journals of one root; :meth:`finish` removes the ones opened here, once all landed.

    A journal is locked while its fetch runs only (:meth:`CallJournal.close`), so a step that ends
    any other way (a failure, a stop) holds nothing: the next attempt, in this process or another,
    takes it up.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._opened: list[Path] = []

    def journal(self, selection: str) -> CallJournal | None:
        """The selection's journal, locked for this fetch; None when another process holds it or the
        folder cannot be written (the fetch then runs without one)."""
        directory = self.root / selection
        lock = self._locked(directory)
        if lock is None:
            return None
        try:  # an expired journal no one held was swept before it was locked (_locked)
            if not (directory / SELECTION).exists():
                with open_private(directory / SELECTION, "wb") as selection:
                    selection.write(json.dumps({"format": FORMAT, "created": time.time()}).encode())
        except OSError:
            lock.close()  # closing it lets the lock go
            return None
        self._opened.append(directory)
        return CallJournal(directory, lock)

    def _locked(self, directory: Path) -> IO[bytes] | None:
        """``directory``, made if need be, and its lock; None when another process holds it.

        Another process's sweep may remove a folder it finds without a manifest between this
        process's making it and locking it (runs of one user share the root): it is made again."""
        setting = "DAGSTER_HOME" if self.root.name == RESUME_DIR else "TMPDIR"  # what moves the root
        for _ in range(3):
            try:
                private_folder(self.root, setting)
                sweep_expired(self.root)
                private_folder(directory, setting)
                lock = lock_folder(directory)
            except OSError:
                return None
            if lock is not None:
                return lock
        return None

    def take_over(self, other: ResumeStore) -> None:
        """Make the journals ``other`` opened this store's: a fetch made for this step by another
        (``sync/head_start.py``) is finished or kept with the step's own."""
        self._opened.extend(d for d in other._opened if d not in self._opened)
        other._opened.clear()

    def finish(self) -> None:
        """Remove the journals opened here (their rows have landed), unless a fetch holds one now."""
        sweep(self._opened)
        self._opened.clear()
        with contextlib.suppress(OSError):
            self.root.rmdir()  # only when empty


def _expired(directory: Path) -> bool:
    try:
        selection = json.loads((directory / SELECTION).read_text())
        return time.time() - float(selection["created"]) > KEEP_SECONDS or selection["format"] != FORMAT
    except FileNotFoundError:
        return False
    except (OSError, ValueError, KeyError, TypeError):
        return True


def sweep_expired(root: Path) -> list[Path]:
    """Remove the journals older than ``KEEP_SECONDS``, and those that kept nothing (a fetch killed
    before its first call ended), that no process holds."""
    return sweep(root.iterdir(), lambda path: _expired(path) or not (path / MANIFEST).exists())
