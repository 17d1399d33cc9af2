"""The competitor history sensor: refetch trend partitions once a competitor's backfill finishes.

``history_from`` stays null while the service backfills a newly tracked competitor; once it is a
date, the trend partitions from then on are fetched again, once per tracking episode (docs/SENSORS.md).
"""

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetKey,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)
from pydantic import TypeAdapter

from assets.dagster_tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from assets.partitions import DAILY_PARTITIONS
from pipelines.sensors.audit_cursor import read_cursor, write_cursor
from resources.api.client import VisibilityClient
from resources.api.errors import ConfigurationError, NotFoundError, VisibilityAPIError
from resources.api.resource import VisibilityAPIResource
from sync.discovery import BRANDS_TAG

HISTORY_SENSOR_NAME = "competitor_history_sensor"
#: Longest a tick waits on rate limits and retries before giving up until the next tick.
TICK_REQUEST_DEADLINE_SECONDS = 30.0
TREND_ASSET_KEYS: tuple[AssetKey, ...] = (AssetKey("competitor_trends"), AssetKey("citation_trends"))
TAG_COMPETITORS = "visibility/history_competitors"
TAG_HISTORY_FROM = "visibility/history_from"
_UNSEEN = object()


@dataclass(frozen=True)
class ObservedCompetitor:
    """One tracked competitor as the API lists it now; once due, its trend partitions from
    ``history_from`` on are fetched again."""

    brand_id: str
    competitor_id: str
    history_from: dt.date | None
    tracked_since: str | None = None

    @property
    def key(self) -> str:
        return f"{self.brand_id}:{self.competitor_id}"

    @property
    def episode(self) -> str:
        """One tracking episode: a re-tracked competitor is a new episode."""
        return f"{self.key}:{self.tracked_since or ''}"


@dataclass(frozen=True)
class HistoryState:
    initialized: bool = False
    #: "brand:competitor" -> history_from (ISO date) or None while backfilling
    seen: Mapping[str, str | None] = field(default_factory=dict)
    #: tracking episode -> the history_from it was requested from
    requested: Mapping[str, str] = field(default_factory=dict)


_STATE = TypeAdapter(HistoryState)


def parse_cursor(raw: str | None) -> HistoryState:
    return read_cursor(raw, _STATE, HistoryState(), "competitor history cursor")


def dump_cursor(state: HistoryState) -> str:
    return write_cursor(state, _STATE)


def advance(
    state: HistoryState,
    observed: Iterable[ObservedCompetitor],
    *,
    listed_brands: Iterable[str],
) -> tuple[HistoryState, list[ObservedCompetitor]]:
    """Fold one listing into the state; return the competitors whose history backfill is due now.
    Only ``listed_brands``' entries are replaced: a brand that failed to list keeps its memory.
    """
    listed = set(listed_brands)
    seen = {k: v for k, v in state.seen.items() if k.split(":", 1)[0] not in listed}
    requested = dict(state.requested)
    due: list[ObservedCompetitor] = []
    for competitor in observed:
        before = state.seen.get(competitor.key, _UNSEEN)
        now_from = competitor.history_from
        seen[competitor.key] = None if now_from is None else now_from.isoformat()
        if now_from is None or competitor.episode in requested:
            continue
        transitioned = before is None or (before is _UNSEEN and state.initialized)
        if transitioned:
            requested[competitor.episode] = now_from.isoformat()
            due.append(competitor)
    return HistoryState(initialized=True, seen=seen, requested=requested), due


def partition_keys_from(start: dt.date, keys: Sequence[str]) -> list[str]:
    """The ``date|engine`` keys dated ``start`` or later, in the partitions definition's order."""
    cutoff = start.isoformat()
    return [k for k in keys if str(k).split("|", 1)[0] >= cutoff]


def _date(value: Any) -> dt.date | None:
    if value in (None, ""):
        return None
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value)[:10])


def observe(client: VisibilityClient) -> tuple[list[ObservedCompetitor], list[str]]:
    """Every brand's tracked competitors now; brands out of scope (404) are left out."""
    observed: list[ObservedCompetitor] = []
    listed: list[str] = []
    for brand in client.list_brands():
        brand_id = str(brand["id"])
        try:
            rows = list(client.list_tracked_competitors(brand_id))
        except NotFoundError:
            continue
        listed.append(brand_id)
        observed.extend(
            ObservedCompetitor(
                brand_id=brand_id,
                competitor_id=str(row["id"]),
                history_from=_date(row.get("history_from")),
                tracked_since=None if row.get("tracked_since") is None else str(row["tracked_since"]),
            )
            for row in rows
        )
    return observed, listed


def backfill_request(due: Sequence[ObservedCompetitor], partition_keys: Sequence[str]) -> RunRequest | None:
    """One run over every engine from the earliest ``history_from`` to the newest partition (None if
    empty)."""
    start = min(d.history_from for d in due if d.history_from is not None)
    keys = partition_keys_from(start, partition_keys)
    if not keys:
        return None
    episodes = sorted(d.episode for d in due)
    digest = hashlib.sha256("\n".join(episodes).encode()).hexdigest()[:16]
    return RunRequest(
        run_key=f"competitor-history:{digest}",
        asset_selection=list(TREND_ASSET_KEYS),
        tags={
            ASSET_PARTITION_RANGE_START_TAG: str(keys[0]),
            ASSET_PARTITION_RANGE_END_TAG: str(keys[-1]),
            # only the brands whose competitors were backfilled: others' trends did not change
            BRANDS_TAG: ",".join(sorted({d.brand_id for d in due})),
            TAG_COMPETITORS: ",".join(sorted({d.competitor_id for d in due})),
            TAG_HISTORY_FROM: start.isoformat(),
        },
    )


def _describe(due: Iterable[ObservedCompetitor]) -> str:
    return ", ".join(f"{d.competitor_id} (brand {d.brand_id}) from {d.history_from}" for d in due)


@sensor(
    name=HISTORY_SENSOR_NAME,
    asset_selection=list(TREND_ASSET_KEYS),
    minimum_interval_seconds=600,
    default_status=DefaultSensorStatus.RUNNING,
    description="When a tracked competitor's history_from turns from null to a date (the service "
    "finished backfilling it), refetches competitor and citation trends from that date onward, once.",
)
def competitor_history_sensor(context: SensorEvaluationContext, api: VisibilityAPIResource) -> SensorResult:
    try:  # the client checks the URL and key before its first request
        with api.get_client(retry_deadline_seconds=TICK_REQUEST_DEADLINE_SECONDS) as client:
            observed, listed = observe(client)
    except ConfigurationError as exc:
        return SensorResult(
            skip_reason=f"the API is not configured where this sensor runs: {exc}; set it in the "
            "environment of `dagster dev` (or of the daemon and the code location) and restart it",
            cursor=context.cursor,
        )
    except VisibilityAPIError as exc:
        return SensorResult(skip_reason=f"could not list competitors: {exc}", cursor=context.cursor)
    state = parse_cursor(context.cursor)
    first_tick = not state.initialized
    state, due = advance(state, observed, listed_brands=listed)
    cursor = dump_cursor(state)
    if not due:
        reason = "baseline taken" if first_tick else "no competitor finished its history backfill"
        return SensorResult(skip_reason=f"{reason} ({len(observed)} tracked competitors)", cursor=cursor)
    request = backfill_request(due, DAILY_PARTITIONS.get_partition_keys())
    context.log.info(f"history backfilled for {_describe(due)}")
    if request is None:
        return SensorResult(
            skip_reason=f"history of {_describe(due)} starts after the newest partition", cursor=cursor
        )
    return SensorResult(run_requests=[request], cursor=cursor)
