"""The competitor history sensor: refetch trend partitions once a competitor's backfill finishes.

Each tick lists the brands and their tracked competitors (1 + brands requests, all reads), folds
them into the cursor (:mod:`pipelines.sensors.history_cursor`), and when competitors' ``history_from``
turned from null into a date requests one run of ``competitor_trends`` and ``citation_trends`` over
every engine, from the earliest such date to the newest partition, for those competitors' brands only
(run tag ``visibility/brands``): one single-run partition range, which the assets' planner fetches
with the fewest calls.

The tick is given the code location's ``api`` resource. When ``dagster dev`` was started without
``VISIBILITY_API_URL``/``KEY``, that resource holds no URL or key (``pipelines/resources.py``), and
each tick skips saying which variable is missing, without a request.
"""

import datetime as dt
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from dagster import (
    AssetKey,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from assets.dagster_tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from assets.partitions import DAILY_PARTITIONS
from pipelines.sensors.client import sensor_client
from pipelines.sensors.history_cursor import (
    HistoryBackfill,
    ObservedCompetitor,
    advance,
    dump_cursor,
    parse_cursor,
    partition_keys_from,
)
from resources.api.client import VisibilityClient
from resources.api.config import KEY_SETTING, URL_SETTING
from resources.api.errors import ConfigurationError, NotFoundError, VisibilityAPIError
from resources.api.resource import VisibilityAPIResource
from sync.discovery import BRANDS_TAG

HISTORY_SENSOR_NAME = "competitor_history_sensor"
#: Longest a tick waits on rate limits and retries before giving up until the next tick.
TICK_REQUEST_DEADLINE_SECONDS = 30.0
TREND_ASSET_KEYS: tuple[AssetKey, ...] = (AssetKey("competitor_trends"), AssetKey("citation_trends"))
TAG_COMPETITORS = "visibility/history_competitors"
TAG_HISTORY_FROM = "visibility/history_from"


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


def backfill_request(due: Sequence[HistoryBackfill], partition_keys: Sequence[str]) -> RunRequest | None:
    """One run over every engine from the earliest due date to the newest partition (None if empty)."""
    start = min(d.start for d in due)
    keys = partition_keys_from(start, partition_keys)
    if not keys:
        return None
    episodes = sorted(d.competitor.episode for d in due)
    digest = hashlib.sha256("\n".join(episodes).encode()).hexdigest()[:16]
    return RunRequest(
        run_key=f"competitor-history:{digest}",
        asset_selection=list(TREND_ASSET_KEYS),
        tags={
            ASSET_PARTITION_RANGE_START_TAG: str(keys[0]),
            ASSET_PARTITION_RANGE_END_TAG: str(keys[-1]),
            # only the brands whose competitors were backfilled: others' trends did not change
            BRANDS_TAG: ",".join(sorted({d.competitor.brand_id for d in due})),
            TAG_COMPETITORS: ",".join(sorted({d.competitor.competitor_id for d in due})),
            TAG_HISTORY_FROM: start.isoformat(),
        },
    )


def _describe(due: Iterable[HistoryBackfill]) -> str:
    return ", ".join(
        f"{d.competitor.competitor_id} (brand {d.competitor.brand_id}) from {d.start}" for d in due
    )


def unconfigured(api: VisibilityAPIResource) -> None:
    """A ConfigurationError naming the first API setting the resource lacks or holds wrong."""
    for setting, value in ((URL_SETTING, api.api_url), (KEY_SETTING, api.api_key)):
        if not value:
            raise ConfigurationError(f"{setting} is not set")
    api.validate_settings()


@sensor(
    name=HISTORY_SENSOR_NAME,
    asset_selection=list(TREND_ASSET_KEYS),
    minimum_interval_seconds=600,
    default_status=DefaultSensorStatus.RUNNING,
    description="When a tracked competitor's history_from turns from null to a date (the service "
    "finished backfilling it), refetches competitor and citation trends from that date onward, once.",
)
def competitor_history_sensor(context: SensorEvaluationContext, api: VisibilityAPIResource) -> SensorResult:
    try:
        unconfigured(api)
    except ConfigurationError as exc:
        return SensorResult(
            skip_reason=f"the API is not configured where this sensor runs: {exc}; set it in the "
            "environment of `dagster dev` (or of the daemon and the code location) and restart it",
            cursor=context.cursor,
        )
    state = parse_cursor(context.cursor)
    try:
        with sensor_client(api, TICK_REQUEST_DEADLINE_SECONDS) as client:
            observed, listed = observe(client)
    except VisibilityAPIError as exc:
        return SensorResult(skip_reason=f"could not list competitors: {exc}", cursor=context.cursor)
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
