"""Run every benchmark in turn, each in its own process; each writes its own section of ``bench/RESULTS.md``.

Usage: ``.venv/bin/python bench/run_all.py [name ...]`` with names among sandbox, api, warehouse,
backfill (default: all; the backfill benchmark alone takes most of an hour on 2 cores), or
``backfill-quick`` (its ``--quick``, RESULTS.md left alone), ``sync`` (``bench_sync.py``) or
``small`` (``bench_small.py``, beside a dlt peer: needs ``pip install -e '.[bench]'``) or ``floor``
(``bench_floor.py``: a 30-day sync's timeline and the floor the stack's parts set, about 2 minutes).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
BENCHMARKS = ("sandbox", "api", "warehouse", "backfill")
#: other ways to run a benchmark: name -> (benchmark, its arguments)
VARIANTS = {
    "backfill-quick": ("backfill", ["--quick"]),
    # by name only: the whole-tree sync figures (about 8 minutes) and the dlt peer (needs `.[bench]`)
    "sync": ("sync", []),
    "small": ("small", []),
    "floor": ("floor", []),
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS) - set(VARIANTS))
    if unknown:
        known = ", ".join([*BENCHMARKS, *VARIANTS])
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {known}")
        return 2
    failed = []
    for name in names:
        bench, extra = VARIANTS.get(name, (name, []))
        print(f"== bench_{bench}.py {' '.join(extra)}".rstrip(), flush=True)
        done = subprocess.run([sys.executable, str(BENCH_DIR / f"bench_{bench}.py"), *extra], check=False)
        if done.returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    print(f"figures: {BENCH_DIR / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
