"""``check_connection()``: a warehouse that cannot be used is found before the first API request,
with a message naming ``VISIBILITY_WAREHOUSE`` (and never a password)."""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from resources.warehouse.contract import LOGGER_NAME, WarehouseConfigError
from resources.warehouse.duckdb import DuckDBWarehouse
from resources.warehouse.postgres import PostgresWarehouse
from resources.warehouse.urls import warehouse_from_url
from tests.warehouse import _workers
from tests.warehouse.helpers import D1, D2, MENTIONS, mention_rows, scope

SPAWN = multiprocessing.get_context("spawn")


def _landed(path: Path) -> Path:
    DuckDBWarehouse(path, "vis").replace_partitions(
        MENTIONS, mention_rows("b1", [D1]), scope(("b1",), D1, D2), "r"
    )
    return path


def test_a_file_that_is_not_a_duckdb_database_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "visibility.duckdb"
    path.write_text("name,score\nacme,3\n")
    with pytest.raises(WarehouseConfigError) as raised:
        warehouse_from_url(f"duckdb:///{path}").check_connection()
    message = str(raised.value)
    assert message.startswith("VISIBILITY_WAREHOUSE: ") and str(path) in message
    assert "not a DuckDB database" in message
    assert path.read_text() == "name,score\nacme,3\n"  # untouched


def test_an_empty_file_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "visibility.duckdb"
    path.touch()
    with pytest.raises(
        WarehouseConfigError, match=r"VISIBILITY_WAREHOUSE: .* is empty, not a DuckDB database"
    ):
        DuckDBWarehouse(path).check_connection()


def test_a_damaged_duckdb_file_is_a_configuration_error(tmp_path: Path) -> None:
    path = _landed(tmp_path / "visibility.duckdb")
    header = path.read_bytes()[:64]
    path.write_bytes(header + os.urandom(8192))
    with pytest.raises(WarehouseConfigError, match=r"VISIBILITY_WAREHOUSE: .* cannot be opened by DuckDB"):
        DuckDBWarehouse(path).check_connection()


def test_a_folder_at_the_path_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "visibility.duckdb"
    path.mkdir()
    with pytest.raises(WarehouseConfigError, match=r"VISIBILITY_WAREHOUSE: .* is a folder"):
        DuckDBWarehouse(path).check_connection()


def test_a_folder_that_cannot_be_created_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file where the folder should be")
    with pytest.raises(WarehouseConfigError, match=r"VISIBILITY_WAREHOUSE: .* cannot be created"):
        DuckDBWarehouse(tmp_path / "data" / "visibility.duckdb").check_connection()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_folder_that_cannot_be_written_is_a_configuration_error(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    _landed(folder / "visibility.duckdb")
    folder.chmod(0o555)
    try:
        with pytest.raises(WarehouseConfigError, match=r"VISIBILITY_WAREHOUSE: .* cannot be written"):
            DuckDBWarehouse(folder / "visibility.duckdb").check_connection()
    finally:
        folder.chmod(0o755)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_a_folder_that_refuses_new_files_even_to_root_is_a_configuration_error() -> None:
    with pytest.raises(WarehouseConfigError, match=r"VISIBILITY_WAREHOUSE: .* cannot be written: its folder"):
        DuckDBWarehouse("/proc/self/visibility.duckdb").check_connection()


def test_a_new_file_and_an_existing_database_pass_and_nothing_is_created(tmp_path: Path) -> None:
    new = tmp_path / "new" / "visibility.duckdb"
    DuckDBWarehouse(new).check_connection()
    assert list(new.parent.iterdir()) == []
    existing = _landed(tmp_path / "existing.duckdb")
    DuckDBWarehouse(existing).check_connection()
    DuckDBWarehouse(existing, read_only=True).check_connection()


def test_a_reader_of_a_missing_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(WarehouseConfigError, match="does not exist"):
        DuckDBWarehouse(tmp_path / "missing.duckdb", read_only=True).check_connection()


def test_a_file_another_process_writes_passes_and_says_who_holds_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _landed(tmp_path / "visibility.duckdb")
    marker, release = tmp_path / "holding", tmp_path / "release"
    proc = SPAWN.Process(
        target=_workers.hold_read_only, args=(str(path), str(marker), str(release), 60, False)
    )
    proc.start()
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.is_alive() and time.monotonic() < deadline, "the writer never opened the file"
            time.sleep(0.05)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
            DuckDBWarehouse(path, lock_timeout_seconds=600).check_connection()
        assert time.monotonic() - started < 60  # reported, not waited for (the wait would take 600 s)
    finally:
        release.write_text("done")
        proc.join(30)
    assert "is in use by " in caplog.text and f"(PID {proc.pid})" in caplog.text


# --- Postgres ------------------------------------------------------------------------------------


@pytest.mark.postgres
def test_a_postgres_server_that_takes_writes_passes(postgres_url: str, pg_schema: str) -> None:
    PostgresWarehouse(postgres_url, pg_schema).check_connection()


@pytest.mark.postgres
def test_an_unreachable_postgres_is_a_configuration_error_without_its_password() -> None:
    with socket_closed_port() as port:
        warehouse = warehouse_from_url(f"postgresql://loader:s3cret-pw@127.0.0.1:{port}/db")
        with pytest.raises(WarehouseConfigError) as raised:
            warehouse.check_connection()
    message = str(raised.value)
    assert message.startswith("VISIBILITY_WAREHOUSE: ") and "cannot be reached" in message
    assert "s3cret-pw" not in message and "***" in message


@pytest.mark.postgres
def test_a_postgres_user_who_may_not_create_the_schema_is_a_configuration_error(postgres_url: str) -> None:
    role = f"limited_{uuid.uuid4().hex[:8]}"
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'CREATE SCHEMA "{schema}"')  # owned by the admin: the role may not write in it
    limited_url = postgres_url.replace("postgresql://postgres@", f"postgresql://{role}@")
    try:
        with pytest.raises(
            WarehouseConfigError, match=f"has no schema 'absent_schema' and user '{role}' may not"
        ):
            PostgresWarehouse(limited_url, "absent_schema").check_connection()
        with pytest.raises(WarehouseConfigError, match=f"does not let user '{role}' create tables in schema"):
            PostgresWarehouse(limited_url, schema).check_connection()
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}"')
            admin.execute(f'DROP ROLE "{role}"')


class socket_closed_port:
    """A loopback port nothing listens on (bound, then closed)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None
