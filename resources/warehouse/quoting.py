"""Identifier and literal quoting by the SQL standard's rules (DuckDB and Postgres share them)."""

from __future__ import annotations


def quote_identifier(name: str) -> str:
    """A double-quoted identifier; any name (quotes, unicode, keywords) becomes exactly that name."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid SQL identifier {name!r}")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """A standard SQL string literal, for DDL that takes no parameters (COMMENT ON)."""
    if "\x00" in text:
        raise ValueError("a SQL literal cannot contain NUL")
    return "'" + text.replace("'", "''") + "'"
