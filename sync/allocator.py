"""Freed memory goes back to the system, in every process of a sync (Dagster-free).

Arrow's default pool (mimalloc) keeps freed pages, and glibc's dynamic mmap threshold moves Arrow's
buffers into thread heaps that give back only their top: a sync's peak would keep memory it had
freed. Arrow uses the C library's allocator, and a fixed threshold keeps large blocks mapped.
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
