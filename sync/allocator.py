"""Freed memory goes back to the system, in every process of a sync (Dagster-free).

Two allocators hold what a sync frees: Arrow's default pool (mimalloc keeps freed pages for reuse,
so a process that spooled or landed a large table would stay at its largest batch's memory for the
rest of the run: Arrow is switched to the C library's allocator), and glibc's ``malloc`` itself.
glibc serves a block above its mmap threshold from a mapping of its own, unmapped on ``free``; but
the threshold is dynamic: each such block freed raises it (up to 32 MiB), after which Arrow's
buffers of a few MiB come from the heaps of the fetch's threads, and a heap gives back only its top.
The command of a 10-day sync so kept 50 MB more at its peak (bench/RESULTS.md, *Memory of the
process tree*). A fixed threshold (:data:`MMAP_THRESHOLD`) keeps every large block in its own
mapping; smaller blocks stay in the heaps, where reuse is cheap.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

import pyarrow as pa

#: glibc's ``mallopt`` parameter (malloc.h): the size from which a block gets its own mapping.
M_MMAP_THRESHOLD = -3
#: 1 MiB: a row batch's Arrow buffers get their own mapping; a page's decoded rows do not. (128 KiB,
#: glibc's start value, mapped and zeroed far more blocks for the same peak.)
MMAP_THRESHOLD = 1 << 20

_done = False
_trim: Callable[[int], int] | None = None


def return_freed_memory() -> None:
    """Arrow on the C library's allocator, glibc's mmap threshold fixed (process-wide, once), and
    what glibc's heaps hold freed given back now (:func:`trim`). Called where a table's fetch or
    landing starts, and after a landing."""
    global _done, _trim
    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
    if not _done:
        _done = True
        libc = _glibc()
        if libc is not None:
            libc.mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(MMAP_THRESHOLD))
            _trim = libc.malloc_trim
    trim()


def trim() -> None:
    """Free pages inside glibc's heaps go back to the system (``malloc_trim``), in every arena.

    Each of the fetch's threads allocates from a heap (arena) of its own; what a thread frees there
    can serve only that arena, and a heap returns only its top by itself. Between two tables the
    command so held 40-90 MB freed (bench/RESULTS.md, *Memory of the process tree*).
    """
    if _trim is not None:
        _trim(0)


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc's (musl has no malloc_trim)
    except (OSError, AttributeError):
        return None
    return libc
