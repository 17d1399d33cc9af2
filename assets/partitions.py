"""Partitions: daily ``date`` x static ``engine``.

Two engine dimensions: the seven engines (mentions, answers: the service has no all-engine rollup
of rows), and the seven plus ``all`` for the endpoints with a rollup (competitor trends, citation
trends, citation URLs), because rollup rates are not sums of per-engine rates.

Multi-partition keys read ``<date>|<engine>`` (Dagster orders dimensions by name).
"""

from __future__ import annotations

import datetime as dt

from dagster import (
    DailyPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
)

from pipelines.config import start_date_from_env
from resources.api.endpoints import ENGINES

ALL_ENGINES = "all"
ENGINES_WITH_ALL: tuple[str, ...] = (*ENGINES, ALL_ENGINES)

DATE_DIM = "date"
ENGINE_DIM = "engine"


def daily_partitions(start: dt.date | None = None) -> DailyPartitionsDefinition:
    """Days from ``start`` (``VISIBILITY_START_DATE``, default 90 days ago) to yesterday."""
    return DailyPartitionsDefinition(start_date=(start or start_date_from_env()).isoformat())


def engine_partitions(start: dt.date | None = None) -> MultiPartitionsDefinition:
    return MultiPartitionsDefinition(
        {DATE_DIM: daily_partitions(start), ENGINE_DIM: StaticPartitionsDefinition(list(ENGINES))}
    )


def rollup_partitions(start: dt.date | None = None) -> MultiPartitionsDefinition:
    return MultiPartitionsDefinition(
        {DATE_DIM: daily_partitions(start), ENGINE_DIM: StaticPartitionsDefinition(list(ENGINES_WITH_ALL))}
    )


#: Built once at import from the environment, as Dagster needs a fixed definition per code location.
ENGINE_PARTITIONS = engine_partitions()
ROLLUP_PARTITIONS = rollup_partitions()


def partition_key(day: dt.date, engine: str) -> str:
    return MultiPartitionKey({DATE_DIM: day.isoformat(), ENGINE_DIM: engine})


def parse_partition_keys(keys: list[str] | tuple[str, ...] | set[str]) -> set[tuple[dt.date, str]]:
    """``"2024-05-01|chatgpt"`` keys -> ``{(date, engine)}``, accepting MultiPartitionKey or plain strings."""
    out: set[tuple[dt.date, str]] = set()
    for key in keys:
        if isinstance(key, MultiPartitionKey):
            by_dim = key.keys_by_dimension
            out.add((dt.date.fromisoformat(by_dim[DATE_DIM]), by_dim[ENGINE_DIM]))
            continue
        day, sep, engine = str(key).partition("|")
        if not sep:
            raise ValueError(f"not a date|engine partition key: {key!r}")
        out.add((dt.date.fromisoformat(day), engine))
    return out
