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


#: The tags that name a run's partitions as a whole (shown when they are refused).
RANGE_AND_NAME_TAGS = (ASSET_PARTITION_RANGE_START_TAG, ASSET_PARTITION_RANGE_END_TAG, PARTITION_NAME_TAG)


class PartitionRequestError(ValueError):
    """A run whose tags do not say one set of partitions: it fails before fetching anything."""


def requested_cells(
    tags: Mapping[str, str],
    partitions_def: MultiPartitionsDefinition,
    job_backfill_partitions: Collection[str] = (),
) -> set[tuple[dt.date, str]]:
    """The ``(date, engine)`` cells a run was asked for, read from its tags by one rule.

    Every launch shape reaches a run as tags (docs/OPERATIONS.md, "What each launch asks for"):

    * a range (``dagster/asset_partition_range_start`` / ``_end``: the schedule, the command line,
      asset backfills, job backfills, the launchpad's range): the rectangle of dates x engines
      between its ends, as Dagster's ``MultiPartitionsDefinition`` reads a range. It wins over the
      per-dimension tags, which a *job* backfill copies from the range's first partition next to
      the range (Dagster's run context then reads that one partition only: the defect this rule
      closes). Those copies must name the range's first partition or, in a job backfill's run
      (``job_backfill_partitions``: the backfill's partition keys), one of the backfill's partitions
      (Dagster copies the first partition of the chunk of runs it submits onto each of them); any
      other value is a conflict;
    * one partition (``dagster/partition``, with or without ``dagster/partition/<dimension>``);
    * ``dagster/partition/<dimension>`` tags alone, naming every dimension.

    Anything else (one end of a range, a range that names no partition, tags that disagree, a
    dimension missing) raises :class:`PartitionRequestError` naming the tags: a run that cannot tell
    what it was asked for fails rather than land less.
    """
    start, end = tags.get(ASSET_PARTITION_RANGE_START_TAG), tags.get(ASSET_PARTITION_RANGE_END_TAG)
    single = tags.get(PARTITION_NAME_TAG)
    by_dim = {
        k[len(MULTIDIMENSIONAL_PARTITION_PREFIX) :]: v
        for k, v in tags.items()
        if k.startswith(MULTIDIMENSIONAL_PARTITION_PREFIX)
    }
    dims = set(partitions_def.partition_dimension_names)

    def named(*keys: str) -> str:
        shown = {k: tags[k] for k in keys if k in tags}
        shown.update({f"{MULTIDIMENSIONAL_PARTITION_PREFIX}{d}": v for d, v in by_dim.items()})
        return ", ".join(f"{k}={v!r}" for k, v in sorted(shown.items())) or "no partition tags"

    def parse(key: str, what: str) -> MultiPartitionKey:
        try:
            parsed = partitions_def.get_partition_key_from_str(key)
        except Exception as exc:
            raise PartitionRequestError(f"{what} {key!r} is not a date|engine partition key ({exc})") from exc
        if set(parsed.keys_by_dimension) != dims:
            raise PartitionRequestError(f"{what} {key!r} does not name every dimension of {sorted(dims)}")
        return parsed

    def agree(first: MultiPartitionKey, why: str, copied_from: Collection[str] = ()) -> None:
        unknown = set(by_dim) - dims
        clash = {d: v for d, v in by_dim.items() if d in dims and first.keys_by_dimension[d] != v}
        if clash and not unknown and set(by_dim) == dims and str(MultiPartitionKey(by_dim)) in copied_from:
            return  # the job backfill's copy of its first partition's tags
        if unknown or clash:
            raise PartitionRequestError(
                f"the run's partition tags disagree ({why}): {named(*RANGE_AND_NAME_TAGS)}; "
                "re-launch it with one partition or one range"
            )

    if start or end:
        if not (start and end):
            raise PartitionRequestError(f"a partition range needs both ends: {named(*RANGE_AND_NAME_TAGS)}")
        if single:
            raise PartitionRequestError(
                f"a run has a range or one partition, not both: {named(*RANGE_AND_NAME_TAGS)}"
            )
        first, last = parse(start, "range start"), parse(end, "range end")
        agree(first, "per-dimension tags other than the range's first partition", job_backfill_partitions)
        try:
            keys = partitions_def.get_partition_keys_in_range(PartitionKeyRange(str(first), str(last)))
        except Exception as exc:
            raise PartitionRequestError(f"the range {start!r}..{end!r} cannot be resolved ({exc})") from exc
        if not keys:
            raise PartitionRequestError(f"the range {start!r}..{end!r} names no partition")
        return parse_partition_keys(list(keys))
    if single:
        key = parse(single, "partition")
        agree(key, "per-dimension tags other than the partition's")
        return parse_partition_keys([key])
    if by_dim:
        if set(by_dim) != dims:
            raise PartitionRequestError(
                f"per-dimension tags name {sorted(by_dim)}, not every dimension of {sorted(dims)}: {named()}"
            )
        return parse_partition_keys([MultiPartitionKey(by_dim)])
    raise PartitionRequestError("the run names no partition (no range, partition or per-dimension tags)")


def cell_keys(cells: set[tuple[dt.date, str]] | frozenset[tuple[dt.date, str]]) -> list[str]:
    """Partition keys of ``cells``, in date then engine order (the order events are recorded in)."""
    order = {engine: i for i, engine in enumerate(ENGINES_WITH_ALL)}
    return [
        str(partition_key(day, engine))
        for day, engine in sorted(cells, key=lambda c: (c[0], order.get(c[1], len(order)), c[1]))
    ]
