"""DuckDB's single-writer file lock, with real processes on a real file: writers wait for it, and
say what they wait for."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from resources.warehouse.contract import LOGGER_NAME, WarehouseLockTimeout
from resources.warehouse.duckdb import DuckDBWarehouse
from resources.warehouse.duckdb_lock import connect_with_lock_wait, lock_holder
from tests.warehouse import _workers
from tests.warehouse.helpers import COMPETITORS, D1, D2, MENTIONS, mention_rows, scope

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def hung_writer(tmp_path: Path) -> Iterator[tuple[Path, multiprocessing.process.BaseProcess]]:
    """A child process stuck inside a write transaction (after its delete); killed afterwards."""
    path = tmp_path / "wh.duckdb"
    DuckDBWarehouse(path, "vis").replace_partitions(
        MENTIONS, mention_rows("b1", [D1], name="Old"), scope(("b1",), D1, D2), "run-old"
    )
    marker = tmp_path / "inside"
    proc = SPAWN.Process(target=_workers.write_and_hang, args=(str(path), str(marker), "New"))
    proc.start()
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.is_alive(), "the writer died before reaching its transaction"
            assert time.monotonic() < deadline, "the writer never reached its transaction"
            time.sleep(0.05)
        yield path, proc
    finally:
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)


def test_two_writer_processes_at_once_both_land(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    barrier = SPAWN.Barrier(3)
    procs = [
        SPAWN.Process(target=_workers.write_brand, args=(str(path), brand, barrier, 3, 0.2))
        for brand in ("b1", "b2")
    ]
    for p in procs:
        p.start()
    barrier.wait(timeout=60)
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]  # neither failed on the lock
    reader = DuckDBWarehouse(path, "vis", read_only=True)
    rows = reader.query(f"SELECT brand_id, brand_name FROM {reader.table_ref('mentions')}").to_pylist()
    landed = sorted((r["brand_id"], r["brand_name"]) for r in rows)
    assert landed == [("b1", "b1-2")] * 4 + [("b2", "b2-2")] * 4


def test_killed_writer_leaves_the_old_rows(
    hung_writer: tuple[Path, multiprocessing.process.BaseProcess],
) -> None:
    path, proc = hung_writer
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    rows = (
        DuckDBWarehouse(path, "vis", read_only=True)
        .query('SELECT brand_name FROM "vis"."mentions"')
        .to_pylist()
    )
    assert [r["brand_name"] for r in rows] == ["Old"] * 4
    # and the file is writable again
    wh = DuckDBWarehouse(path, "vis", lock_timeout_seconds=30)
    assert (
        wh.replace_partitions(
            MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-2"
        ).rows_deleted
        == 4
    )


def test_writer_gives_up_after_the_lock_timeout(
    hung_writer: tuple[Path, multiprocessing.process.BaseProcess],
) -> None:
    path, _ = hung_writer
    waiting = DuckDBWarehouse(path, "vis", lock_timeout_seconds=0.3)
    with pytest.raises(WarehouseLockTimeout, match="lock_timeout_seconds"):
        waiting.replace_partitions(MENTIONS, mention_rows("b2", [D1]), scope(("b2",), D1, D2), "run-b2")
    with pytest.raises(WarehouseLockTimeout):
        DuckDBWarehouse(path, "vis", lock_timeout_seconds=0.3, read_only=True).query("SELECT 1")


def test_read_only_handle_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    DuckDBWarehouse(path, "vis").replace_partitions(
        MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1"
    )
    reader = DuckDBWarehouse(path, "vis", read_only=True)
    assert reader.query('SELECT count(*) AS n FROM "vis"."mentions"').to_pylist() == [{"n": 4}]
    with pytest.raises(PermissionError):
        reader.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-2")
    with pytest.raises(FileNotFoundError):
        DuckDBWarehouse(tmp_path / "missing.duckdb", read_only=True).query("SELECT 1")


def test_a_schema_named_like_the_file_is_not_ambiguous(tmp_path: Path) -> None:
    """The default set-up: schema ``visibility`` in ``visibility.duckdb``, whose catalog is ``visibility``."""
    path = tmp_path / "visibility.duckdb"
    warehouse = DuckDBWarehouse(path, "visibility")
    warehouse.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1")
    warehouse.replace_partitions(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-2")
    counted = warehouse.query(f"SELECT count(*) AS n FROM {warehouse.table_ref('mentions')}")
    assert counted.to_pylist() == [{"n": 4}]


def test_the_current_view_works_when_the_schema_is_named_like_the_file(tmp_path: Path) -> None:
    rows = pa.Table.from_pylist(
        [{"brand_id": "b1", "id": "x", "name": "X", "domain": "x.com"}], schema=COMPETITORS.arrow_schema
    )
    warehouse = DuckDBWarehouse(tmp_path / "visibility.duckdb", "visibility")
    warehouse.upsert_snapshot(COMPETITORS, rows, "run-1", None)
    view = warehouse.table_ref("competitors_current")
    assert warehouse.query(f"SELECT id FROM {view}").to_pylist() == [{"id": "x"}]


@pytest.fixture
def reader_process(tmp_path: Path) -> Iterator[tuple[Path, multiprocessing.process.BaseProcess, Path]]:
    """Another process holding the file open read-only (a BI tool) until ``release`` is created."""
    path = tmp_path / "wh.duckdb"
    DuckDBWarehouse(path, "vis").replace_partitions(
        MENTIONS, mention_rows("b1", [D1], name="Old"), scope(("b1",), D1, D2), "run-old"
    )
    marker, release = tmp_path / "holding", tmp_path / "release"
    proc = SPAWN.Process(target=_workers.hold_read_only, args=(str(path), str(marker), str(release), 60))
    proc.start()
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.is_alive(), "the reader died before opening the file"
            assert time.monotonic() < deadline, "the reader never opened the file"
            time.sleep(0.05)
        yield path, proc, release
    finally:
        release.write_text("done")
        proc.join(30)
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(30)


def test_a_writer_waiting_for_a_reader_says_which_process_holds_the_file(
    reader_process: tuple[Path, multiprocessing.process.BaseProcess, Path], caplog: pytest.LogCaptureFixture
) -> None:
    path, proc, release = reader_process

    class ReleaseAfterTheFirstNotice(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("waiting for the DuckDB lock") and not released:
                released.append(threading.Timer(2.5, release.write_text, args=("done",)))
                released[0].start()

    released: list[threading.Timer] = []
    handler = ReleaseAfterTheFirstNotice()
    logging.getLogger(LOGGER_NAME).addHandler(handler)
    writer = DuckDBWarehouse(path, "vis", lock_timeout_seconds=60)
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
            writer.replace_partitions(
                MENTIONS, mention_rows("b1", [D1], name="New"), scope(("b1",), D1, D2), "run-2"
            )
    finally:
        logging.getLogger(LOGGER_NAME).removeHandler(handler)

    lines = [r for r in caplog.records if r.name == LOGGER_NAME and r.levelno == logging.WARNING]
    assert len(lines) == 1  # throttled: one notice in ~3.5 s of waiting, not one per retry
    message = lines[0].getMessage()
    assert message.startswith(f"waiting for the DuckDB lock on {path} held by ")
    assert f"(PID {proc.pid}), up to " in message and " more s (lock_timeout_seconds=60)" in message
    landed = DuckDBWarehouse(path, "vis", read_only=True).query(
        'SELECT DISTINCT brand_name FROM "vis"."mentions"'
    )
    assert landed.to_pylist() == [{"brand_name": "New"}]


def test_a_lock_timeout_names_the_process_holding_the_file(
    reader_process: tuple[Path, multiprocessing.process.BaseProcess, Path],
) -> None:
    path, proc, _ = reader_process
    writer = DuckDBWarehouse(path, "vis", lock_timeout_seconds=0.5)
    with pytest.raises(WarehouseLockTimeout, match=rf"stayed locked by .*\(PID {proc.pid}\) for 0.5s"):
        writer.replace_partitions(MENTIONS, mention_rows("b2", [D1]), scope(("b2",), D1, D2), "run-b2")


def test_a_write_waiting_for_another_thread_of_this_process_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "wh.duckdb"
    holder = DuckDBWarehouse(path, "vis")
    writer = DuckDBWarehouse(path, "vis", lock_timeout_seconds=30)
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME), holder.session():
        holder.ensure_table(MENTIONS)
        thread = threading.Thread(
            target=writer.replace_partitions,
            args=(MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "run-1"),
        )
        thread.start()
        time.sleep(1.8)  # past the first notice
    thread.join(30)
    assert f"held by another write of this process (PID {os.getpid()})" in caplog.text


@pytest.mark.parametrize(
    ("message", "holder"),
    [
        (
            'IO Error: Could not set lock on file "/d/v.duckdb": Conflicting lock is held in '
            "/usr/bin/python3.11 (PID 4242). See also https://duckdb.org/docs/current/connect/concurrency",
            "/usr/bin/python3.11 (PID 4242)",
        ),
        (
            'IO Error: Could not set lock on file "/d/v.duckdb": Conflicting lock is held in '
            "/opt/My Tool/bin/tool (PID 7) by user ana. However, you would be able to open this database "
            "in read-only mode",
            "/opt/My Tool/bin/tool (PID 7), user ana",
        ),
        (
            'IO Error: Could not set lock on file "/d/v.duckdb": Resource temporarily unavailable',
            "another process",
        ),
    ],
)
def test_the_lock_holder_is_named_as_duckdb_names_it(message: str, holder: str) -> None:
    assert lock_holder(message) == holder


def test_opening_a_file_another_process_is_still_creating_waits_for_its_header(tmp_path: Path) -> None:
    """Two processes opening a new file race on its creation: the second waits, it does not fail."""
    path = tmp_path / "new.duckdb"
    path.write_bytes(b"\0" * 100)  # what the first process has written so far
    made = tmp_path / "made.duckdb"
    duckdb.connect(str(made)).close()

    def finish_creating() -> None:
        time.sleep(0.5)
        os.replace(made, path)

    creator = threading.Thread(target=finish_creating)
    creator.start()
    con = connect_with_lock_wait(path, read_only=False, timeout=60)
    creator.join()
    assert con.execute("SELECT 42").fetchone() == (42,)
    con.close()


def test_a_file_that_is_not_duckdb_fails_within_seconds_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "other.duckdb"
    path.write_bytes(b"not a database " * 2_000)  # retried only while it may still be a creation
    started = time.monotonic()
    with pytest.raises(duckdb.IOException, match="not a valid DuckDB database file"):
        connect_with_lock_wait(path, read_only=False, timeout=600)
    assert time.monotonic() - started < 300  # far from the 600 s a lock wait would take
