"""Where a sync says how far each table's fetch got, in planned requests done.

Handed to the sync explicitly (in Dagster, the ``progress`` resource): the command line's feeds its
display; deployments give :data:`NO_PROGRESS` (the UI shows the step logs instead).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

Listener = Callable[[str, int, int], None]  # (table, planned requests done, planned requests)


@dataclass(frozen=True)
class FetchProgress:
    """A sync's progress channel: ``report`` passes each table's figures to the listener, if any,
    from the fetching threads (so it must be thread-safe)."""

    listener: Listener | None = field(default=None, repr=False)

    def report(self, table: str, done: int, total: int) -> None:
        """``done`` of the ``total`` planned requests of ``table`` have completed."""
        if self.listener is not None:
            self.listener(table, done, total)


#: The channel nobody listens to: a sync outside the command line.
NO_PROGRESS = FetchProgress()
