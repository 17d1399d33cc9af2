"""Keep pandas out of a process that only fetches and lands Arrow tables (Dagster-free).

pyarrow imports pandas on its first conversion of Python values, only to ask whether a value is a
DataFrame: a cost in start-up CPU and memory that nothing of a sync needs.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any


class _NoPandas(importlib.abc.MetaPathFinder):
    """pandas is not found in this process: pyarrow then takes it for not installed."""

    def __init__(self, process: str) -> None:
        self.process = process

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r} in {self.process}", name=name)
        return None


def keep_pandas_out(process: str) -> None:
    """From now on ``import pandas`` fails in this process (``process`` names it in the error).

    Call it at the start of a process that runs no user code. A process that already imported
    pandas keeps it (nothing is unloaded)."""
    if "pandas" in sys.modules or any(isinstance(f, _NoPandas) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _NoPandas(process))
