"""What every ``visibility-sync`` command prints to and exits with: its two consoles and its exit codes.

Exit codes (scripts rely on them; docs/OPERATIONS.md). A failure's code is its kind's
(``resources/failures.py``), so the command line and the sync's steps read one classification:

==  =======================================================================================
0   everything selected landed (``check``: the key works)
1   the sync failed or landed partially (a step failed, a requested brand was out of scope)
2   configuration or usage error, found before the first request (the message names the setting)
3   the service refused the key: invalid or revoked (401), subscription inactive (402),
    plan without API access or forbidden (403)
4   the service could not be reached or kept failing (network, 5xx, rate limits past the deadline,
    quota exceeded), or its answers broke the contract (paging, fields, a walk that never ends)
130 interrupted (Ctrl+C, SIGTERM, a cancelled sync)
==  =======================================================================================
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
