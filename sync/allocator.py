"""Freed memory goes back to the system, in every process of a sync (Dagster-free).

Two allocators hold what a sync frees: Arrow's default pool (mimalloc keeps freed pages for reuse,
so a process that spooled or landed a large table would stay at its largest batch's memory for the
rest of the run: Arrow is switched to the C library's allocator), and glibc's ``malloc`` itself.
glibc serves a block above its mmap threshold from a mapping of its own, unmapped on ``free``; but
the threshold is dynamic: each such block freed raises it (up to 32 MiB), after which Arrow's
buffers of a few MiB come from the heaps of the fetch's threads, and a heap gives back only its top,
so a sync's peak kept memory it had already freed (bench/RESULTS.md, *Memory of the process tree*).
A fixed threshold (:data:`MMAP_THRESHOLD`) keeps every large block in its own
mapping; smaller blocks stay in the heaps, where reuse is cheap.
"""

from __future__ import annotations

import ctypes
import sys

import pyarrow as pa

#: glibc's ``mallopt`` parameter (malloc.h): the size from which a block gets its own mapping.
M_MMAP_THRESHOLD = -3
#: 1 MiB: a row batch's Arrow buffers get their own mapping; a page's decoded rows do not. (128 KiB,
#: glibc's start value, mapped and zeroed far more blocks for the same peak.)
MMAP_THRESHOLD = 1 << 20

_done = False


def return_freed_memory() -> None:
    """Arrow on the C library's allocator, and glibc's mmap threshold fixed (process-wide, once;
    called by the fetch and the landing)."""
    global _done
    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
    if _done:
        return
    _done = True
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has it too; a libc without it keeps its own)
        return
    mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(MMAP_THRESHOLD))
