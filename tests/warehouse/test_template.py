"""The write procedure is defined once (``Warehouse`` in base.py) and engines implement only hooks.

The behaviour of writes is the contract of test_writers.py, test_landing_atomic.py and the engine
tests; these tests hold the shape that keeps it in one place, and the hooks' own contracts.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import resources.warehouse.bigquery as bigquery_module
import resources.warehouse.duckdb as duckdb_module
import resources.warehouse.duckdb_lock as duckdb_lock_module
import resources.warehouse.duckdb_memory as duckdb_memory_module
import resources.warehouse.postgres as postgres_module
from resources.warehouse.base import Warehouse
from resources.warehouse.bigquery import BigQueryWarehouse
from resources.warehouse.contract import PartitionWrite, SnapshotScope
from resources.warehouse.duckdb import DuckDBWarehouse
from resources.warehouse.postgres import PostgresWarehouse
from tests.fixtures_bigquery import BigQueryTarget
from tests.warehouse.conftest import COMPETITORS, D1, D2, D3, MENTIONS, Case, mention_rows, scope

ENGINES: tuple[type[Warehouse], ...] = (DuckDBWarehouse, PostgresWarehouse, BigQueryWarehouse)
ENGINE_MODULES = (duckdb_module, duckdb_lock_module, duckdb_memory_module, postgres_module, bigquery_module)
#: The methods that hold the write procedure (base.py); engines implement the hooks they call, never these.
TEMPLATE_METHODS = (
    "ensure_table",
    "replace_partitions",
    "replace_partitions_together",
    "upsert_snapshot",
    "query",
    "_land_partitions",
    "_stage_write",
    "read_handoff",
    "claim_handoff",
    "land_handoff",
    "release_handoff",
)
#: The procedure's steps: only base.py runs them.
PROCEDURE_STEPS = frozenset(
    {"partition_writes", "check_snapshot_write", "dedupe_by_key", "encode_rows", "clean_snapshot_scope"}
)
HOOKS = (
    "_write_transaction",
    "_prepare_table",
    "_stage",
    "_apply_replace",
    "_apply_merge",
    "_may_repeat_a_key",
)


@pytest.mark.parametrize("engine", ENGINES, ids=lambda c: c.__name__)
def test_engines_override_no_template_method(engine: type[Warehouse]) -> None:
    overridden = [name for name in TEMPLATE_METHODS if name in vars(engine)]
    assert overridden == [], f"{engine.__name__} redefines the write procedure: {overridden}"
    assert not inspect.isabstract(engine)


@pytest.mark.parametrize("module", ENGINE_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_engine_modules_never_run_a_step_of_the_procedure_themselves(module: Any) -> None:
    tree = ast.parse(Path(inspect.getfile(module)).read_text(encoding="utf-8"))
    called = {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
    }
    assert called & PROCEDURE_STEPS == set()
    stamps = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "now"
        and getattr(node.value, "id", "") == "WriteStamp"
    ]
    assert stamps == [], "engines stamp writes through the template, not themselves"


def _record(warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each hook call of ``warehouse``, by name, in order (the real hooks still run)."""
    calls: list[str] = []
    for name in HOOKS:
        hook: Callable[..., Any] = getattr(warehouse, name)

        def recorded(*args: Any, _hook: Callable[..., Any] = hook, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _hook(*args, **kwargs)

        monkeypatch.setattr(warehouse, name, recorded)
    return calls


def competitor_rows() -> pa.Table:
    return pa.table(
        {
            "brand_id": ["b1", "b1"],
            "id": ["c1", "c2"],
            "name": ["One", "Two"],
            "domain": [None, "two.example"],
        },
        schema=COMPETITORS.arrow_schema,
    )


def _two_day_landing() -> list[PartitionWrite]:
    return [
        PartitionWrite(mention_rows("b1", [D1]), scope(("b1",), D1, D2)),
        PartitionWrite(mention_rows("b1", [D2]), scope(("b1",), D2, D3)),
    ]


def test_each_write_is_applied_before_the_next_is_staged(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB and Postgres hold one chunk's stage at a time, all inside one write transaction."""
    calls = _record(case.warehouse, monkeypatch)
    results = case.warehouse.replace_partitions_together(MENTIONS, _two_day_landing(), "run-1")
    per_write = ["_prepare_table", "_may_repeat_a_key", "_stage", "_apply_replace"]
    assert calls == ["_write_transaction", *per_write, *per_write]
    assert [r.rows_written for r in results] == [4, 4]


def test_a_snapshot_is_staged_then_merged_with_its_retirement_scope(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = competitor_rows()
    case.warehouse.upsert_snapshot(COMPETITORS, rows, "run-1", SnapshotScope("brand_id", ("b1",)))
    calls = _record(case.warehouse, monkeypatch)
    result = case.warehouse.upsert_snapshot(
        COMPETITORS, rows.slice(0, 1), "run-2", SnapshotScope("brand_id", ("b1",))
    )
    assert calls == ["_write_transaction", "_prepare_table", "_may_repeat_a_key", "_stage", "_apply_merge"]
    assert (result.rows_written, result.rows_deleted) == (1, 1)


def test_a_column_scope_without_values_reaches_the_merge_as_no_retirement(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    retire_given: list[Any] = []
    merge = case.warehouse._apply_merge

    def recorded(tx: Any, spec: Any, staged: Any, retire: Any) -> int:
        retire_given.append(retire)
        return merge(tx, spec, staged, retire)

    monkeypatch.setattr(case.warehouse, "_apply_merge", recorded)
    case.warehouse.upsert_snapshot(COMPETITORS, competitor_rows(), "run-1", SnapshotScope("brand_id", ()))
    assert retire_given == [None]


def test_bigquery_stages_every_write_of_a_landing_then_applies_them_in_one_script(
    bigquery_target: BigQueryTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh = bigquery_target.warehouse()
    spec = dataclasses.replace(MENTIONS, name=bigquery_target.prefix + MENTIONS.name)
    calls = _record(wh, monkeypatch)
    results = wh.replace_partitions_together(spec, _two_day_landing(), "run-1")
    per_write = ["_prepare_table", "_may_repeat_a_key", "_stage"]
    assert calls == ["_write_transaction", *per_write, *per_write, "_apply_replace"]
    assert [r.rows_written for r in results] == [4, 4]
