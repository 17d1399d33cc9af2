"""Run every benchmark in turn; each writes its own section of ``bench/RESULTS.md``.

Usage: ``.venv/bin/python bench/run_all.py [name ...]`` with names among sandbox, api, warehouse,
backfill (default: all, about 15 minutes on 2 cores). Each benchmark runs in its own process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
BENCHMARKS = ("sandbox", "api", "warehouse", "backfill")


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
        return 2
    failed = []
    for name in names:
        print(f"== bench_{name}.py", flush=True)
        done = subprocess.run([sys.executable, str(BENCH_DIR / f"bench_{name}.py")], check=False)
        if done.returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    print(f"figures: {BENCH_DIR / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
