"""Postgres specifics: concurrent first writes, COPY in batches, identifier limits."""

from __future__ import annotations

import threading

import pytest

from resources.warehouse import postgres as pg
from resources.warehouse.postgres import PostgresWarehouse, array_literal
from tests.warehouse.helpers import D1, D2, MENTIONS, mention_rows, scope

pytestmark = pytest.mark.postgres


def test_concurrent_first_writes_to_a_new_table_both_land(postgres_url: str, pg_schema: str) -> None:
    """Two writers race to create the schema and table: the DDL lock makes the second wait."""
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def write(brand: str) -> None:
        wh = PostgresWarehouse(postgres_url, pg_schema)
        try:
            barrier.wait(30)
            wh.replace_partitions(
                MENTIONS, mention_rows(brand, [D1]), scope((brand,), D1, D2), f"run-{brand}"
            )
        except BaseException as exc:
            errors.append(exc)
        finally:
            wh.close()

    threads = [threading.Thread(target=write, args=(b,)) for b in ("b1", "b2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    with PostgresWarehouse(postgres_url, pg_schema) as wh:
        counts = wh.query(
            f"SELECT brand_id, count(*) AS n FROM {wh.table_ref('mentions')} "
            "GROUP BY brand_id ORDER BY brand_id"
        ).to_pylist()
    assert counts == [{"brand_id": "b1", "n": 4}, {"brand_id": "b2", "n": 4}]


def test_copy_streams_several_batches(
    postgres_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg, "COPY_BATCH_ROWS", 3)
    rows = mention_rows("b1", [D1], per_cell=5)
    with PostgresWarehouse(postgres_url, pg_schema) as wh:
        assert wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-1").rows_written == 10
        landed = wh.query(f"SELECT id, tags FROM {wh.table_ref('mentions')} ORDER BY id").to_pylist()
    expected = sorted(zip(rows["id"].to_pylist(), rows["tags"].to_pylist(), strict=True))
    assert [(r["id"], r["tags"]) for r in landed] == expected


def test_identifiers_longer_than_postgres_allows_are_refused(postgres_url: str, pg_schema: str) -> None:
    rows = mention_rows("b1", [D1], extra={"x" * 64: [1, 2, 3, 4]})
    with PostgresWarehouse(postgres_url, pg_schema) as wh, pytest.raises(ValueError, match="63-byte"):
        wh.replace_partitions(MENTIONS, rows, scope(("b1",), D1, D2), "run-1")


def test_array_literals_escape_quotes_backslashes_and_nulls() -> None:
    assert array_literal(None) is None
    assert array_literal([]) == "{}"
    assert array_literal(['a"b', "c\\d", None, "NULL"]) == '{"a\\"b","c\\\\d",NULL,"NULL"}'
    assert array_literal([1, 2.5, True, float("nan")]) == "{1,2.5,true,NaN}"


def _wait_until_a_lock_is_awaited(postgres_url: str, pg_schema: str, attempts: int = 400) -> None:
    """Block until some session waits on a lock (the other writer reached its conflict point)."""
    import time

    with PostgresWarehouse(postgres_url, pg_schema) as probe:
        for _ in range(attempts):
            if probe.query("SELECT count(*) AS n FROM pg_locks WHERE NOT granted").to_pylist()[0]["n"]:
                return
            time.sleep(0.05)


def test_overlapping_partition_replaces_of_one_table_both_land_and_the_last_wins(
    postgres_url: str, pg_schema: str
) -> None:
    """A daily run and a backfill replacing the same rows at READ COMMITTED: the second waits."""
    target = scope(("b1",), D1, D2)
    with PostgresWarehouse(postgres_url, pg_schema) as wh:
        wh.replace_partitions(MENTIONS, mention_rows("b1", [D1], name="seed"), target, "run-seed")
    first_in_transaction = threading.Event()
    errors: list[BaseException] = []
    first = PostgresWarehouse(postgres_url, pg_schema)
    second = PostgresWarehouse(postgres_url, pg_schema)

    def hold_until_the_second_writer_waits() -> None:
        first_in_transaction.set()
        _wait_until_a_lock_is_awaited(postgres_url, pg_schema)

    first._between_delete_and_insert = hold_until_the_second_writer_waits

    def write(wh: PostgresWarehouse, name: str) -> None:
        try:
            wh.replace_partitions(MENTIONS, mention_rows("b1", [D1], name=name), target, f"run-{name}")
        except BaseException as exc:
            errors.append(exc)
        finally:
            wh.close()

    threads = [threading.Thread(target=write, args=(first, "first"))]
    threads[0].start()
    assert first_in_transaction.wait(30)
    threads.append(threading.Thread(target=write, args=(second, "second")))
    threads[1].start()
    for t in threads:
        t.join(60)
    assert errors == []
    with PostgresWarehouse(postgres_url, pg_schema) as wh:
        names = wh.query(
            f"SELECT brand_name, count(*) AS n FROM {wh.table_ref('mentions')} GROUP BY brand_name"
        ).to_pylist()
    assert names == [{"brand_name": "second", "n": 4}]
