"""Run every benchmark in turn; each writes its own section of ``bench/RESULTS.md``.

Usage: ``.venv/bin/python bench/run_all.py [name ...]`` with names among sandbox, api, warehouse,
backfill (default: all; on 2 cores about 15 minutes without the backfill benchmark, which launches
its backfills through a real webserver and daemon and takes most of an hour on the large workspace),
or ``backfill-quick`` (the backfill benchmark's ``--quick``: demo workspace, 3 days, a few scenarios,
about 10 minutes, RESULTS.md left alone), ``sync`` (``bench_sync.py``: CPU per landed row, pace,
memory of the whole process tree, one key shared by four runs) or ``small`` (``bench_small.py``:
small syncs beside a dlt ``rest_api`` peer; needs ``pip install -e '.[bench]'``). Each benchmark
runs in its own process.
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
