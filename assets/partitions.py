"""Partitions: daily ``date`` x static ``engine``, one definition for every partitioned table.

The engine dimension holds the seven engines plus ``all``, the all-engine rollup of the endpoints
that have one (competitor trends, citation trends, citation URLs: rollup rates are not sums of
per-engine rates). Prompt mentions and answers have no rollup, so their ``all`` partitions are empty
by definition (nothing is fetched or written there). They share the definition anyway, because
Dagster lets the UI pick a date range for a group only when every asset at its root has the same
partitions definition: one backfill dialog then covers every daily table.

Multi-partition keys read ``<date>|<engine>`` (Dagster orders dimensions by name).

Dagster needs one fixed partitions definition per code location, when the assets are declared, i.e.
at import: :data:`PARTITION_SETTINGS` (first day, lookback) are therefore the settings this layer
reads itself, once, through ``settings.py`` (the only reader of the environment), and those alone,
so a mistake in the API or warehouse settings does not stop the import.
"""

from __future__ import annotations

import datetime as dt

from dagster import (
    DailyPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
)

from resources.api.endpoints import ENGINES_WITH_ALL
from settings import PartitionSettings, load_partition_settings

DATE_DIM = "date"
ENGINE_DIM = "engine"


def daily_partitions(start: dt.date) -> DailyPartitionsDefinition:
    """Days from ``start`` (``VISIBILITY_START_DATE``, default 90 days ago) to yesterday."""
    return DailyPartitionsDefinition(start_date=start.isoformat())


def date_engine_partitions(start: dt.date) -> MultiPartitionsDefinition:
    return MultiPartitionsDefinition(
        {DATE_DIM: daily_partitions(start), ENGINE_DIM: StaticPartitionsDefinition(list(ENGINES_WITH_ALL))}
    )


#: Read once at import (module docstring); the checks' default lookback too.
PARTITION_SETTINGS: PartitionSettings = load_partition_settings()
DAILY_PARTITIONS = date_engine_partitions(PARTITION_SETTINGS.start_date)


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
