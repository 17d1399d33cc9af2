"""Child-process bodies for the DuckDB multi-process tests (importable, so ``spawn`` can run them)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from resources.warehouse.duckdb import DuckDBWarehouse
from tests.warehouse.helpers import D1, D2, MENTIONS, mention_rows, scope


def write_brand(path: str, brand: str, barrier: Any, writes: int, hold_seconds: float) -> None:
    """Replace ``brand``'s partition ``writes`` times, holding each transaction ``hold_seconds``."""
    wh = DuckDBWarehouse(path, "vis", lock_timeout_seconds=60)
    wh._between_delete_and_insert = lambda: time.sleep(hold_seconds)
    barrier.wait()  # every writer starts together
    for i in range(writes):
        rows = mention_rows(brand, [D1], name=f"{brand}-{i}")
        wh.replace_partitions(MENTIONS, rows, scope((brand,), D1, D2), f"run-{brand}-{i}")


def write_and_hang(path: str, marker: str, name: str) -> None:
    """Start a write, signal from inside the transaction (after the delete), then hang until killed."""

    def hang() -> None:
        Path(marker).write_text("inside the transaction")
        time.sleep(600)

    wh = DuckDBWarehouse(path, "vis")
    wh._between_delete_and_insert = hang
    wh.replace_partitions(MENTIONS, mention_rows("b1", [D1], name=name), scope(("b1",), D1, D2), "run-hang")


def hold_read_only(path: str, marker: str, release: str, seconds: float, read_only: bool = True) -> None:
    """A reader (a BI tool; or a writer: ``read_only=False``): keep the file open until ``release``
    exists (or ``seconds`` passed)."""
    import duckdb

    con = duckdb.connect(path, read_only=read_only)
    Path(marker).write_text("holding")
    deadline = time.monotonic() + seconds
    while not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    con.close()
