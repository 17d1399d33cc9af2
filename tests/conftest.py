"""Shared fixtures live in plugin modules, one per part, so each can evolve alone."""

pytest_plugins = [
    "tests.fixtures_sandbox",
    "tests.fixtures_postgres",
    "tests.fixtures_bigquery",
    "tests.fixtures_spool",
]
