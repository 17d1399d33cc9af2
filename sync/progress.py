"""Where a sync says how far each table's fetch got, as the calls of the table's plan complete.

The channel is handed to the sync explicitly (in Dagster, as the ``progress`` resource): the command
line gives one that feeds its display (``pipelines/cli_progress.py``); deployments give
:data:`NO_PROGRESS`, since the Dagster UI shows the step logs instead. The unit is the request: each
planned call is one request, and the further pages of a paged call (and retries) are counted by the
table's materialization (``requests_total``), which the command line then shows in their place.
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
