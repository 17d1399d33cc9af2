"""Fixtures that start a real Postgres server (owned by the warehouse work)."""
