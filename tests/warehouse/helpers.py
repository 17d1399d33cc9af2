"""Specs and rows shared by the warehouse tests (no engine imports: child processes import this)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa

from resources.warehouse.contract import Column, PartitionScope, TableSpec

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
        Column("details", pa.string(), "Nested details, as JSON text."),
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
        "details": [json.dumps({"score": i, "label": e}) for _, e, i in cells],
    }
    table = pa.table(data, schema=MENTIONS.arrow_schema)
    for col, values in (extra or {}).items():
        table = table.append_column(col, pa.array(values))
    return table


def scope(
    brands: tuple[str, ...], start: dt.date, end: dt.date, engines=("chatgpt", "claude")
) -> PartitionScope:
    return PartitionScope(brand_ids=brands, start=start, end=end, engines=engines)


#: A brand id holding a NUL: its rows and its scope must land (and be replaced) the same way.
NUL_BRAND = "b\x001"
LANDED_NUL_BRAND = "b\ufffd1"


def nul_rows() -> pa.Table:
    """Two MENTIONS rows with NUL characters in a key, text, a list item and JSON text."""
    return pa.table(
        {
            "id": ["m\x001", "m2"],
            "brand_id": [NUL_BRAND, NUL_BRAND],
            "engine": ["chatgpt", "chatgpt"],
            "checked_on": [D1, D1],
            "brand_name": ["A\x00cme", "plain"],
            "position": [1.0, 2.0],
            "mentions": [1, 2],
            "is_top": [True, False],
            "observed_at": [None, None],
            "tags": [["a\x00", "b"], ["c"]],
            "details": ['{"score": 1, "label": "x\x00y"}', None],
        },
        schema=MENTIONS.arrow_schema,
    )


def nul_scope() -> PartitionScope:
    return scope((NUL_BRAND,), D1, D2, ("chatgpt",))


def landed_nul_values(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What the engines give back for :func:`nul_rows` (its JSON text parsed)."""
    return sorted(
        (
            r["id"],
            r["brand_id"],
            r["brand_name"],
            list(r["tags"] or []),
            None if r["details"] is None else json.loads(r["details"]),
        )
        for r in rows
    )


EXPECTED_NUL_VALUES = [
    ("m2", LANDED_NUL_BRAND, "plain", ["c"], None),
    ("m\ufffd1", LANDED_NUL_BRAND, "A\ufffdcme", ["a\ufffd", "b"], {"score": 1, "label": "x\ufffdy"}),
]
