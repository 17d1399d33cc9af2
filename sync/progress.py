"""Where a sync says how far each table's fetch got, in planned requests done.

Handed to the sync explicitly (in Dagster, the ``progress`` resource): the command line's feeds its
display; deployments give :data:`NO_PROGRESS` (the UI shows the step logs instead).
"""

from __future__ import annotations

from collections.abc import Callable

Listener = Callable[[str, int, int], None]  # (table, planned requests done, planned requests)


class FetchProgress:
    """A sync's progress channel: ``report`` passes each table's figures to the listener, if any.

    The listener is called from the fetching threads, so it must be thread-safe.
    """

    def __init__(self, listener: Listener | None = None) -> None:
        self._listener = listener

    def report(self, table: str, done: int, total: int) -> None:
        """``done`` of the ``total`` planned requests of ``table`` have completed."""
        if self._listener is not None:
            self._listener(table, done, total)

    def __repr__(self) -> str:
        return "FetchProgress()" if self._listener is None else "FetchProgress(listener)"


#: The channel nobody listens to: a sync outside the command line.
NO_PROGRESS = FetchProgress()
