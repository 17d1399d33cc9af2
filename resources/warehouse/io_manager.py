"""Landed tables as pandas DataFrames for users' own assets, on every warehouse (docs/DOWNSTREAM.md).

Like Dagster's database IO managers, an input receives exactly the rows of the partitions it depends
on. It only reads (DuckDB read-only): the sync writes the tables.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dagster import ConfigurableIOManager, InputContext, OutputContext

from resources.warehouse.base import Warehouse
from resources.warehouse.resource import WarehouseResource

if TYPE_CHECKING:
    import pandas as pd

#: Definition metadata of a partitioned table asset: dimension name -> column (Dagster's convention).
PARTITION_EXPR = "partition_expr"


class LandedTablesIOManager(ConfigurableIOManager):
    """Hands the landed tables to your own assets as pandas DataFrames: the rows of the partitions
    each asset depends on (docs/DOWNSTREAM.md). It only reads."""

    warehouse: WarehouseResource

    def open_warehouse(self) -> Warehouse:
        """A new warehouse handle (closed after the input is read)."""
        return self.warehouse.get_warehouse()

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        raise TypeError(
            f"asset {context.asset_key.to_user_string() if context.has_asset_key else context.name}: "
            "the landed-tables IO manager only reads; the sync writes these tables. Give your own "
            "assets another io_manager_key."
        )

    def load_input(self, context: InputContext) -> pd.DataFrame:
        table = context.asset_key.path[-1]
        with self.open_warehouse() as warehouse:
            sql, params = select_statement(warehouse, table, context)
            # dates as pandas' datetime64 (Arrow's default, Python date objects, is dtype object)
            frame = warehouse.query(sql, params).to_pandas(date_as_object=False)
        if not context.has_asset_partitions:
            return frame
        cells = partition_cells(context.asset_partition_keys)
        return rows_in_cells(frame, partition_columns(context), cells)


def rows_in_cells(
    frame: pd.DataFrame, columns: Mapping[str, str], cells: set[tuple[dt.date, str]]
) -> pd.DataFrame:
    """The rows of ``frame`` (dates as datetime64) in ``cells``: the query reads first to last day x
    every engine of the cells, more than the cells whenever they are not one rectangle."""
    days = frame[columns["date"]].dt.date
    inside = [(d, e) in cells for d, e in zip(days, frame[columns["engine"]], strict=True)]
    # .loc: an empty list would select no columns through frame[...], not no rows
    return frame.loc[inside].reset_index(drop=True)


def select_statement(warehouse: Warehouse, table: str, context: InputContext) -> tuple[str, dict[str, Any]]:
    """The ``SELECT`` of the rows the input depends on (every row of an unpartitioned table)."""
    sql = f"SELECT * FROM {warehouse.table_ref(table)}"
    if not context.has_asset_partitions:
        return sql, {}
    columns = partition_columns(context)
    cells = partition_cells(context.asset_partition_keys)
    days, engines = {d for d, _ in cells}, {e for _, e in cells}
    if not cells:
        return f"{sql} WHERE 1 = 0", {}
    engine_list = ", ".join("'" + e.replace("'", "''") + "'" for e in sorted(engines))
    date_column, engine_column = columns["date"], columns["engine"]
    where = (
        f"{date_column} >= :first_day AND {date_column} <= :last_day AND {engine_column} IN ({engine_list})"
    )
    return f"{sql} WHERE {where}", {"first_day": min(days), "last_day": max(days)}


def partition_columns(context: InputContext) -> Mapping[str, str]:
    """The upstream asset's ``partition_expr`` (every partitioned table asset declares it,
    ``assets/builders.py``): the column of each partition dimension."""
    columns = context.upstream_output.definition_metadata[PARTITION_EXPR]  # type: ignore[union-attr]
    return getattr(columns, "value", columns)  # a JSON metadata value, or the raw mapping


def partition_cells(keys: Any) -> set[tuple[dt.date, str]]:
    """``date|engine`` partition keys (a ``MultiPartitionKey`` is that string) -> {(date, engine)}."""
    parts = (str(key).partition("|") for key in keys)
    return {(dt.date.fromisoformat(day), engine) for day, _, engine in parts}
