"""Compatibility path: the settings live in the top-level ``settings`` module; import from there.

Kept because modules written before the move (``pipelines/report.py``,
``pipelines/commands_operations.py``, ``tests/operations``) still import these names from here.
"""

from settings import ConfigError, Settings, load_settings

__all__ = ["ConfigError", "Settings", "load_settings"]
