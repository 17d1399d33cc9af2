"""The backoff both warehouse retry loops use (DuckDB's wait for the file lock, BigQuery's
concurrent-update retry), as a tenacity wait strategy.

Jittered so that two writers refused at the same moment do not try again at the same moment.
"""

from __future__ import annotations

from tenacity import wait_exponential, wait_random_exponential
from tenacity.wait import wait_base


def jittered_backoff(first_seconds: float, most_seconds: float | None = None) -> wait_base:
    """Waits of ``first_seconds`` doubling after each attempt up to ``most_seconds`` (no cap when
    None), each scaled by a random factor between 0.5 and 1.5.

    Built as half the delay, fixed, plus a random part between nothing and the whole delay.
    """
    cap = {} if most_seconds is None else {"max": most_seconds}
    half_cap = {} if most_seconds is None else {"max": most_seconds / 2}
    return wait_exponential(multiplier=first_seconds / 2, **half_cap) + wait_random_exponential(
        multiplier=first_seconds, **cap
    )
