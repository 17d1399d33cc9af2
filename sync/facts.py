"""Partitioned row tables with no rollup: prompt mentions and answers (their ``all`` cells stay empty)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from resources.api import endpoints as api
from resources.api.client import VisibilityClient
from sync import tables as T
from sync import transforms as X
from sync.fetching import PartitionedTable
from sync.landing import slices
from sync.planning import Call, plan_answers, plan_mentions


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


PROMPT_MENTIONS = PartitionedTable(
    spec=T.PROMPT_MENTIONS,
    endpoints=(api.LIST_PROMPT_MENTIONS,),
    planner=plan_mentions,
    fetch_one=fetch_mentions,
    with_rollup=False,
    needs_prompts=True,
    upstream="prompts",
)
ANSWERS = PartitionedTable(
    spec=T.ANSWERS,
    endpoints=(api.LIST_ANSWERS,),
    planner=plan_answers,
    fetch_one=fetch_answers,
    with_rollup=False,
    upstream="prompts",
)
