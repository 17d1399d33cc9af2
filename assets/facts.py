"""Partitioned row assets with no rollup: prompt mentions and answers (date x 7 engines)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from dagster import AssetsDefinition

from assets import tables as T
from assets import transforms as X
from assets.builders import PartitionedAsset, build_partitioned_assets
from assets.landing import slices
from assets.partitions import ENGINE_PARTITIONS, ENGINES
from assets.planning import Call, plan_answers, plan_mentions
from resources.api.client import VisibilityClient


def fetch_mentions(client: VisibilityClient, call: Call) -> Iterator[pa.Table]:
    assert call.prompt_id is not None
    rows = client.list_prompt_mentions(
        call.prompt_id, engine=call.engine, start=call.window.start, end=call.window.end
    )
    for batch in slices(rows):
        yield X.mentions_table(batch, call.brand_id)


def fetch_answers(client: VisibilityClient, call: Call) -> Iterator[pa.Table]:
    rows = client.list_answers(
        call.brand_id, engine=call.engine, start=call.window.start, end=call.window.end
    )
    for batch in slices(rows):
        yield X.answers_table(batch, call.brand_id)


PROMPT_MENTIONS = PartitionedAsset(
    spec=T.PROMPT_MENTIONS,
    partitions_def=ENGINE_PARTITIONS,
    engine_order=ENGINES,
    planner=plan_mentions,
    fetch_one=fetch_mentions,
    with_rollup=False,
    needs_prompts=True,
    upstream="prompts",
)
ANSWERS = PartitionedAsset(
    spec=T.ANSWERS,
    partitions_def=ENGINE_PARTITIONS,
    engine_order=ENGINES,
    planner=plan_answers,
    fetch_one=fetch_answers,
    with_rollup=False,
    upstream="prompts",
)

#: answers last: its fetch (paged per brand over the whole range) is the longer one, and hides the
#: landing of the mentions fetched before it
sync_daily = build_partitioned_assets(
    "sync_daily",
    [PROMPT_MENTIONS, ANSWERS],
    group_name="visibility_daily",
    description="Prompt mentions and answers (date x 7 engines): fetched back to back, each landed "
    "while the next is fetched.",
)

fact_assets: list[AssetsDefinition] = [sync_daily]
