"""Partitioned row tables with no rollup: prompt mentions and answers (their ``all`` cells stay empty)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from assets import tables as T
from assets import transforms as X
from assets.builders import PartitionedAsset
from assets.landing import slices
from assets.partitions import DAILY_PARTITIONS, ENGINES_WITH_ALL
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
    partitions_def=DAILY_PARTITIONS,
    engine_order=ENGINES_WITH_ALL,
    planner=plan_mentions,
    fetch_one=fetch_mentions,
    with_rollup=False,
    needs_prompts=True,
    upstream="prompts",
)
ANSWERS = PartitionedAsset(
    spec=T.ANSWERS,
    partitions_def=DAILY_PARTITIONS,
    engine_order=ENGINES_WITH_ALL,
    planner=plan_answers,
    fetch_one=fetch_answers,
    with_rollup=False,
    upstream="prompts",
)
