"""What every ``visibility-sync`` command prints to and exits with: its two consoles and its exit codes
(docs/OPERATIONS.md). A failure's code is its kind's (``resources/failures.py``): 0 ok, 1 failed or
partial, 2 configuration, 3 key refused, 4 service unavailable or broken, 130 interrupted.
"""

from __future__ import annotations

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
