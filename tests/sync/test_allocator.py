"""A sync's processes give freed memory back: Arrow's on the C allocator, glibc's large blocks unmapped."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Frees blocks of 4 MiB with smaller blocks allocated between them (as a fetch's threads do), after
#: one 8 MiB block freed (which raises glibc's dynamic mmap threshold): prints how much of the freed
#: memory the process still holds (RSS), in MiB.
_HELD_AFTER_FREE = """
import ctypes, sys
import pyarrow as pa
from sync.allocator import return_freed_memory
if sys.argv[1] == "fixed":
    return_freed_memory()
    assert pa.default_memory_pool().backend_name == "system"
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
libc.free(libc.malloc(8 << 20))
before = rss()
blocks, pins = [], []
for _ in range(40):
    block = libc.malloc(4 << 20)
    ctypes.memset(block, 1, 4 << 20)
    blocks.append(block)
    pins.append(libc.malloc(200 << 10))
for block in blocks:
    libc.free(block)
print(rss() - before)
"""


def _held_after_free(mode: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    out = subprocess.run(
        [sys.executable, "-c", _HELD_AFTER_FREE, mode], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)
def test_large_blocks_freed_between_small_ones_go_back_to_the_system() -> None:
    assert _held_after_free("fixed") < 16  # of 160 MiB freed
    assert _held_after_free("default") > 80  # what glibc's dynamic threshold keeps without it
