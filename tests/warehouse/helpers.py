"""Specs and rows shared by the warehouse tests (no engine imports: child processes import this)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from resources.warehouse.base import Column, PartitionScope, TableSpec

D1 = dt.date(2026, 10, 1)
D2 = dt.date(2026, 10, 2)
D3 = dt.date(2026, 10, 3)

MENTIONS = TableSpec(
    name="mentions",
    description="Brand mentions per answer.",
    columns=(
        Column("id", pa.string(), "Mention id.", nullable=False),
        Column("brand_id", pa.string(), "Brand fetched for.", nullable=False),
        Column("engine", pa.string(), "Answer engine.", nullable=False),
        Column("checked_on", pa.date32(), "Day the answer was checked."),
        Column("brand_name", pa.string(), "Brand named."),
        Column("position", pa.float64(), "Position in the answer."),
        Column("mentions", pa.int64(), "How often."),
        Column("is_top", pa.bool_(), "Named first."),
        Column("observed_at", pa.timestamp("us", tz="UTC"), "When observed."),
        Column("tags", pa.list_(pa.string()), "Labels."),
        Column("details", pa.struct([("score", pa.int64()), ("label", pa.string())]), "Nested details."),
    ),
    key=("id",),
    kind="partitioned",
    date_column="checked_on",
)

COMPETITORS = TableSpec(
    name="competitors",
    description="Tracked competitors of each brand.",
    columns=(
        Column("brand_id", pa.string(), "Brand.", nullable=False),
        Column("id", pa.string(), "Competitor id.", nullable=False),
        Column("name", pa.string(), "Competitor name."),
        Column("domain", pa.string(), "Competitor domain."),
    ),
    key=("brand_id", "id"),
    kind="snapshot",
)


def mention_rows(
    brand: str,
    days: list[dt.date],
    engines: tuple[str, ...] = ("chatgpt", "claude"),
    *,
    per_cell: int = 2,
    name: str = "Acme",
    extra: dict[str, list[Any]] | None = None,
) -> pa.Table:
    """Rows of MENTIONS: ``per_cell`` rows for each day x engine of one brand."""
    cells = [(d, e, i) for d in days for e in engines for i in range(per_cell)]
    data: dict[str, list[Any]] = {
        "id": [f"{brand}-{d}-{e}-{i}" for d, e, i in cells],
        "brand_id": [brand] * len(cells),
        "engine": [e for _, e, _ in cells],
        "checked_on": [d for d, _, _ in cells],
        "brand_name": [name] * len(cells),
        "position": [float(i + 1) for *_, i in cells],
        "mentions": [i for *_, i in cells],
        "is_top": [i == 0 for *_, i in cells],
        "observed_at": [dt.datetime(d.year, d.month, d.day, 12, tzinfo=dt.UTC) for d, _, _ in cells],
        "tags": [["a", "b"] if i == 0 else None for *_, i in cells],
        "details": [{"score": i, "label": e} for _, e, i in cells],
    }
    table = pa.table(data, schema=MENTIONS.arrow_schema)
    for col, values in (extra or {}).items():
        table = table.append_column(col, pa.array(values))
    return table


def scope(
    brands: tuple[str, ...], start: dt.date, end: dt.date, engines=("chatgpt", "claude")
) -> PartitionScope:
    return PartitionScope(brand_ids=brands, start=start, end=end, engines=engines)
