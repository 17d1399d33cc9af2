"""The command line's head start: a step takes the fetches made for exactly its selection (waiting
for one still running), asks nothing twice, gets a failed fetch's own error, and whatever no step
took is removed when the head start closes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from resources.api.access import ApiAccess
from resources.api.errors import AuthenticationError
from sandbox.limits import LimitsConfig
from sandbox.testing import SandboxHandle
from sync.catalog import ANSWERS, CITED_PAGES, PROMPT_MENTIONS
from sync.discovery import Discovery
from sync.head_start import HeadStart, Selection
from sync.prefetch import FetchCancelled, StopSignal
from sync.resume import ResumeStore
from sync.spool import SPOOL_PREFIX
from tests.sync.conftest import D, served

CELLS = frozenset((D, engine) for engine in ("chatgpt", "perplexity", "all"))
TABLES = (CITED_PAGES, PROMPT_MENTIONS, ANSWERS)


def api_for(sandbox: SandboxHandle, role: str = "workspace") -> ApiAccess:
    return ApiAccess(api_url=sandbox.url, api_key=sandbox.keys[role])


def never_stops() -> StopSignal:
    return StopSignal(threading.Event())


STEP = never_stops()


def test_a_step_takes_each_fetch_made_for_its_selection_and_asks_the_api_nothing_more(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    selection = Selection(CELLS, (), None, tmp_path)
    sandbox.reset_stats()
    step_store = ResumeStore(tmp_path)

    with closing(HeadStart(TABLES, selection, api_for(sandbox), Discovery()).start()) as ahead:
        outcomes = {
            t.spec.name: ahead.take(t.spec.name, selection, step_store, never_stops()) for t in TABLES
        }
        asked = served(sandbox)

    assert all(o is not None and o.spool.rows > 0 for o in outcomes.values()), outcomes
    assert all(o is not None and o.plan.cells == set(CELLS) for o in outcomes.values())
    # the brands listed once for the three tables, the prompts once (mentions), nothing after the takes
    assert asked["GET /v1/brands"] == 1 and served(sandbox) == asked
    for outcome in outcomes.values():  # taken: the step lands them, the head start removed none
        assert outcome is not None and Path(outcome.spool.directory).exists()
        outcome.spool.remove()
    # the journals were handed to the step's store: the step's finish removes them
    assert any(tmp_path.iterdir())
    step_store.finish()
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_a_step_asking_for_other_cells_brands_or_journal_fetches_for_itself(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    selection = Selection(CELLS, (), None, tmp_path)
    others = [
        dataclasses.replace(selection, cells=frozenset({(D, "chatgpt")})),
        dataclasses.replace(selection, only=("some-brand",)),
        dataclasses.replace(selection, resume_root=tmp_path / "elsewhere"),
    ]
    ahead = HeadStart([CITED_PAGES], selection, api_for(sandbox), Discovery()).start()
    try:
        assert [ahead.take("cited_pages", other, None, never_stops()) for other in others] == [None] * 3
        assert ahead.take("answers", selection, None, never_stops()) is None  # not a table it fetches
        ahead._thread.join(timeout=120)
        fetched = ahead._slots["cited_pages"].outcome
        assert fetched is not None and Path(fetched.spool.directory).exists()
    finally:
        ahead.close()
    assert not Path(fetched.spool.directory).exists()  # nobody took it: removed with the head start
    assert ahead.take("cited_pages", selection, None, STEP) is None  # nor handed out after


def test_a_refused_key_is_asked_once_and_every_later_table_is_left_to_the_step(
    sandbox: SandboxHandle, tmp_path: Path
) -> None:
    selection = Selection(CELLS, (), None, None)
    discovery = Discovery()
    sandbox.reset_stats()

    with closing(HeadStart(TABLES, selection, api_for(sandbox, "revoked"), discovery).start()) as ahead:
        with pytest.raises(AuthenticationError) as raised:
            ahead.take("cited_pages", selection, None, never_stops())
        later = [ahead.take(t.spec.name, selection, None, never_stops()) for t in TABLES[1:]]
        # the step's own listing after it gets the same refusal without asking again
        with api_for(sandbox, "revoked").get_client() as client, pytest.raises(AuthenticationError) as again:
            discovery.scope(client)

    assert later == [None, None]
    assert again.value is raised.value
    assert sum(served(sandbox).values()) == 1


def test_a_step_stopped_while_it_waits_for_a_fetch_stops_waiting(sandbox: SandboxHandle) -> None:
    selection = Selection(CELLS, (), None, None)
    stopped = threading.Event()
    stopped.set()
    ahead = HeadStart([PROMPT_MENTIONS], selection, api_for(sandbox), Discovery())  # never started
    try:
        with pytest.raises(FetchCancelled):
            ahead.take("prompt_mentions", selection, None, StopSignal(stopped))
    finally:
        ahead._slots["prompt_mentions"].done.set()  # let close() see it ended
        ahead.close()


def test_closing_stops_a_fetch_waiting_on_the_rate_limit_and_removes_its_spool(
    sandbox_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the fetch's spool goes
    slow = sandbox_factory(limits=LimitsConfig(rate_per_second=2.0, burst=2, endpoint_limit=100_000))
    days = frozenset((D - dt.timedelta(days=n), "all") for n in range(10))
    ahead = HeadStart([CITED_PAGES], Selection(days), api_for(slow), Discovery()).start()
    slot = ahead._slots["cited_pages"]
    assert wait_for(lambda: bool(spools(tmp_path)))  # the fetch spools: ten days at 2 requests/s

    ahead.close()

    assert slot.done.is_set() and slot.outcome is None and slot.error is not None
    assert spools(tmp_path) == []


def spools(folder: Path) -> list[Path]:
    return list(folder.glob(f"{SPOOL_PREFIX}*"))


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
