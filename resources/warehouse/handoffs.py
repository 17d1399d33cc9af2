"""The backfill handoffs table: how the runs of one backfill, which may share no disk, agree in the
warehouse which of them fetches and lands each date x engine table (docs/ARCHITECTURE.md).

Every change to a (backfill, table) row is one compare-and-set statement, so two runs cannot both
claim it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TABLE = "_visibility_backfill_handoffs"
OPEN, CLAIMED, LANDED = "open", "claimed", "landed"


@dataclass(frozen=True)
class HandoffDialect:
    """What differs by engine: the column types, and how a missing row is inserted without a race."""

    text: str
    timestamp: str
    #: ``INSERT .. ON CONFLICT DO NOTHING`` needs a primary key (DuckDB, Postgres); BigQuery has none
    #: enforced: its insert of the same open row twice leaves two identical rows, which every
    #: statement below treats as one (each UPDATE changes both alike, reads take one).
    primary_key: bool = True
    now: str = "CURRENT_TIMESTAMP"


@dataclass(frozen=True)
class Handoff:
    """A table's handoff as read from the warehouse."""

    claimant: str
    state: str
    cells: list[list[str]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def create_statement(ref: str, dialect: HandoffDialect) -> str:
    t, ts = dialect.text, dialect.timestamp
    key = ", PRIMARY KEY (backfill_id, table_name)" if dialect.primary_key else ""
    return (
        f"CREATE TABLE IF NOT EXISTS {ref} (backfill_id {t} NOT NULL, table_name {t} NOT NULL, "
        f"claimant_run_id {t} NOT NULL, state {t} NOT NULL, cells {t}, metadata {t}, "
        f"claimed_at {ts}, landed_at {ts}{key})"
    )


def insert_open_statement(ref: str, dialect: HandoffDialect) -> str:
    """The table's row, open, unless it exists (parameters ``:backfill``, ``:name``)."""
    columns = "(backfill_id, table_name, claimant_run_id, state, claimed_at)"
    if dialect.primary_key:
        return (
            f"INSERT INTO {ref} {columns} VALUES (:backfill, :name, '', '{OPEN}', {dialect.now}) "
            "ON CONFLICT DO NOTHING"
        )
    return (
        f"INSERT INTO {ref} {columns} SELECT :backfill, :name, '', '{OPEN}', {dialect.now} "
        f"FROM UNNEST([1]) WHERE NOT EXISTS (SELECT 1 FROM {ref} "
        "WHERE backfill_id = :backfill AND table_name = :name)"
    )


def _where(ref: str) -> str:
    return (
        f"UPDATE {ref} SET {{}} WHERE backfill_id = :backfill AND table_name = :name "
        "AND claimant_run_id = :was AND state = :state"
    )


def claim_statement(ref: str, dialect: HandoffDialect) -> str:
    """Claim the row for ``:run`` if it still is (``:was``, ``:state``)."""
    return _where(ref).format(
        f"claimant_run_id = :run, state = '{CLAIMED}', cells = NULL, metadata = NULL, "
        f"claimed_at = {dialect.now}, landed_at = NULL"
    )


def landed_statement(ref: str, dialect: HandoffDialect) -> str:
    """Mark the row landed by its claimant ``:was`` (``:state`` claimed), with ``:cells``, ``:metadata``."""
    return _where(ref).format(
        f"state = '{LANDED}', cells = :cells, metadata = :metadata, landed_at = {dialect.now}"
    )


def release_statement(ref: str) -> str:
    """Open the row again if ``:was`` still claims it (its fetch or landing failed)."""
    return _where(ref).format(f"claimant_run_id = '', state = '{OPEN}'")


def read_statement(ref: str) -> str:
    return (
        f"SELECT claimant_run_id, state, cells, metadata FROM {ref} "
        "WHERE backfill_id = :backfill AND table_name = :name"
    )


def handoff_of(row: dict[str, Any]) -> Handoff:
    return Handoff(
        claimant=row["claimant_run_id"],
        state=row["state"],
        cells=json.loads(row["cells"]) if row["cells"] else [],
        metadata=json.loads(row["metadata"]) if row["metadata"] else {},
    )
