"""The paging walk's position travels as an argument: a fetch given a ``WalkPosition`` starts at its
cursor and keeps it current, and ``slices`` cuts at page ends naming the cursor that continues the
walk (what ``sync.resume`` journals). Real HTTP against the sandbox, pages of five rows."""

from __future__ import annotations

import datetime as dt
from itertools import islice

import pyarrow as pa

from resources.api import endpoints as ep
from resources.api.client import VisibilityClient
from resources.api.paging import WalkPosition
from sandbox.testing import SandboxHandle
from sync.facts import paged_rows, pages_of
from sync.fetching import slices
from sync.planning import Call, Window
from tests.sync.conftest import D

PAGE = 5
WINDOW = Window(D - dt.timedelta(days=6), D + dt.timedelta(days=1))
READ = pages_of(ep.LIST_ANSWERS, limit=PAGE)


def _ids(rows: list[dict], brand_id: str) -> pa.Table:
    return pa.table({"id": [row["id"] for row in rows]})


def _walk(client: VisibilityClient, brand_id: str, walk: WalkPosition | None = None):
    return READ(client, brand_id, engine=None, start=WINDOW.start, end=WINDOW.end, walk=walk)


def test_a_fetch_given_a_walk_position_starts_at_its_cursor_and_counts_its_pages(
    sandbox: SandboxHandle,
) -> None:
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        brand_id = next(iter(client.list_brands()))["id"]
        every = [row["id"] for row in _walk(client, brand_id)]
        assert len(every) > 3 * PAGE
        first = WalkPosition()
        rows = _walk(client, brand_id, first)
        assert [row["id"] for row in islice(rows, 2 * PAGE + 1)] == every[: 2 * PAGE + 1]
        assert first.pages == 2 and first.cursor is not None  # two pages yielded whole

        resumed = WalkPosition(start_cursor=first.cursor)
        fetch = paged_rows(READ, _ids)
        tables = list(fetch(client, Call(ep.LIST_ANSWERS.key, brand_id, WINDOW), resumed))
    assert pa.concat_tables(tables).column("id").to_pylist() == every[2 * PAGE :]
    assert resumed.pages == -(-len(every) // PAGE) - 2
    assert resumed.cursor is None  # the walk is over


def test_slices_of_a_walk_end_at_a_page_end_naming_the_cursor_that_continues_it(
    sandbox: SandboxHandle,
) -> None:
    with VisibilityClient(sandbox.url, sandbox.keys["workspace"]) as client:
        brand_id = next(iter(client.list_brands()))["id"]
        walk = WalkPosition()
        batches = slices(_walk(client, brand_id, walk), walk, 2 * PAGE)
        first = next(batches)
        cursor = walk.emitted
        # half of the slice size is held at the first page end: cut there
        assert len(first) == PAGE and walk.pages == 1 and cursor is not None
        rest = [row["id"] for batch in batches for row in batch]
        assert walk.emitted is None  # the last rows complete the call
        again = [row["id"] for row in _walk(client, brand_id, WalkPosition(start_cursor=cursor))]
    assert again == rest
