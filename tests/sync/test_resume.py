"""A fetch's journal: completed calls are reused by the next fetch of the same selection, and an entry
that does not check out (torn, corrupt, expired, of another plan) is never trusted."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import time
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from resources.api.client import VisibilityClient
from sandbox.testing import SandboxHandle
from sync import resume as resume_module
from sync.catalog import PROMPT_MENTIONS
from sync.fetching import fetch_partitioned
from sync.landing import FetchOutcome
from sync.planning import Call, Window
from sync.private_dir import sweep
from sync.resume import MANIFEST, SELECTION, JournalPart, ResumeStore, call_key, resume_root, selection_id
from tests.endpoint_keys import Endpoint
from tests.fixtures_spool import tmpfs
from tests.sync.conftest import D

W = Window(dt.date(2026, 9, 1), dt.date(2026, 9, 8))
CALLS = [Call(Endpoint.MENTIONS, "b1", W, prompt_id=f"p{i}") for i in range(4)]
KEYS = [call_key(c) for c in CALLS]
SPEC = PROMPT_MENTIONS.spec


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": [f"r{i}" for i in range(start, start + n)], "n": list(range(start, start + n))})


def journalled(root: Path) -> ResumeStore:
    """A store whose journal holds two entries: calls 0-1 (3 rows) and call 2 (no rows)."""
    store = ResumeStore(root)
    journal = store.journal("sel")
    assert journal is not None
    journal.record([(0, rows(3))], KEYS[:2])
    journal.record([(0, rows(0))], KEYS[2:3])
    journal.close()
    return store


def read(part: JournalPart) -> pa.Table:
    with pa.OSFile(str(part.path), "rb") as source:
        return ipc.open_file(source).read_all()


def load(root: Path) -> tuple[set[str], list[pa.Table], int]:
    store = ResumeStore(root)
    journal = store.journal("sel")
    assert journal is not None
    done, parts, _ = journal.load(set(KEYS))
    journal.close()
    return done, [read(p) for p in parts], journal.dropped


def test_the_calls_a_journal_holds_come_back_with_their_rows(tmp_path: Path) -> None:
    journalled(tmp_path)

    done, tables, dropped = load(tmp_path)

    assert done == set(KEYS[:3]) and dropped == 0
    assert pa.concat_tables(tables).equals(rows(3))


def test_the_manifest_names_each_files_size_and_checksum_as_written_on_disk(tmp_path: Path) -> None:
    journalled(tmp_path)
    entries = [json.loads(line) for line in (tmp_path / "sel" / MANIFEST).read_text().splitlines()]
    files = [f for e in entries for f in e["files"]]

    assert [e["rows"] for e in entries] == [3, 0] and len(files) == 1
    data = (tmp_path / "sel" / files[0]["file"]).read_bytes()
    assert (files[0]["size"], files[0]["crc32"]) == (len(data), zlib.crc32(data))


def test_a_corrupt_file_is_not_trusted_and_its_calls_are_asked_again(tmp_path: Path) -> None:
    journalled(tmp_path)
    part = next((tmp_path / "sel").glob("part-*.arrow"))
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))

    done, tables, dropped = load(tmp_path)

    assert done == {KEYS[2]} and tables == [] and dropped == 1


def test_a_torn_manifest_line_and_a_missing_file_are_not_trusted(tmp_path: Path) -> None:
    journalled(tmp_path)
    manifest = tmp_path / "sel" / MANIFEST
    manifest.write_text(manifest.read_text() + '{"calls": ["' + KEYS[3])  # killed mid-write
    next((tmp_path / "sel").glob("part-*.arrow")).unlink()

    done, _, dropped = load(tmp_path)

    assert done == {KEYS[2]} and dropped == 2


def test_an_entry_holding_a_call_the_new_plan_does_not_ask_is_dropped_whole(tmp_path: Path) -> None:
    journalled(tmp_path)
    store = ResumeStore(tmp_path)
    journal = store.journal("sel")
    assert journal is not None

    done, tables, _ = journal.load({KEYS[0], KEYS[2]})  # call 1 left the plan (a prompt deleted)

    assert done == {KEYS[2]} and tables == [] and journal.dropped == 1


def test_a_partly_read_call_resumes_from_the_cursor_of_its_last_whole_part(tmp_path: Path) -> None:
    store = ResumeStore(tmp_path)
    journal = store.journal("sel")
    assert journal is not None
    journal.record_part(KEYS[3], 0, [(0, rows(2))], None, "c1")
    journal.record_part(KEYS[3], 1, [(0, rows(2, 2))], "c1", "c2")
    journal.record_part(KEYS[3], 2, [(0, rows(2, 4))], "elsewhere", "c3")  # not the continuation of part 1
    journal.close()

    done, parts, points = journal.load(set(KEYS))
    tables = [read(p) for p in parts]

    assert done == set() and points[KEYS[3]].cursor == "c2" and points[KEYS[3]].parts == 2
    assert pa.concat_tables(tables).equals(rows(4))


def test_a_completed_call_keeps_exactly_the_parts_its_entry_names(tmp_path: Path) -> None:
    store = ResumeStore(tmp_path)
    journal = store.journal("sel")
    assert journal is not None
    journal.record_part(KEYS[3], 0, [(0, rows(2))], None, "c1")
    journal.record_part(KEYS[3], 1, [(0, rows(2, 2))], "c1", "c2")  # a killed attempt's part, not used below
    journal.record([(0, rows(3, 2))], [KEYS[3]], {KEYS[3]: 1})  # resumed at c1: its last rows

    done, parts, points = journal.load(set(KEYS))
    tables = [read(p) for p in parts]
    journal.close()

    assert done == {KEYS[3]} and points == {}
    assert pa.concat_tables(tables).sort_by("n").equals(rows(5))


def test_a_completed_call_whose_parts_are_broken_is_asked_again_not_landed_without_them(
    tmp_path: Path,
) -> None:
    """The entry's last rows need its earlier parts: without part 1 (its file lost) they are half a call."""
    journal = ResumeStore(tmp_path).journal("sel")
    assert journal is not None
    journal.record_part(KEYS[3], 0, [(0, rows(2))], None, "c1")
    (lost,) = journal.record_part(KEYS[3], 1, [(0, rows(2, 2))], "c1", "c2")
    journal.record([(0, rows(3, 4))], [KEYS[3]], {KEYS[3]: 2})
    assert lost.path is not None
    lost.path.unlink()

    done, parts, points = journal.load(set(KEYS))
    journal.close()

    assert done == set() and journal.dropped == 1
    assert points[KEYS[3]].cursor == "c1"  # resumed after the last part that checks out
    assert pa.concat_tables([read(p) for p in parts]).equals(rows(2))


def test_calls_that_differ_only_in_granularity_are_journalled_apart() -> None:
    daily = Call(Endpoint.COMPETITOR_TRENDS, "b1", W, engine="chatgpt", granularity="day")
    weekly = Call(Endpoint.COMPETITOR_TRENDS, "b1", W, engine="chatgpt", granularity="week")
    assert call_key(daily) != call_key(weekly)


def test_an_expired_journal_is_never_used_and_swept_by_the_next_store(tmp_path: Path) -> None:
    journalled(tmp_path)
    selection = tmp_path / "sel" / SELECTION
    old = {"format": resume_module.FORMAT, "created": time.time() - resume_module.KEEP_SECONDS - 60}
    selection.write_text(json.dumps(old))

    assert load(tmp_path)[0] == set()

    journalled(tmp_path / "other")
    (tmp_path / "other" / "sel" / SELECTION).write_text(json.dumps(old))
    ResumeStore(tmp_path / "other").journal("another")
    assert not (tmp_path / "other" / "sel").exists()


def test_a_journal_in_use_is_not_shared_and_finish_removes_only_what_was_opened(tmp_path: Path) -> None:
    first = ResumeStore(tmp_path)
    journal = first.journal("sel")
    assert journal is not None
    assert ResumeStore(tmp_path).journal("sel") is None  # another process's fetch: runs without one
    journalled(tmp_path / "kept")
    journal.close()  # the fetch ended

    first.finish()

    assert not (tmp_path / "sel").exists() and (tmp_path / "kept" / "sel").exists()


def test_finish_leaves_a_journal_another_fetch_holds_now(tmp_path: Path) -> None:
    first = ResumeStore(tmp_path)
    ended = first.journal("sel")
    assert ended is not None
    ended.close()
    again = ResumeStore(tmp_path).journal("sel")  # a second fetch of the same selection, under way

    first.finish()

    assert again is not None and (tmp_path / "sel").exists()
    again.close()


def test_the_selection_names_the_key_by_a_hash_only_and_changes_with_what_decides_the_rows(
    sandbox: SandboxHandle,
) -> None:
    key = sandbox.keys["workspace"]
    cells = {(D, "chatgpt")}
    with (
        VisibilityClient(sandbox.url, key) as client,
        VisibilityClient(sandbox.url, sandbox.keys["scoped"]) as other_key,
        VisibilityClient(sandbox.url, key, max_new_columns=0) as lower_cap,
    ):
        base = selection_id(SPEC, cells, [], None, client, 3)

        assert key not in client.key_fingerprint and key not in base
        assert base != selection_id(SPEC, cells, [], None, other_key, 3)
        assert base != selection_id(SPEC, cells, [], None, lower_cap, 3)  # its check sees every row
        assert base != selection_id(SPEC, cells, [], None, client, 5)  # files of other spool buckets
        assert base != selection_id(SPEC, cells, ["b1"], None, client, 3)
        assert base != selection_id(SPEC, {(D, "claude")}, [], None, client, 3)
        assert base == selection_id(SPEC, set(cells), [], None, client, 3)


def test_the_command_lines_journals_live_under_tmpdir_and_a_recorded_instances_in_its_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(resume_module.tempfile, "tempdir", None)

    assert resume_root(None).parent == tmp_path
    assert resume_root(str(tmp_path / "storage")) == tmp_path / "storage" / resume_module.RESUME_DIR


def test_a_second_fetch_of_the_same_selection_asks_none_of_the_calls_the_first_completed(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    cells = {(D, "chatgpt"), (D, "claude")}
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        first = fetch_partitioned(client, PROMPT_MENTIONS, cells, [], resume=ResumeStore(tmp_path))
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        second = fetch_partitioned(client, PROMPT_MENTIONS, cells, [], resume=ResumeStore(tmp_path))
        asked = client.stats.requests_by_endpoint.get(Endpoint.MENTIONS, 0)
    try:
        assert first.spool.rows > 0 and second.spool.rows == first.spool.rows
        assert asked == 0
        assert second.notes["resumed"]["calls"] == len(first.plan.calls)
        key = sandbox.keys["workspace"].encode()
        assert not any(key in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    finally:
        first.spool.remove()
        second.spool.remove()


CELLS = {(D, "chatgpt"), (D, "claude"), (D - dt.timedelta(days=9), "chatgpt")}  # two spool buckets


def fetch(sandbox: SandboxHandle, resume: ResumeStore | None) -> tuple[FetchOutcome, int]:
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        outcome = fetch_partitioned(client, PROMPT_MENTIONS, CELLS, [], resume=resume)
        return outcome, client.stats.requests_by_endpoint.get(Endpoint.MENTIONS, 0)


def spooled(outcome: FetchOutcome) -> list[dict[str, object]]:
    table = pa.concat_tables(list(outcome.spool.read(lambda t: t)), promote_options="permissive")
    return sorted(table.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def segments(outcome: FetchOutcome) -> list[Path]:
    return [Path(p) for s in outcome.spool.buckets.values() for p in s.segments]


def test_a_journalled_fetch_writes_its_rows_once_the_spool_links_the_journals_files(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    plain, _ = fetch(sandbox, None)
    store = ResumeStore(tmp_path)
    journalled, _ = fetch(sandbox, store)
    try:
        journal_files = {p.stat().st_ino for p in tmp_path.rglob("part-*.arrow")}
        assert len(journalled.spool.buckets) == 2
        assert segments(journalled) and {p.stat().st_ino for p in segments(journalled)} == journal_files
        assert spooled(journalled) == spooled(plain) and journalled.spool.rows == plain.spool.rows

        store.finish()  # every table landed: the journal goes, the spool keeps its own names

        assert not tmp_path.exists() and spooled(journalled) == spooled(plain)
    finally:
        plain.spool.remove()
        journalled.spool.remove()


def test_a_resumed_fetch_takes_the_journalled_files_without_writing_them_again(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    first, _ = fetch(sandbox, ResumeStore(tmp_path))
    second, asked = fetch(sandbox, ResumeStore(tmp_path))
    try:
        journal_files = {p.stat().st_ino for p in tmp_path.rglob("part-*.arrow")}
        assert asked == 0 and spooled(second) == spooled(first)
        assert {p.stat().st_ino for p in segments(second)} == journal_files
    finally:
        first.spool.remove()
        second.spool.remove()


def test_a_journal_that_cannot_write_is_dropped_and_the_fetch_spools_every_row(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    """The journal on a real full disk: a tiny tmpfs (needs root to mount; skipped elsewhere)."""
    with tmpfs(tmp_path / "small", "8k") as small:
        plain, _ = fetch(sandbox, None)
        journalled, _ = fetch(sandbox, ResumeStore(small / "resume"))
        try:
            assert "No space left on device" in journalled.notes["resume_journal_failed"]
            assert spooled(journalled) == spooled(plain) and journalled.spool.rows == plain.spool.rows
            assert not list(small.rglob(".part-*"))  # no half-written file left
        finally:
            plain.spool.remove()
            journalled.spool.remove()


def test_a_journal_whose_folder_another_run_sweeps_away_before_its_lock_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of one user share the resume root: another run's sweep may remove a folder just made
    (no manifest yet) before its run locks it. The journal is made again, not written into nothing."""
    real_flock = fcntl.flock
    swept: list[Path] = []
    raced: list[bool] = []

    def flock(fd: Any, operation: int) -> None:
        if not raced and operation == fcntl.LOCK_EX | fcntl.LOCK_NB:
            raced.append(True)
            swept.extend(resume_module.sweep_expired(tmp_path))  # the other run, between mkdir and lock
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    journal = resume_module.ResumeStore(tmp_path).journal("prompt_mentions-0123")

    assert swept == [tmp_path / "prompt_mentions-0123"]  # the race happened
    assert journal is not None
    assert (tmp_path / "prompt_mentions-0123" / resume_module.SELECTION).exists()
    journal.close()


def test_a_sweep_keeps_a_journal_that_gained_its_manifest_before_the_sweep_locked_it(tmp_path: Path) -> None:
    folder = tmp_path / "answers-0123"
    folder.mkdir()
    looks = iter([True, False])  # useless at the look, no longer once locked
    assert sweep([folder], lambda _: next(looks)) == []
    assert folder.exists()
    assert sweep([folder], lambda _: True) == [folder]
    assert not folder.exists()
