"""Partitions: daily ``date`` x static ``engine``, one definition for every partitioned table.

``all`` is the all-engine rollup; tables without one leave it empty but share the definition,
because Dagster's UI picks one date range for a group only when every root asset has the same one.
:data:`PARTITION_SETTINGS` are read alone at import, so a mistake in other settings does not stop it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping

from dagster import (
    DailyPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    PartitionKeyRange,
    StaticPartitionsDefinition,
)

from assets.dagster_tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    MULTIDIMENSIONAL_PARTITION_PREFIX,
    PARTITION_NAME_TAG,
)
from resources.api.endpoints import ENGINES_WITH_ALL
from settings import PartitionSettings, load_partition_settings

DATE_DIM = "date"
ENGINE_DIM = "engine"


def daily_partitions(start: dt.date) -> DailyPartitionsDefinition:
    """Days from ``start`` (``VISIBILITY_START_DATE``, default 90 days ago) to yesterday; users'
    date-only assets take it too (docs/DOWNSTREAM.md)."""
    return DailyPartitionsDefinition(start_date=start.isoformat())


def date_engine_partitions(start: dt.date) -> MultiPartitionsDefinition:
    return MultiPartitionsDefinition(
        {DATE_DIM: daily_partitions(start), ENGINE_DIM: StaticPartitionsDefinition(list(ENGINES_WITH_ALL))}
    )


PARTITION_SETTINGS: PartitionSettings = load_partition_settings()
DAILY_PARTITIONS = date_engine_partitions(PARTITION_SETTINGS.start_date)


def partition_key(day: dt.date, engine: str) -> str:
    return MultiPartitionKey({DATE_DIM: day.isoformat(), ENGINE_DIM: engine})


def parse_partition_keys(keys: list[str] | tuple[str, ...] | set[str]) -> set[tuple[dt.date, str]]:
    """``"2024-05-01|chatgpt"`` keys (a ``MultiPartitionKey`` reads so too) -> ``{(date, engine)}``."""
    out: set[tuple[dt.date, str]] = set()
    for key in keys:
        day, sep, engine = str(key).partition("|")
        if not sep:
            raise ValueError(f"not a date|engine partition key: {key!r}")
        out.add((dt.date.fromisoformat(day), engine))
    return out


class PartitionRequestError(ValueError):
    """A run whose tags do not say one set of partitions: it fails before fetching anything."""


class _RunTags:
    """A run's partition tags, read against ``partitions_def``; errors name the tags."""

    def __init__(self, tags: Mapping[str, str], partitions_def: MultiPartitionsDefinition) -> None:
        self.tags = tags
        self.partitions_def = partitions_def
        prefix = MULTIDIMENSIONAL_PARTITION_PREFIX
        self.by_dim = {k[len(prefix) :]: v for k, v in tags.items() if k.startswith(prefix)}
        self.dims = set(partitions_def.partition_dimension_names)

    def named(self) -> str:
        """The range, partition and per-dimension tags, as an error shows them."""
        names = (ASSET_PARTITION_RANGE_START_TAG, ASSET_PARTITION_RANGE_END_TAG, PARTITION_NAME_TAG)
        shown = {k: self.tags[k] for k in names if k in self.tags}
        shown.update({f"{MULTIDIMENSIONAL_PARTITION_PREFIX}{d}": v for d, v in self.by_dim.items()})
        return ", ".join(f"{k}={v!r}" for k, v in sorted(shown.items())) or "no partition tags"

    def parse(self, key: str, what: str) -> MultiPartitionKey:
        try:
            parsed = self.partitions_def.get_partition_key_from_str(key)
        except Exception as exc:
            raise PartitionRequestError(f"{what} {key!r} is not a date|engine partition key ({exc})") from exc
        if set(parsed.keys_by_dimension) != self.dims:
            raise PartitionRequestError(
                f"{what} {key!r} does not name every dimension of {sorted(self.dims)}"
            )
        return parsed

    def agree(self, first: MultiPartitionKey, why: str, copied_from: Collection[str] = ()) -> None:
        """The per-dimension tags name ``first``, or (a job backfill's copy) one of ``copied_from``."""
        unknown = set(self.by_dim) - self.dims
        clash = {d: v for d, v in self.by_dim.items() if d in self.dims and first.keys_by_dimension[d] != v}
        copied = set(self.by_dim) == self.dims and str(MultiPartitionKey(self.by_dim)) in copied_from
        if unknown or (clash and not copied):
            raise PartitionRequestError(
                f"the run's partition tags disagree ({why}): {self.named()}; "
                "re-launch it with one partition or one range"
            )

    def range_cells(
        self, start: str, end: str, job_backfill_partitions: Collection[str]
    ) -> set[tuple[dt.date, str]]:
        first, last = self.parse(start, "range start"), self.parse(end, "range end")
        self.agree(
            first, "per-dimension tags other than the range's first partition", job_backfill_partitions
        )
        try:
            keys = self.partitions_def.get_partition_keys_in_range(PartitionKeyRange(str(first), str(last)))
        except Exception as exc:
            raise PartitionRequestError(f"the range {start!r}..{end!r} cannot be resolved ({exc})") from exc
        if not keys:
            raise PartitionRequestError(f"the range {start!r}..{end!r} names no partition")
        return parse_partition_keys(list(keys))


def requested_cells(
    tags: Mapping[str, str],
    partitions_def: MultiPartitionsDefinition,
    job_backfill_partitions: Collection[str] = (),
) -> set[tuple[dt.date, str]]:
    """The ``(date, engine)`` cells a run was asked for (docs/OPERATIONS.md, "What each launch asks for").

    A range wins over the per-dimension tags a job backfill copies next to it, which must agree with
    it. Tags that do not say what was asked raise :class:`PartitionRequestError`: failing beats
    landing less.
    """
    run = _RunTags(tags, partitions_def)
    start, end = tags.get(ASSET_PARTITION_RANGE_START_TAG), tags.get(ASSET_PARTITION_RANGE_END_TAG)
    single = tags.get(PARTITION_NAME_TAG)
    if start or end:
        if not (start and end):
            raise PartitionRequestError(f"a partition range needs both ends: {run.named()}")
        if single:
            raise PartitionRequestError(f"a run has a range or one partition, not both: {run.named()}")
        return run.range_cells(start, end, job_backfill_partitions)
    if single:
        key = run.parse(single, "partition")
        run.agree(key, "per-dimension tags other than the partition's")
        return parse_partition_keys([key])
    if run.by_dim:
        if set(run.by_dim) != run.dims:
            raise PartitionRequestError(
                f"per-dimension tags name {sorted(run.by_dim)}, not every dimension of {sorted(run.dims)}: "
                f"{run.named()}"
            )
        return parse_partition_keys([MultiPartitionKey(run.by_dim)])
    raise PartitionRequestError("the run names no partition (no range, partition or per-dimension tags)")


def cell_keys(cells: set[tuple[dt.date, str]] | frozenset[tuple[dt.date, str]]) -> list[str]:
    """Partition keys of ``cells``, in date then engine order (the order events are recorded in)."""
    order = {engine: i for i, engine in enumerate(ENGINES_WITH_ALL)}
    return [
        str(partition_key(day, engine))
        for day, engine in sorted(cells, key=lambda c: (c[0], order.get(c[1], len(order)), c[1]))
    ]
