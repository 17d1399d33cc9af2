"""One key's budget shared through a locked file by every process that uses it on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from resources.api.budget import BudgetExhausted, RequestBudget
from resources.api.key_ledger import KeyLedger, LedgerState

KEY = "vsk_0123456789abcdef0123456789abcdef"
URL = "http://127.0.0.1:9"


def ledger_in(tmp_path: Path) -> KeyLedger:
    ledger = KeyLedger.for_key(URL, KEY, directory=tmp_path)
    assert ledger is not None
    return ledger


def answered(budget: RequestBudget, remaining: int, reset: int, *, limit: int = 20) -> None:
    """One request through ``budget``, answered with these X-RateLimit headers."""
    permit = budget.acquire("GET /v1/brands")
    headers = httpx.Headers(
        {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(reset),
        }
    )
    budget.observe(permit, headers)
    budget.release(permit)


def test_a_window_spent_by_one_process_holds_back_another(tmp_path: Path) -> None:
    first = RequestBudget(4, ledger=ledger_in(tmp_path))
    second = RequestBudget(4, ledger=ledger_in(tmp_path))  # another process: its own open file
    answered(first, remaining=0, reset=30)
    with pytest.raises(BudgetExhausted) as caught:
        second.acquire("GET /v1/brands", deadline=second.now() + 0.3)
    assert caught.value.scope == "global"
    assert second.snapshot().remaining == 0


def test_without_a_ledger_each_budget_paces_alone(tmp_path: Path) -> None:
    first, second = RequestBudget(4), RequestBudget(4)
    answered(first, remaining=0, reset=30)
    second.release(second.acquire("GET /v1/brands", deadline=second.now() + 0.3))


def test_requests_in_flight_of_every_process_count_against_the_slots(tmp_path: Path) -> None:
    first = RequestBudget(2, ledger=ledger_in(tmp_path))
    second = RequestBudget(2, ledger=ledger_in(tmp_path))
    answered(first, remaining=15, reset=1)
    answered(second, remaining=14, reset=1)
    held = [first.acquire("GET /v1/brands"), first.acquire("GET /v1/brands")]
    with pytest.raises(BudgetExhausted) as caught:
        second.acquire("GET /v1/brands", deadline=second.now() + 0.3)
    assert caught.value.scope == "concurrency"
    first.release(held.pop())
    second.release(second.acquire("GET /v1/brands", deadline=second.now() + 5))
    first.release(held.pop())


def test_a_retry_after_block_holds_back_every_process(tmp_path: Path) -> None:
    first = RequestBudget(4, ledger=ledger_in(tmp_path))
    second = RequestBudget(4, ledger=ledger_in(tmp_path))
    first.block(30.0)
    with pytest.raises(BudgetExhausted):
        second.acquire("GET /v1/brands", deadline=second.now() + 0.3)


def test_requests_of_a_process_that_died_are_forgotten(tmp_path: Path) -> None:
    ledger = ledger_in(tmp_path)
    command = [sys.executable, "-c", "import os; print(os.getpid())"]
    dead = subprocess.run(command, capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    state = LedgerState(seq=2, in_flight={1: (dead_pid, time.time()), 2: (dead_pid, time.time())})
    ledger.path.write_bytes(state.dump())
    budget = RequestBudget(1, ledger=ledger)
    answered(budget, remaining=10, reset=1)  # would wait forever if the dead process's requests held the slot
    with ledger.transaction() as current:
        assert current is not None and current.in_flight == {}


def test_the_ledger_names_neither_the_key_nor_keeps_it(tmp_path: Path) -> None:
    ledger = ledger_in(tmp_path)
    budget = RequestBudget(4, ledger=ledger)
    answered(budget, remaining=3, reset=1)
    assert KEY not in ledger.path.name and KEY[4:] not in ledger.path.name
    assert KEY[4:] not in ledger.path.read_text()
    assert json.loads(ledger.path.read_text())["remaining"] <= 3
    assert KeyLedger.for_key(URL, "vsk_other", directory=tmp_path).path != ledger.path  # type: ignore[union-attr]


def test_an_unreadable_ledger_leaves_the_process_pacing_alone(tmp_path: Path) -> None:
    ledger = ledger_in(tmp_path)
    ledger.path.mkdir()  # a directory where the file belongs: it cannot be opened
    budget = RequestBudget(4, ledger=ledger)
    answered(budget, remaining=0, reset=30)
    assert not ledger.usable
    with pytest.raises(BudgetExhausted):  # the local window still paces
        budget.acquire("GET /v1/brands", deadline=budget.now() + 0.3)


def test_the_last_process_to_leave_a_key_removes_its_ledger_and_folder(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    ledger = KeyLedger.for_key(URL, KEY, directory=folder)
    assert ledger is not None
    with ledger.transaction() as state:
        assert state is not None
        state.in_flight[1] = (ledger.pid, time.time())
    assert ledger.path.exists()

    ledger.release()

    assert not ledger.path.exists() and not folder.exists()


def test_a_ledger_another_live_process_uses_stays_and_a_process_reopens_a_removed_one(tmp_path: Path) -> None:
    import os

    ledger, other = ledger_in(tmp_path), ledger_in(tmp_path)
    with ledger.transaction() as state:
        assert state is not None
        state.in_flight[1] = (os.getppid(), time.time())  # a live process of the same user
    ledger.release()
    assert ledger.path.exists()
    with other.transaction() as state:
        assert state is not None and 1 in state.in_flight

    ledger.path.unlink()  # as the last process to leave does
    with other.transaction() as state:  # the open descriptor's file is gone: the ledger is reopened
        assert state is not None and state.in_flight == {}
        state.in_flight[2] = (other.pid, time.time())
    assert json.loads(ledger.path.read_bytes())["in_flight"]["2"][0] == other.pid


def test_a_bucket_learnt_by_one_process_paces_every_process_on_the_key(tmp_path: Path) -> None:
    first = RequestBudget(4, ledger=ledger_in(tmp_path))
    second = RequestBudget(4, ledger=ledger_in(tmp_path))
    # one request after another, and remaining never falls: the key refilled between every two
    for _ in range(4):
        answered(first, remaining=10, reset=1)
    answered(first, remaining=0, reset=30)  # spent: a fixed window would wait 30 s
    # a bucket refilling at (20 - 10 - 1) / 1 = 9 a second or more has a token again in 1/9 s
    second.release(second.acquire("GET /v1/brands", deadline=second.now() + 5))
    assert second.snapshot().remaining == 0


def test_a_429_while_paced_holds_every_process_back_until_the_reset(tmp_path: Path) -> None:
    first = RequestBudget(4, ledger=ledger_in(tmp_path))
    second = RequestBudget(4, ledger=ledger_in(tmp_path))
    for _ in range(4):
        answered(first, remaining=10, reset=1)
    first.block(0.01)  # a 429 while pacing: the key is not the bucket it seemed
    answered(first, remaining=0, reset=30)
    with pytest.raises(BudgetExhausted) as caught:
        second.acquire("GET /v1/brands", deadline=second.now() + 0.5)
    assert caught.value.wait_seconds > 20


def _state_with_requests(ledger: KeyLedger, count: int) -> None:
    with ledger.transaction() as state:
        assert state is not None
        state.limit, state.remaining = 20, 7
        state.in_flight = {seq: (ledger.pid, time.time()) for seq in range(1, count + 1)}
        state.seq = count


@pytest.mark.parametrize("cut", [1, 10, 57, -1])
def test_a_torn_ledger_file_starts_afresh_and_is_written_whole_again(tmp_path: Path, cut: int) -> None:
    ledger = ledger_in(tmp_path)
    _state_with_requests(ledger, 3)
    whole = ledger.path.read_bytes().rstrip()
    ledger.path.write_bytes(whole[:cut])  # a writer killed mid-write

    with ledger.transaction() as state:
        assert state is not None and state.in_flight == {} and state.remaining is None
        state.remaining = 5

    assert json.loads(ledger.path.read_bytes())["remaining"] == 5


@pytest.mark.parametrize(
    "foreign",
    [
        b"[1, 2, 3]",
        b'{"remaining": "many"}',
        b'{"in_flight": {"one": [1, 2.0]}}',
        b'{"in_flight": {"1": [1]}}',
        b'{"remaining": 1.5}',
        b"\x00\x01\x02 not json",
        b'{"remaining": 3} trailing',
    ],
)
def test_a_foreign_ledger_file_is_taken_for_a_fresh_state(tmp_path: Path, foreign: bytes) -> None:
    ledger = ledger_in(tmp_path)
    ledger.path.write_bytes(foreign)
    budget = RequestBudget(4, ledger=ledger)

    answered(budget, remaining=3, reset=1)

    written = json.loads(ledger.path.read_bytes())
    assert written["remaining"] <= 3 and written["in_flight"] == {} and written["members"] == [ledger.pid]


def test_a_state_that_shrinks_leaves_a_valid_file_and_a_much_shorter_one_cuts_it(tmp_path: Path) -> None:
    ledger = ledger_in(tmp_path)
    _state_with_requests(ledger, 3)
    _state_with_requests(ledger, 1)  # a little shorter: padded, not cut
    assert LedgerState.load(ledger.path.read_bytes()).in_flight.keys() == {1}
    assert json.loads(ledger.path.read_bytes())["seq"] == 1

    _state_with_requests(ledger, 400)  # several kilobytes
    large = ledger.path.stat().st_size
    _state_with_requests(ledger, 1)

    assert ledger.path.stat().st_size < large // 10  # cut, so a reader never reads kilobytes of padding
    assert json.loads(ledger.path.read_bytes())["in_flight"] == {
        "1": [ledger.pid, pytest.approx(time.time(), abs=60)]
    }
