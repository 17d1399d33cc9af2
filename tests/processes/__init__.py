"""Processes: what a run starts ends with it; runs whose process is gone are ended."""
