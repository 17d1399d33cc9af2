"""Tests of resources/warehouse (DuckDB and Postgres)."""
