"""The competitor history sensor evaluated for real against the sandbox: a competitor tracked again
is backfilled by the service, and the sensor requests its trend partitions exactly once."""

import datetime as dt
from collections.abc import Callable

from dagster import AssetExecutionContext, DagsterInstance, PartitionKeyRange, asset, materialize

from assets.partitions import DAILY_PARTITIONS
from pipelines.sensors.competitor_history import (
    TAG_COMPETITORS,
    TREND_ASSET_KEYS,
    ObservedCompetitor,
    backfill_request,
    competitor_history_sensor,
)
from resources.api.client import VisibilityClient
from resources.api.endpoints import ENGINES_WITH_ALL
from sandbox.testing import SandboxHandle
from sync.discovery import BRANDS_TAG
from tests.sensors.conftest import api_resource, evaluate


def test_history_backfill_fires_once_per_competitor_from_its_history_date(
    sandbox_factory: Callable[..., SandboxHandle], instance: DagsterInstance
) -> None:
    handle = sandbox_factory(backfill_delay_seconds=3600.0)
    res = {"api": api_resource(handle)}
    with VisibilityClient(handle.url, handle.keys["workspace"]) as client:
        brands = list(client.list_brands())
        brand = brands[0]
        tracked = [c for c in client.list_tracked_competitors(brand["id"]) if c["history_from"]][:2]
        # the world also holds competitors whose backfill is running from the start
        backfilling_at_start = {
            (b["id"], c["brand_name"])
            for b in brands
            for c in client.list_tracked_competitors(b["id"])
            if c["history_from"] is None
        }

        baseline = evaluate(competitor_history_sensor, instance, None, res)
        assert baseline.run_requests == [] and "baseline" in baseline.skip_reason.skip_message

        for competitor in tracked:  # untrack and track again: the service backfills their history
            client.untrack_competitor(brand["id"], competitor["id"])
            handle.track(brand["id"], competitor["brand_name"])
        assert all(
            c["history_from"] is None
            for c in client.list_tracked_competitors(brand["id"])
            if c["brand_name"] in {t["brand_name"] for t in tracked}
        )

        backfilling = evaluate(competitor_history_sensor, instance, baseline.cursor, res)
        assert backfilling.run_requests == []

        handle.configure(backfill_delay_seconds=0)
        done = {
            (b["id"], c["brand_name"]): c for b in brands for c in client.list_tracked_competitors(b["id"])
        }
    expected = backfilling_at_start | {(brand["id"], t["brand_name"]) for t in tracked}
    history_from = min(dt.date.fromisoformat(done[k]["history_from"]) for k in expected)

    fired = evaluate(competitor_history_sensor, instance, backfilling.cursor, res)
    [request] = fired.run_requests
    assert list(request.asset_selection) == list(TREND_ASSET_KEYS)
    assert request.tags[BRANDS_TAG].split(",") == sorted({b for b, _ in expected})
    assert sorted(request.tags[TAG_COMPETITORS].split(",")) == sorted({done[k]["id"] for k in expected})
    keys = DAILY_PARTITIONS.get_partition_keys_in_range(request.partition_key_range)
    all_keys = DAILY_PARTITIONS.get_partition_keys()
    first_day = max(history_from, dt.date.fromisoformat(all_keys[0].split("|")[0]))
    assert keys == [k for k in all_keys if k.split("|")[0] >= first_day.isoformat()]
    assert {k.split("|")[1] for k in keys} == set(ENGINES_WITH_ALL)

    later = evaluate(competitor_history_sensor, instance, fired.cursor, res)
    again = evaluate(competitor_history_sensor, instance, later.cursor, res)  # e.g. after a restart
    assert later.run_requests == [] and again.run_requests == []
    assert isinstance(request.partition_key_range, PartitionKeyRange)


def test_history_run_request_launches_one_run_over_every_engine_from_the_date(
    instance: DagsterInstance,
) -> None:
    """Launched as Dagster launches it, the request's range is every (date, engine) from the date on."""
    seen: dict[str, object] = {}

    @asset(name="competitor_trends", partitions_def=DAILY_PARTITIONS)
    def stand_in(context: AssetExecutionContext) -> None:
        seen["keys"] = list(context.partition_keys)
        seen["brands"] = context.run.tags[BRANDS_TAG]

    keys = DAILY_PARTITIONS.get_partition_keys()
    start = dt.date.fromisoformat(keys[-8 * 5].split("|")[0])  # five days before the newest partition
    due = [
        ObservedCompetitor("brand-b", "c2", start + dt.timedelta(days=2), "t"),
        ObservedCompetitor("brand-a", "c1", start, "t"),
    ]
    request = backfill_request(due, keys)
    assert request is not None
    result = materialize([stand_in], instance=instance, tags=request.tags)
    assert result.success
    assert seen["keys"] == keys[-8 * 5 :]
    assert seen["brands"] == "brand-a,brand-b"
