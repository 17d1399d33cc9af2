"""The disk spool: rows survive the hand-over between steps and are read back filtered."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sync import spool as spool_module
from sync.spool import SPOOL_PREFIX, DateSpool, Spool, bucket_of, bucket_pieces, bucket_windows
from tests.fixtures_spool import tmpfs


def part(ids: list[int], **extra: list[object]) -> pa.Table:
    return pa.table({"id": ids, **extra})


def test_rows_come_back_filtered() -> None:
    spool = Spool(tempfile.mkdtemp(prefix=SPOOL_PREFIX))
    try:
        for start in range(0, 10, 2):
            spool.append(part([start, start + 1]))
        even = pa.concat_tables(spool.read(lambda t: t.filter(pc.equal(pc.bit_wise_and(t["id"], 1), 0))))
        assert sorted(even.column("id").to_pylist()) == [0, 2, 4, 6, 8]
        assert spool.rows == 10
    finally:
        spool.remove()


def test_parts_with_new_or_missing_extra_columns_are_all_kept() -> None:
    spool = Spool(tempfile.mkdtemp(prefix=SPOOL_PREFIX))
    try:
        spool.append(part([1], x=["a"]))
        spool.append(part([2]))  # x missing: a segment of its own
        spool.append(part([3], y=[1.5]))  # y new: another
        rows = pa.concat_tables(list(spool.read(lambda t: t)), promote_options="permissive").to_pylist()
        assert sorted(rows, key=lambda r: r["id"]) == [
            {"id": 1, "x": "a", "y": None},
            {"id": 2, "x": None, "y": None},
            {"id": 3, "x": None, "y": 1.5},
        ]
        assert len(spool.segments) == 3
    finally:
        spool.remove()


def test_remove_deletes_the_spooled_files() -> None:
    spool = Spool(tempfile.mkdtemp(prefix=SPOOL_PREFIX))
    spool.append(part([1]))
    spool.close()
    spool.remove()
    assert not Path(spool.directory).exists()


def test_bucket_windows_cut_a_range_at_bucket_boundaries_only() -> None:
    start, end = dt.date(2026, 10, 1), dt.date(2026, 10, 31)
    pieces = list(bucket_windows(start, end, 7))
    assert pieces[0][0] == start and pieces[-1][1] == end
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
    assert all(
        (e - s).days <= 7 and bucket_of(s, 7) == bucket_of(e - dt.timedelta(days=1), 7) for s, e in pieces
    )


def test_a_date_spool_reads_only_the_buckets_of_a_window() -> None:
    spool = DateSpool.create("day", 7)
    try:
        days = [dt.date(2026, 10, 1) + dt.timedelta(days=i) for i in range(30)]
        spool.append(pa.table({"day": pa.array(days, pa.date32()), "n": list(range(30))}))
        first, end = next(bucket_windows(days[0], days[-1] + dt.timedelta(days=1), 7))
        got = pa.concat_tables(list(spool.read(lambda t: t, first, end))).column("day").to_pylist()
        assert got == [d for d in days if first <= d < end]
        assert spool.rows == 30 and len(spool.buckets) >= 5
    finally:
        spool.remove()


def test_rows_split_by_bucket_hold_each_row_once_in_its_own_bucket() -> None:
    days = [dt.date(2026, 10, 1) + dt.timedelta(days=i % 20) for i in range(60)]
    table = pa.table({"day": pa.array(days, pa.date32()), "n": list(range(60))})

    pieces = bucket_pieces(table, "day", 7)

    assert [k for k, _ in pieces] == sorted({bucket_of(d, 7) for d in days})
    assert all({bucket_of(d, 7) for d in t.column("day").to_pylist()} == {k} for k, t in pieces)
    assert sorted(n for _, t in pieces for n in t.column("n").to_pylist()) == list(range(60))
    one_week = table.slice(0, 3)  # 2026-10-01..03: one bucket, kept as it is
    assert bucket_pieces(one_week, "day", 7) == [(bucket_of(days[0], 7), one_week)]
    assert bucket_pieces(table.slice(0, 0), "day", 7) == []


def _ipc_file(path: Path, table: pa.Table) -> Path:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return path


def test_an_adopted_file_is_linked_not_rewritten_and_outlives_its_writers_name(tmp_path: Path) -> None:
    day = dt.date(2026, 10, 1)
    rows = pa.table({"day": pa.array([day] * 3, pa.date32()), "n": [1, 2, 3]})
    written = _ipc_file(tmp_path / "part.arrow", rows)
    spool = DateSpool.create("day", 7, parent=tmp_path)
    try:
        spool.append(pa.table({"day": pa.array([day], pa.date32()), "n": [0]}))
        spool.adopt(bucket_of(day, 7), written, 3)
        spool.close()
        inodes = {p.stat().st_ino for p in Path(spool.directory).rglob("segment-*")}
        assert written.stat().st_ino in inodes and written.stat().st_nlink == 2  # the same file
        written.unlink()  # the journal removed first (it landed, or expired)

        landed = pa.concat_tables(list(spool.read(lambda t: t))).column("n").to_pylist()

        assert sorted(landed) == [0, 1, 2, 3] and spool.rows == 4
    finally:
        spool.remove()
    assert not Path(spool.directory).exists()


def test_a_file_on_another_file_system_is_copied_into_the_spool(tmp_path: Path) -> None:
    """A real second file system: a tmpfs (needs root to mount; skipped elsewhere)."""
    with tmpfs(tmp_path / "other", "4m") as other:
        day = dt.date(2026, 10, 1)
        written = _ipc_file(
            other / "part.arrow", pa.table({"day": pa.array([day] * 2, pa.date32()), "n": [1, 2]})
        )
        spool = DateSpool.create("day", 7, parent=tmp_path)
        try:
            spool.adopt(bucket_of(day, 7), written, 2)
            (segment,) = Path(spool.directory).rglob("segment-*")
            assert segment.stat().st_nlink == 1 and written.stat().st_nlink == 1  # a copy: no link across
            written.unlink()
            assert pa.concat_tables(list(spool.read(lambda t: t))).column("n").to_pylist() == [1, 2]
        finally:
            spool.remove()


_SPOOL_THEN_WAIT = """
import sys, time
import pyarrow as pa, datetime as dt
from sync.spool import DateSpool
spool = DateSpool.create("date", 7, name="prompt_mentions")
spool.append(pa.table({"date": [dt.date(2026, 11, 1)] * 1000, "v": list(range(1000))}))
spool.close()
print(spool.directory, flush=True)
time.sleep(600)
"""


def test_a_killed_runs_spool_is_removed_by_the_next_spool_once_its_process_is_gone(
    tmp_path: Path,
) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    owners = [
        subprocess.Popen([sys.executable, "-c", _SPOOL_THEN_WAIT], cwd=root, env=env, stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    try:
        assert owners[0].stdout is not None and owners[1].stdout is not None
        killed, living = (Path(p.stdout.readline().decode().strip()) for p in owners)  # type: ignore[union-attr]
        assert killed.is_dir() and living.is_dir() and any(killed.rglob("*.arrow"))
        owners[0].kill()
        owners[0].wait(timeout=60)
        # the next run's spool: a fresh process, with the same TMPDIR
        sweeper = subprocess.run(
            [sys.executable, "-c", "from sync.spool import DateSpool; DateSpool.create('date', 7).remove()"],
            cwd=root,
            env=env,
            timeout=120,
            check=True,
        )
        assert sweeper.returncode == 0
        assert not killed.exists()  # its owner is gone: removed at once, not a day later
        assert living.is_dir()  # its owner still runs: kept
    finally:
        for owner in owners:
            owner.kill()
            owner.wait(timeout=60)
    assert sorted(p.name for p in tmp_path.iterdir()) == [living.name]


def test_a_full_disk_is_one_line_naming_the_spool_folder_and_tmpdir(tmp_path: Path) -> None:
    """A real full disk: a 2 MiB tmpfs (needs root to mount; skipped elsewhere)."""
    with tmpfs(tmp_path / "small", "2m") as small:
        spool = DateSpool.create("date", 7, name="prompt_mentions", parent=small)
        rows = pa.table({"date": [dt.date(2026, 11, 1)] * 200_000, "text": ["x" * 40] * 200_000})
        with pytest.raises(spool_module.SpoolDiskFullError) as caught:
            spool.append(rows)
            spool.close()
        spool.remove()
        message = str(caught.value)
        assert "\n" not in message and spool.directory in message and "set TMPDIR" in message
        assert "no space left on the device of the spool folder" in message
        assert list(small.iterdir()) == []  # nothing left behind
        assert shutil.disk_usage(small).used < 2**20 // 4  # and no open file holds the space
