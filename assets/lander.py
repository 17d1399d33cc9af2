"""Landing in a child process, so the run process that fetches keeps a flat memory (Dagster-free).

A sync step lands one table while it fetches the next. Landing a table holds a chunk of its rows in
Arrow, and the warehouse's own buffers; in the fetching process that memory would add to the
fetch's. A single spawned worker lands the tables one after the other instead: the run process only
waits for it, leaving the GIL to the fetch, and the worker's memory is freed when the step ends.
"""

from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from types import TracebackType
from typing import Any

from assets.landing import FetchOutcome, land
from resources.warehouse.base import WriteResult


class LandingError(Exception):
    """A landing error whose own class cannot cross the process boundary: its class and message."""


def _warm_up() -> None:
    """Import what landing needs while the first table is still being fetched."""
    import assets.tables  # noqa: F401
    import resources.warehouse.resource  # noqa: F401


def _land_in_worker(
    warehouse_config: Mapping[str, Any], table: str, outcome: FetchOutcome, run_id: str
) -> list[WriteResult]:
    from assets.tables import ALL_TABLES
    from resources.warehouse.resource import WarehouseResource

    try:
        with WarehouseResource(**warehouse_config).get_warehouse(landing=True) as warehouse:
            return land(warehouse, ALL_TABLES[table], outcome, run_id)
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc))  # noqa: S301 - our own bytes, just made
        except Exception:
            raise LandingError(f"{type(exc).__name__}: {exc}") from None
        raise


class Lander:
    """``land()`` runs in one spawned worker process; use as a context manager around a step.

    In a daemonic process (which may not start children) it lands in the process itself.
    """

    def __init__(self, warehouse_config: Mapping[str, Any]) -> None:
        self._config = dict(warehouse_config)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Lander:
        if multiprocessing.current_process().daemon:
            return self  # a daemonic process may not start children: land in this process
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self._pool.submit(_warm_up)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._pool is None:
            return
        if exc_type is not None:
            # the step is failing or being stopped: end a landing in progress now (its open
            # transaction rolls back) rather than wait for it. Python 3.11's executor has no public
            # way to stop its workers, hence the private attribute.
            for process in list((getattr(self._pool, "_processes", None) or {}).values()):
                process.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None

    def land(self, table: str, outcome: FetchOutcome, run_id: str) -> list[WriteResult]:
        """Land ``outcome`` into ``table``; the worker's exception is raised here."""
        if self._pool is None:
            return _land_in_worker(self._config, table, outcome, run_id)
        return self._pool.submit(_land_in_worker, self._config, table, outcome, run_id).result()
