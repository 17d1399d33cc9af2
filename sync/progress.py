"""Where a sync says how far each table's fetch got, in planned requests done: a listener handed to
the sync explicitly (in Dagster, the ``progress`` resource). The command line's feeds its display;
deployments give :data:`NO_PROGRESS` (the UI shows the step logs instead). It is called from the
fetching threads, so it must be thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable

Listener = Callable[[str, int, int], None]  # (table, planned requests done, planned requests)


def _nowhere(table: str, done: int, total: int) -> None:
    """A sync outside the command line: nobody listens."""


NO_PROGRESS: Listener = _nowhere
