"""The snapshot upsert DuckDB and Postgres share: ``INSERT ... SELECT ... ON CONFLICT (key) DO UPDATE``."""

from __future__ import annotations

from resources.warehouse.contract import FIRST_SEEN_AT, IS_CURRENT, LAST_SEEN_AT, LOADED_AT, RUN_ID, TableSpec
from resources.warehouse.quoting import quote_identifier
from resources.warehouse.schema_evolution import LoadPlan


def upsert_statement(ref: str, spec: TableSpec, plan: LoadPlan, source: str, *, ts: str, run_id: str) -> str:
    """Insert the rows of ``source`` into the table ``ref``, a row whose key exists updated instead:
    every column takes this write's value (or NULL), the row is current again and seen now, and
    ``first_seen_at`` is kept. ``ts`` and ``run_id`` are the engine's placeholders for the stamp."""
    quoted = quote_identifier
    cols = ", ".join(quoted(c) for c in plan.load_columns)
    updates = [f"{quoted(c)} = EXCLUDED.{quoted(c)}" for c in plan.load_columns if c not in spec.key]
    updates += [f"{quoted(c)} = NULL" for c in plan.null_columns]
    updates += [
        f"{quoted(LOADED_AT)} = EXCLUDED.{quoted(LOADED_AT)}",
        f"{quoted(RUN_ID)} = EXCLUDED.{quoted(RUN_ID)}",
        f"{quoted(IS_CURRENT)} = true",
        f"{quoted(LAST_SEEN_AT)} = EXCLUDED.{quoted(LAST_SEEN_AT)}",
    ]
    system = ", ".join(quoted(c) for c in (LOADED_AT, RUN_ID, IS_CURRENT, FIRST_SEEN_AT, LAST_SEEN_AT))
    return (
        f"INSERT INTO {ref} ({cols}, {system}) SELECT {cols}, {ts}, {run_id}, true, {ts}, {ts} FROM {source} "
        f"ON CONFLICT ({', '.join(quoted(k) for k in spec.key)}) DO UPDATE SET {', '.join(updates)}"
    )
