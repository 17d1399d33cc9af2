"""What ``visibility-sync run`` and ``demo`` show while a sync runs, in API requests (planned while a
table is fetched, made once it landed): on a terminal, live bars; otherwise plain lines on stderr (so
stdout keeps the summary alone), one at least every :data:`HEARTBEAT_SECONDS`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

#: Longest a piped output stays silent while the sync runs.
HEARTBEAT_SECONDS = 10.0
#: A table's status on its bar, but once landed (its rows).
BAR_STATUS = {"fetching": "fetching", "landing": "fetched, landing", "failed": "[red]failed[/red]"}
#: What each step of a sync does first, by step key (the two ops of ``assets/builders.py``).
STEP_TEXTS = {"sync_snapshots": "listing brands, snapshot tables", "sync_daily": "listing prompts, planning"}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


@dataclass
class TableProgress:
    """One table: its requests (planned while fetching, made once landed) and where it is."""

    name: str
    done: int = 0
    total: int = 0
    state: str = "fetching"  # fetching | landing | landed | failed
    rows: int = 0


class _Requests(ProgressColumn):
    """``done/total requests``: the one unit of every figure the command shows."""

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text("")
        total = task.fields.get("requests", task.total)  # a bar's total is at least 1
        return Text(f"{int(task.completed)}/{int(total)} requests", style="progress.download")


class SyncProgress:
    """The sync's state as shown; thread-safe (fetch threads and the step's thread report). ``console``
    is where other status lines go (``waiting: ...``)."""

    def __init__(self, console: Console, *, live: bool) -> None:
        self.console = console
        self.live = live
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._tables: dict[str, TableProgress] = {}  # the current run's
        self._requests = 0  # made by the tables landed so far, every run
        self._stage = ""
        self._last_line = time.monotonic()
        self._bar: Progress | None = None
        self._tasks: dict[str, Any] = {}
        if live:
            self._bar = Progress(
                TextColumn("{task.description:<20}"),
                BarColumn(bar_width=24),
                _Requests(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            )
            self._stage_task = self._bar.add_task("sync", total=None, status="loading the Dagster job")

    def stage(self, text: str) -> None:
        """What the sync does now, when no table says more (starting Dagster, listing brands)."""
        with self._lock:
            self._set_stage(text)

    def on_fetch(self, table: str, done: int, total: int) -> None:
        """The progress channel: ``done`` of the ``total`` planned requests of ``table``."""
        with self._lock:
            item = self._tables.get(table)
            if item is None:
                item = self._tables[table] = TableProgress(table)
                if self._bar is None:
                    self._say(f"{table}: fetching, {_plural(total, 'request')} planned")
                else:  # each table lands while the next one is fetched
                    self._set_stage(f"fetching {table}")
            if item.state != "fetching":
                return
            item.done, item.total = done, total
            if done >= total:
                item.state = "landing"
            self._show(item)

    def finish(self, text: str = "done") -> None:
        """The sync ended: the top row shows every request the tables made."""
        with self._lock:
            self._stage = ""
            if self._bar is not None:
                done = self._requests
                self._bar.update(self._stage_task, total=done, completed=done, status=escape(text))

    def on_dagster_event(self, event: Any) -> None:
        """A Dagster event of one of the sync's runs (``instance.add_event_listener``)."""
        from dagster import DagsterEventType

        dagster_event = getattr(event, "dagster_event", None)
        if dagster_event is None:
            return
        kind = dagster_event.event_type
        if kind == DagsterEventType.RUN_START:
            with self._lock:  # a later run of the sync fetches its tables anew; the head start's stay
                self._tables = {n: t for n, t in self._tables.items() if t.state in ("fetching", "landing")}
        elif kind == DagsterEventType.STEP_START:
            step = dagster_event.step_key or ""
            self.stage(STEP_TEXTS.get(step, f"running {step}"))
        elif kind == DagsterEventType.ASSET_MATERIALIZATION:
            materialization = dagster_event.event_specific_data.materialization
            meta = {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}
            if "rows_landed" in meta:  # a table this display follows
                table = materialization.asset_key.to_user_string()
                self._landed(table, int(meta["rows_landed"] or 0), int(meta.get("requests_total") or 0))
        elif kind == DagsterEventType.STEP_FAILURE:
            with self._lock:
                for item in self._tables.values():
                    if item.state in ("fetching", "landing"):
                        item.state = "failed"
                        self._show(item)

    def _landed(self, table: str, rows: int, requests: int) -> None:
        with self._lock:
            item = self._tables.setdefault(table, TableProgress(table))  # a snapshot table: no reports
            if item.state == "landed":  # a run over a range: one event per partition, same figures
                return
            item.done = item.total = requests
            item.rows, item.state = rows, "landed"
            self._requests += requests
            self._show(item)

    def _set_stage(self, text: str) -> None:
        """Called under the lock."""
        self._stage = text
        if self._bar is not None:
            self._bar.update(self._stage_task, status=escape(text))
        else:
            self._say(text)

    def _show(self, item: TableProgress) -> None:
        """Called under the lock."""
        landed = f"landed {_plural(item.rows, 'row')}"
        if self._bar is not None:
            if item.name not in self._tasks:
                self._tasks[item.name] = self._bar.add_task(item.name, status="", requests=0)
            self._bar.update(
                self._tasks[item.name],
                completed=item.done,
                total=max(item.total, 1),
                status=landed if item.state == "landed" else BAR_STATUS[item.state],
                requests=item.total,  # a table listed by another's requests made none
            )
        elif item.state == "landed":
            self._say(f"{item.name}: {landed} ({_plural(item.total, 'request')})")
        elif item.state == "landing":
            self._say(f"{item.name}: fetched ({item.done}/{item.total} requests), landing")
        elif item.state == "failed":
            self._say(f"{item.name}: failed")

    def _say(self, text: str) -> None:
        """One line of the piped output (called under the lock)."""
        self._last_line = time.monotonic()
        seconds = int(self._last_line - self.started)
        elapsed = f"{seconds // 60}:{seconds % 60:02d}"
        self.console.print(f"[{elapsed}] {escape(text)}", soft_wrap=True, highlight=False)

    def heartbeat(self) -> None:
        """Say what runs when the piped output has been silent for :data:`HEARTBEAT_SECONDS`."""
        with self._lock:
            if self._bar is not None or time.monotonic() - self._last_line < HEARTBEAT_SECONDS:
                return
            busy = [
                f"{t.name} {t.done}/{t.total} requests" if t.state == "fetching" else f"{t.name} landing"
                for t in self._tables.values()
                if t.state in ("fetching", "landing")
            ]
            if busy:
                self._say("still running: " + ", ".join(busy))
            elif self._stage:
                self._say(f"still {self._stage}")


@contextmanager
def sync_progress(enabled: bool, console: Console, err: Console) -> Iterator[SyncProgress | None]:
    """The progress of a sync: live bars on ``console`` when it is a terminal, else lines on ``err``
    with a heartbeat; None when not ``enabled`` (``--quiet``)."""
    if not enabled:
        yield None
        return
    live = console.is_terminal
    view = SyncProgress(console if live else err, live=live)
    if view._bar is not None:
        with view._bar:
            yield view
        return
    stop = threading.Event()

    def beat_until_stopped() -> None:
        while not stop.wait(1.0):
            view.heartbeat()

    beat = threading.Thread(target=beat_until_stopped, name="progress-heartbeat", daemon=True)
    beat.start()
    try:
        yield view
    finally:
        stop.set()
        beat.join(timeout=2.0)
