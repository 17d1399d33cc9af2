"""The DDL builder (pure): one set of statements, spelled by each engine's dialect."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from resources.warehouse.contract import Column, TableSpec
from resources.warehouse.duckdb import DIALECT as DUCKDB
from resources.warehouse.schema_evolution import ExistingColumn, plan_load
from resources.warehouse.sql import SqlDialect, table_statements
from resources.warehouse.types import duckdb_type, from_duckdb_type, postgres_type
from tests.warehouse.helpers import COMPETITORS, MENTIONS

POSTGRES = SqlDialect(postgres_type)
REF = '"visibility"."t"'


def _created(dialect: SqlDialect, spec: TableSpec) -> str:
    plan = plan_load(spec, spec.arrow_schema, None, table_label="t", type_name=dialect.type_name)
    [create, *comments] = table_statements(dialect, spec, plan, REF)
    assert all(c.startswith("COMMENT ON ") for c in comments) and len(comments) == len(plan.comments)
    return create


def test_a_new_table_is_keyed_where_the_dialect_says_and_typed_in_its_words() -> None:
    duck, pg = _created(DUCKDB, MENTIONS), _created(POSTGRES, MENTIONS)
    assert duck.startswith(f'CREATE TABLE {REF} ("id" VARCHAR NOT NULL, ') and "PRIMARY KEY" not in duck
    assert pg.startswith(f'CREATE TABLE {REF} ("id" text NOT NULL, ') and pg.endswith('PRIMARY KEY ("id"))')
    assert '"_loaded_at" TIMESTAMPTZ' in duck and '"_loaded_at" timestamp with time zone' in pg
    assert _created(DUCKDB, COMPETITORS).endswith('PRIMARY KEY ("brand_id", "id"))')


def test_an_added_key_column_fills_the_existing_rows_with_its_default_quoted_as_a_literal() -> None:
    spec = dataclasses.replace(
        COMPETITORS,
        columns=(*COMPETITORS.columns, Column("tier", pa.string(), "Tier.", default="it's basic")),
    )
    names = [c.name for c in COMPETITORS.columns] + ["_loaded_at", "_run_id", "is_current"]
    names += ["first_seen_at", "last_seen_at"]
    kinds = {"_loaded_at": "TIMESTAMP WITH TIME ZONE", "first_seen_at": "TIMESTAMP WITH TIME ZONE"}
    kinds |= {"last_seen_at": "TIMESTAMP WITH TIME ZONE", "is_current": "BOOLEAN"}
    existing = [
        ExistingColumn(n, kinds.get(n, "VARCHAR"), from_duckdb_type(kinds.get(n, "VARCHAR"))) for n in names
    ]
    plan = plan_load(spec, spec.arrow_schema, existing, table_label="t", type_name=duckdb_type)
    statements = table_statements(DUCKDB, spec, plan, REF)
    assert statements[0] == f"ALTER TABLE {REF} ADD COLUMN \"tier\" VARCHAR DEFAULT 'it''s basic'"
    assert f"COMMENT ON COLUMN {REF}.\"tier\" IS 'Tier.'" in statements
