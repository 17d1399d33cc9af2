"""The CLI tests' ``env`` fixture (sandbox URL and key, a fresh DuckDB file), shared by this folder."""

from tests.pipelines.test_cli import env  # noqa: F401
