"""What every ``visibility-sync`` command prints to and exits with: its two consoles and its exit codes
(docs/OPERATIONS.md). A failure's code is its kind's (``resources/failures.py``): 0 ok, 1 failed or
partial, 2 configuration, 3 key refused, 4 service unavailable or broken, 130 interrupted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console

from resources.failures import FailureKind

EXIT_OK = 0
EXIT_PARTIAL = FailureKind.FAILED.exit_code
EXIT_CONFIG = FailureKind.CONFIGURATION.exit_code
EXIT_REFUSED = FailureKind.REFUSED.exit_code
EXIT_UNAVAILABLE = FailureKind.UNREACHABLE.exit_code
EXIT_INTERRUPTED = FailureKind.CANCELLED.exit_code

#: The command's results: summaries, plans, outcomes.
console = Console(stderr=False, highlight=False)
#: Errors, warnings and progress; one error, one line, even in a pipe.
err = Console(stderr=True, highlight=False, soft_wrap=True)


@contextmanager
def printing_log(name: str, level: int, say: Callable[[logging.LogRecord], object]) -> Iterator[None]:
    """Hand ``say`` the records of logger ``name`` at ``level`` and above while the block runs."""

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            say(record)

    logger = logging.getLogger(name)
    handler = Handler(level=level)
    previous = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
