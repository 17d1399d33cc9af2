"""One fetch per backfill, however many runs Dagster splits it into and wherever they run (Dagster-free).

The runs of a backfill may share no disk (each a Kubernetes pod), so they agree in the warehouse
(:mod:`resources.warehouse.handoffs`): the first run to reach a table claims it, fetches and lands
the cells of the whole backfill, and marks it landed; the others make no request for it, waiting
while a live run holds the claim, and replacing a claimant whose run ended without landing. Whether
a claimant still runs is the orchestrator's to say (``is_alive``): sync/ knows no Dagster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Set
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from resources.warehouse.base import Warehouse
from resources.warehouse.handoffs import CLAIMED, LANDED, Handoff
from sync.planning import Cell
from sync.prefetch import StopSignal


@dataclass
class BackfillHandoff:
    """This run's side of its backfill's handoffs."""

    backfill_id: str
    run_id: str
    open_warehouse: Callable[[], AbstractContextManager[Warehouse]]
    #: whether the run of this id may still land (not ended); the orchestrator's answer
    is_alive: Callable[[str], bool]

    def take(self, table: str, own: Set[Cell], stop: StopSignal) -> Handoff | None:
        """Wait until this run may go on with ``table``.

        Returns the handoff of the run that landed cells covering ``own`` (nothing to fetch), or None
        when this run now holds the claim: it fetches the backfill's cells, lands them, and calls
        :meth:`landed` (or :meth:`release` if it could not).
        """
        with self.open_warehouse() as warehouse:
            while True:
                current = warehouse.read_handoff(self.backfill_id, table)
                landed = current is not None and current.state == LANDED
                if landed and own <= {(dt.date.fromisoformat(day), engine) for day, engine in current.cells}:
                    return current
                claimable = (
                    current is None
                    or current.state != CLAIMED  # open, or landed without this run's cells
                    or current.claimant == self.run_id
                    or not self.is_alive(current.claimant)
                )
                if claimable and warehouse.claim_handoff(self.backfill_id, table, self.run_id, current):
                    return None
                if not claimable:
                    stop.wait(warehouse.handoff_poll_seconds)

    def landed(self, table: str, cells: Set[Cell], metadata: dict[str, Any]) -> bool:
        """Mark ``table`` landed by this run: ``cells`` and the landing's JSON-ready summary."""
        with self.open_warehouse() as warehouse:
            rows = sorted([day.isoformat(), engine] for day, engine in cells)
            return warehouse.land_handoff(self.backfill_id, table, self.run_id, rows, metadata)

    def release(self, table: str) -> bool:
        """Give the claim back (this run's fetch or landing failed): the next run to look claims it."""
        with self.open_warehouse() as warehouse:
            return warehouse.release_handoff(self.backfill_id, table, self.run_id)
