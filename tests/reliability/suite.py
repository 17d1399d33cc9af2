"""Reliability suite: nothing half-landed, nothing left behind, fail fast and say why.

    .venv/bin/python tests/reliability/suite.py [--quick] [--scenario NAME ...]
        [--backend duckdb|postgres ...] [--bad KIND ...] [--kills N] [--days N] [--seed N] [--json PATH]

The real ``visibility-sync run`` as a process against the sandbox (in this process, one world for
the whole suite), real DuckDB files and an embedded Postgres, :mod:`bench.proxy` where answers must
be bad. Scenarios: ``soak`` (hostile profile lands what a clean run lands), ``sigkill`` (seeded
kills, no survivor, no torn table, the re-run converges and removes the killed run's spools),
``overlap`` (two runs at once), ``keys`` (the key, echoed by a proxy in every form, is written
nowhere), ``limits`` (retry deadline, start-date bound), ``bad`` (bad answers: a clear error or a
correct landing, never a partial table). ``sigkill`` and ``overlap`` sync more than 7 days, so each
table lands in several writes (the spool's 3-day buckets) in one transaction. Tables are compared
as multisets of rows over every column but the writer's.
``--quick`` is what ``test_reliability.py`` runs. Figures go to ``## Reliability`` of bench/RESULTS.md.
A test harness, not a benchmark (it has no speed or memory target): it lives with the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from bench import processes as P  # noqa: E402
from bench import proxy  # noqa: E402
from bench.proxy import ANSWERS, BRANDS, MENTIONS, EchoKey  # noqa: E402
from sync.resume import TEMP_PREFIX  # noqa: E402

SECTION = "## Reliability"
SCENARIOS: tuple[str, ...] = ("soak", "sigkill", "overlap", "keys", "bad", "limits")
BACKENDS: tuple[str, ...] = ("duckdb", "postgres")
SCHEMA = "visibility"
#: Columns the writer owns (stamps of a run, first/last seen): never compared.
WRITER_COLUMNS = frozenset({"_loaded_at", "_run_id", "first_seen_at", "last_seen_at"})
#: Unknown fields the hostile profile adds to rows (``sandbox/faults.py``): land as extra columns.
SANDBOX_EXTRA_FIELDS = frozenset({"x_sandbox_extra", "confidence", "model_family", "labels", "request_cost"})
#: Documented exit codes of ``visibility-sync`` (docs/OPERATIONS.md).
DOCUMENTED_EXIT_CODES = frozenset({0, 1, 2, 3, 4, 130})
QUICK_BAD_KINDS: tuple[str, ...] = (
    "wrong_type_position",
    "truncated_json",
    "html_200",
    "endless_cursor",
    "endless_cursor_fresh",
    "nul_text",
)
#: key run -> the echoing proxy's rewrite (None: no proxy), whether the run should land
KEY_RUNS: dict[str, tuple[Callable[[str], proxy.Rewrite | None], bool]] = {
    "success": (lambda kind: None, True),
    "success_echo": (lambda kind: EchoKey(kind, fail_first=True), True),
    "fail_500_echo": (lambda kind: EchoKey(kind, persistent=(MENTIONS, 2, 500, "internal_error")), False),
    "fail_401_echo": (lambda kind: EchoKey(kind, persistent=(BRANDS, 1, 401, "invalid_api_key")), False),
    "fail_html_echo": (lambda kind: EchoKey(kind, persistent=(ANSWERS, 2, 200, ""), html=True), False),
    "killed_echo": (lambda kind: EchoKey(kind), False),
}
for _form in ("tail", "tail_upper", "url_escaped", "json_escaped"):  # the key's forms in a 400's body
    KEY_RUNS[f"fail_400_{_form}_echo"] = (
        lambda kind, form=_form: EchoKey(kind, persistent=(MENTIONS, 2, 400, "invalid_request"), form=form),
        False,
    )
QUICK_KEY_RUNS: tuple[str, ...] = ("success_echo", "fail_500_echo", "killed_echo", "fail_400_tail_echo")
#: Seconds a descendant of a finished or killed CLI may take to go before it counts as a survivor.
KILLED_GRACE_SECONDS = 3.0
EXITED_GRACE_SECONDS = 12.0
#: The table each bad answer lands in, when it lands.
BAD_KIND_TABLE = {
    kind: {MENTIONS: "prompt_mentions", ANSWERS: "answers", proxy.PROMPTS: "prompts"}[pattern]
    for kind, (pattern, *_) in proxy.ROW_REWRITES.items()
}
#: Longest line a clear error may print (a 2 MB string echoed into a message is not clear).
MAX_LINE_CHARS = 2000


# ---------------------------------------------------------------------------------------------
# configuration and results


@dataclass
class SuiteConfig:
    """What to run and how big; ``quick`` is the CI subset."""

    scenarios: tuple[str, ...] = SCENARIOS
    backends: tuple[str, ...] = BACKENDS
    bad_kinds: tuple[str, ...] = proxy.DEFAULT_BAD_KINDS
    key_runs: tuple[str, ...] = tuple(KEY_RUNS)
    days: int = 3
    long_days: int = 9
    kills: int = 4
    overlap_rounds: int = 3
    soak_seeds: int = 1
    seed: int = 20261123
    size: str = "demo"
    run_timeout: float = 420.0
    retry_deadline: float = 15.0
    quick: bool = False

    @classmethod
    def quick_config(cls, **changes: Any) -> SuiteConfig:
        quick: dict[str, Any] = dict(backends=("duckdb",), bad_kinds=QUICK_BAD_KINDS, key_runs=QUICK_KEY_RUNS)
        quick.update(days=2, long_days=8, kills=1, overlap_rounds=1, run_timeout=240.0, quick=True)
        return cls(**{**quick, **changes})


@dataclass
class Result:
    """One scenario on one backend: pass/fail, its runs and seconds, what was observed."""

    scenario: str
    backend: str
    passed: bool | None = None  # None: the harness could not decide (said in ``observed``)
    runs: int = 0
    seconds: float = 0.0
    observed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic, repr=False)

    def fail(self, message: str) -> None:
        self.observed.append(message)

    def fail_each(self, problems: Iterable[str], prefix: str = "") -> None:
        self.observed += [prefix + problem for problem in problems]

    def done(self, undecided: bool = False) -> Result:
        """Its seconds since it was made, and its verdict: passed when nothing was observed."""
        self.seconds = time.monotonic() - self.began
        self.passed = None if undecided else not self.observed
        return self

    @property
    def verdict(self) -> str:
        return {True: "pass", False: "FAIL", None: "error"}[self.passed]

    def to_dict(self) -> dict[str, Any]:
        fields = dataclasses.asdict(self)
        del fields["passed"], fields["began"]
        return {**fields, "result": self.verdict, "seconds": round(self.seconds, 1)}


# ---------------------------------------------------------------------------------------------
# CLI processes


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cli_command() -> list[str]:
    script = ROOT / ".venv" / "bin" / "visibility-sync"
    return [str(script) if script.exists() else shutil.which("visibility-sync") or "visibility-sync"]


class CliProcess(P.Service):
    """One ``visibility-sync run`` process (a :class:`~bench.processes.Service`: it dies with the suite)
    and, once :meth:`finish` returned, how it ended, what it printed and what it left running."""

    rc: int | None = None
    seconds = 0.0
    killed_at: float | None = None  # seconds after start when SIGKILL was sent
    finished_before_kill = False
    timed_out = False
    stdout = stderr = ""

    def __init__(self, label: str, argv: Sequence[str], env: Mapping[str, str], rundir: Path) -> None:
        super().__init__(label, argv, env, rundir, rundir / "stdout.txt", stderr=rundir / "stderr.txt")
        self.label = label
        self.cwd = rundir
        self.tmpdir = Path(env["TMPDIR"])
        self.dagster_home = Path(env["DAGSTER_HOME"]) if "DAGSTER_HOME" in env else None
        self.descendant_names: list[str] = []  # short names of the descendants seen while it ran
        self.survivors: list[str] = []  # "pid N (command)" of those still running after it ended
        self.started = time.monotonic()
        self.tree = P.TreeSampler(self.pid, every=0.1).__enter__()

    def descendants(self) -> list[tuple[psutil.Process, str, str]]:
        with self.tree.lock:
            return list(self.tree.seen.values())

    def kill(self) -> None:
        """SIGKILL the CLI process only (its descendants recorded just before)."""
        self.tree.sample()
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)

    def finish(self, timeout: float, kill_after: float | None, kill_when: Callable[[], bool] | None) -> None:
        """Wait for the run (SIGKILL it ``kill_after`` seconds after its start, or as soon as
        ``kill_when()`` holds), then record what it left running and end that."""
        if kill_after is not None or kill_when is not None:
            deadline = self.started + (kill_after if kill_after is not None else timeout)
            while self.alive() and time.monotonic() < deadline and not (kill_when and kill_when()):
                time.sleep(0.05)
            if self.alive():
                self.killed_at = time.monotonic() - self.started
                self.kill()
            else:
                self.finished_before_kill = True
        try:
            self.rc = self.proc.wait(timeout=max(0.1, timeout - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self.kill()
            self.rc, self.timed_out = self.proc.wait(timeout=30), True
        self.seconds = time.monotonic() - self.started
        ended = self.killed_at is not None or self.timed_out
        self.tree.__exit__()
        deadline = time.monotonic() + (KILLED_GRACE_SECONDS if ended else EXITED_GRACE_SECONDS)
        while (alive := self._alive_descendants()) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.survivors = [text for _, _, text in alive]
        self.descendant_names = [name for _, name, _ in self.descendants()]
        self.stdout = self.log_path.read_text(errors="replace")
        self.stderr = (self.cwd / "stderr.txt").read_text(errors="replace")
        self.kill_tree()  # survivors found and reported: now end them, so the next run is not blocked

    def _alive_descendants(self) -> list[tuple[psutil.Process, str, str]]:
        return [d for d in self.descendants() if _alive(d[0])]

    def kill_tree(self) -> None:
        """Leave nothing behind: the CLI, every descendant ever seen, its process group."""
        self.kill()
        self.tree.__exit__()
        for proc, _, _ in self._alive_descendants():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        self.stop(grace=1)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def failure_lines(self) -> list[str]:
        """The lines that say why the run failed (the CLI's ``failed ...`` and ``error: ...``)."""
        return [
            line.strip()
            for line in self.stderr.splitlines()
            if line.lstrip().startswith(("failed ", "error:", "configuration error:"))
        ]

    def brief(self) -> str:
        """The run's outcome in one short line for the report."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        if self.killed_at is not None and not self.finished_before_kill:
            return f"killed at {self.killed_at:.1f} s"
        lines = self.failure_lines()
        return f"exit {self.rc}" + (f": {_clip(lines[0], 220)}" if lines else "")


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# ---------------------------------------------------------------------------------------------
# warehouses: create, copy, read, compare


@dataclass
class Target:
    """One warehouse: a DuckDB file, or one database of the suite's Postgres server."""

    backend: str
    url: str
    path: Path | None = None  # DuckDB
    database: str | None = None  # Postgres

    def files(self) -> list[Path]:
        """The DuckDB file and its WAL (scanned byte for byte by the key search)."""
        if self.path is None:
            return []
        return [p for p in (self.path, Path(f"{self.path}.wal")) if p.exists()]


@dataclass
class TableState:
    """A table's columns and rows, every value as canonical JSON text (comparable across engines)."""

    name: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]

    def project(self, columns: Sequence[str]) -> list[tuple[str, ...]]:
        index = [self.columns.index(c) for c in columns]
        return [tuple(row[i] for i in index) for row in self.rows]

    def value(self, key_column: str, key: str, column: str) -> Any:
        """The decoded value of ``column`` in the row whose ``key_column`` is ``key`` (KeyError: none)."""
        k, c = self.columns.index(key_column), self.columns.index(column)
        wanted = json.dumps(key)
        for row in self.rows:
            if row[k] == wanted:
                return json.loads(row[c])
        raise KeyError(key)


State = dict[str, TableState]


def _json(value: Any) -> Any:
    """What JSON lacks: timestamps in UTC ISO form, dates, bytes in hex, anything else (decimals) as text."""
    if isinstance(value, dt.datetime):
        return (value.astimezone(dt.UTC) if value.tzinfo else value).isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return "0x" + bytes(value).hex()
    return str(value)


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=_json)


def read_state(target: Target, schema: str = SCHEMA) -> State:
    """Every base table of the schema, read in full (absent warehouse or schema: no tables)."""
    if target.backend == "duckdb":
        import duckdb

        path = target.path
        if path is None or not path.exists():
            return {}
        con: Any = P.wait_until(  # a writer still holds the file (a survivor): wait, then fail
            "DuckDB file",
            lambda: duckdb.connect(str(path), read_only=True),
            30,
            every=0.5,
            errors=(duckdb.Error,),
        )
    else:
        import psycopg

        con = psycopg.connect(target.url, autocommit=True)
    with contextlib.closing(con):
        listed = con.execute(
            "SELECT table_name FROM information_schema.tables "
            f"WHERE table_schema = '{schema}' AND table_type = 'BASE TABLE'"
        )
        state: State = {}
        for (name,) in listed.fetchall():
            cur = con.execute(f'SELECT * FROM "{schema}"."{name}"')
            columns = tuple(d[0] for d in cur.description)
            state[name] = TableState(name, columns, [tuple(_text(v) for v in row) for row in cur.fetchall()])
        return state


def table_keys() -> dict[str, tuple[str, ...]]:
    """Key columns of every table (``sync/tables.py``)."""
    from sync.catalog import ALL_TABLES

    return {name: tuple(spec.key) for name, spec in ALL_TABLES.items()}


def duplicate_keys(state: State) -> list[str]:
    """Tables whose key repeats, with how many keys and an example."""
    problems = []
    for name, keys in table_keys().items():
        table = state.get(name)
        if table is None or not all(k in table.columns for k in keys):
            continue
        counts = Counter(table.project(keys))
        repeated = {k: n for k, n in counts.items() if n > 1}
        if repeated:
            example, n = next(iter(repeated.items()))
            problems.append(
                f"{name}: {len(repeated)} key(s) repeated, e.g. {dict(zip(keys, example, strict=True))} x{n}"
            )
    return problems


def compare_table(
    name: str,
    actual: TableState | None,
    expected: TableState | None,
    *,
    drop: frozenset[str] = frozenset(),
    ignore_extra: frozenset[str] = frozenset(),
) -> list[str]:
    """Differences of one table from the expected one (empty: equal). Absent equals empty."""
    if (actual is None or not actual.rows) and (expected is None or not expected.rows):
        return []
    if actual is None:
        return [f"{name}: absent, expected {len(expected.rows) if expected else 0} rows"]
    if expected is None:
        return [f"{name}: {len(actual.rows)} rows where none were expected"]
    drop = WRITER_COLUMNS | drop
    a_cols = {c for c in actual.columns if c not in drop}
    e_cols = {c for c in expected.columns if c not in drop}
    problems = []
    extra = sorted(a_cols - e_cols - ignore_extra)
    missing = sorted(e_cols - a_cols)
    if extra:
        problems.append(f"{name}: unexpected column(s) {', '.join(extra)}")
    if missing:
        problems.append(f"{name}: missing column(s) {', '.join(missing)}")
    columns = sorted(a_cols & e_cols)
    got, want = Counter(actual.project(columns)), Counter(expected.project(columns))
    if got == want:
        return problems
    only_got, only_want = got - want, want - got
    detail = (
        f"{name}: {len(actual.rows)} rows, expected {len(expected.rows)}; "
        f"{sum(only_got.values())} row(s) not in the expected table, "
        f"{sum(only_want.values())} expected row(s) missing"
    )
    keys = table_keys().get(name)
    if keys and all(k in columns for k in keys):
        at = [columns.index(k) for k in keys]
        by_key_want = {tuple(r[i] for i in at): r for r in only_want}
        differing: Counter[str] = Counter()
        example = ""
        for row in only_got:
            other = by_key_want.get(tuple(row[i] for i in at))
            if other is None:
                continue
            for i, column in enumerate(columns):
                if row[i] != other[i]:
                    differing[column] += 1
                    if not example:
                        example = f"; e.g. {column} {_clip(row[i], 60)} instead of {_clip(other[i], 60)}"
        if differing:
            detail += "; same key, other values in " + ", ".join(
                f"{c} ({n})" for c, n in differing.most_common(4)
            )
            detail += example
    problems.append(detail)
    return problems


def compare_states(
    actual: State,
    expected: State,
    *,
    drop: Mapping[str, frozenset[str]] | None = None,
    ignore_extra: frozenset[str] = frozenset(),
) -> list[str]:
    """Differences of every table (empty: the warehouses hold the same rows)."""
    problems = []
    for name in sorted(set(actual) | set(expected)):
        dropped = (drop or {}).get(name, frozenset())
        problems += compare_table(
            name, actual.get(name), expected.get(name), drop=dropped, ignore_extra=ignore_extra
        )
    return problems


def torn_tables(actual: State, before: State, complete: State) -> list[str]:
    """Tables that are neither exactly as before the run nor complete (a partial landing)."""
    problems = []
    for name in sorted(set(actual) | set(before) | set(complete)):
        a = actual.get(name)
        if not compare_table(name, a, before.get(name)) or not compare_table(name, a, complete.get(name)):
            continue
        against = compare_table(name, a, complete.get(name))
        problems.append(f"{name} is neither as before nor complete ({'; '.join(against)})")
    return problems


# ---------------------------------------------------------------------------------------------
# the key search


def key_needles(key: str) -> dict[str, bytes]:
    """What a leaked key looks like in a file: as text (UTF-8, UTF-16), its secret part, base64."""
    import base64

    secret = key.split("_", 1)[-1] if len(key.split("_", 1)[-1]) >= 16 else key
    half = secret[: len(secret) // 2]
    return {
        "key": key.encode(),
        "secret part": secret.encode(),
        "secret part, upper-cased": secret.upper().encode(),
        "first half of the secret part": half.encode(),
        "last half of the secret part": secret[len(half) :].encode(),
        "secret part, URL-escaped": "".join(f"%{ord(ch):02X}" for ch in half).encode(),
        "secret part, JSON-escaped": "".join(f"\\u{ord(ch):04x}" for ch in half).encode(),
        "UTF-16": key.encode("utf-16-le"),
        "base64": base64.b64encode(key.encode()).rstrip(b"="),
        "base64 bearer": base64.b64encode(f"Bearer {key}".encode()).rstrip(b"="),
    }


def scan_for_key(
    key: str, folders: Sequence[Path], files: Sequence[Path], texts: Mapping[str, str], root: Path
) -> list[str]:
    """Every place the key occurs: ``where (form): context`` with the key masked."""
    needles = key_needles(key)
    hits: list[str] = []

    def check(where: str, data: bytes) -> None:
        for form, needle in needles.items():
            at = data.find(needle)
            if at >= 0:
                context = data[max(0, at - 60) : at + len(needle) + 40]
                shown = context.replace(needle, b"<KEY>").decode("utf-8", "replace")
                hits.append(f"{where} ({form}): …{_clip(shown, 160)}…")
                return

    paths = list(files)
    for folder in folders:
        paths += folder.rglob("*")
    for path in dict.fromkeys(paths):
        if not path.is_file():
            continue
        with contextlib.suppress(OSError):
            check(str(path.relative_to(root) if path.is_relative_to(root) else path), path.read_bytes())
    for where, text in texts.items():
        check(where, text.encode("utf-8", "surrogatepass"))
    return hits


def dump_text(state: State) -> str:
    """Every table as text, one line per row (what the key search reads of the warehouse)."""
    out = []
    for name, table in sorted(state.items()):
        out.append(f"# {name}: {', '.join(table.columns)}")
        out += ["\t".join(row) for row in table.rows]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# the harness


class Harness:
    """The sandbox, the Postgres server, the warehouses, the CLI runs, and clean reference runs.

    On exit every CLI run still alive is killed with its descendants, the sandbox and the Postgres
    server this harness started stop, and the work folder is removed (unless ``keep``).
    """

    def __init__(
        self,
        config: SuiteConfig,
        *,
        postgres_url: str | None = None,
        keep: bool = False,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.keep = keep
        self._given_pg = postgres_url
        self.log = log or (lambda message: None)
        self._stack = contextlib.ExitStack()
        self._live: set[CliProcess] = set()
        self._pg_server: Any = None
        self._pg_base: str | None = None
        self._counter = 0
        self._references: dict[tuple[str, dt.date, dt.date], tuple[State, float]] = {}
        self._baselines: dict[tuple[str, dt.date, dt.date], tuple[Target, State]] = {}
        self.requests: dict[tuple[str, dt.date, dt.date], int] = {}  # of the reference run of a range
        self.today = dt.datetime.now(dt.UTC).date()
        self.workdir = Path(tempfile.mkdtemp(prefix="visibility-reliability-"))

    def __enter__(self) -> Harness:
        from sandbox.config import SandboxConfig
        from sandbox.faults import FaultsConfig
        from sandbox.testing import run_sandbox

        config = SandboxConfig(
            seed=7,
            today=self.today,
            size=self.config.size,  # type: ignore[arg-type]
            backfill_delay_seconds=0.0,  # every tracked competitor has history: trends do not move
            audit_delay_seconds=0.5,
            faults=FaultsConfig(profile="none"),
        )
        try:
            self.sandbox = self._stack.enter_context(run_sandbox(config))
        except BaseException:
            self.close()
            raise
        self.key = self.sandbox.keys["workspace"]
        self.restate_days = config.restate_days
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for proc in list(self._live):
            proc.kill_tree()
        self._live.clear()
        with contextlib.suppress(Exception):
            self._stack.close()
        if self._pg_server is not None:
            self._pg_server.stop()
            self._pg_server = None
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- dates -----------------------------------------------------------------------------------

    @property
    def long_window(self) -> tuple[dt.date, dt.date]:
        """``long_days`` days (more than 7: each table lands in several 3-day writes) ending
        before the days the sandbox restates (end exclusive)."""
        end = self.today - dt.timedelta(days=self.restate_days)
        return end - dt.timedelta(days=max(self.config.long_days, self.config.days)), end

    @property
    def window(self) -> tuple[dt.date, dt.date]:
        """The first ``days`` days of the long window (end exclusive): the "before" of the SIGKILL and
        overlap rounds, so that a torn run differs from both "before" and "complete"."""
        start = self.long_window[0]
        return start, start + dt.timedelta(days=self.config.days)

    @property
    def first_date(self) -> dt.date:
        """``VISIBILITY_START_DATE`` of every run: before every window."""
        return self.long_window[0]

    # -- warehouses ------------------------------------------------------------------------------

    def _name(self, label: str) -> str:
        self._counter += 1
        return re.sub(r"[^a-z0-9_]", "_", f"w{self._counter:03d}_{label}".lower())[:60]

    def _postgres(self) -> str:
        """The server's URL (without database): the given one, else an embedded server started now."""
        if self._pg_base is None:
            if self._given_pg:
                url = self._given_pg
            else:
                from tests.fixtures_postgres import start_embedded_postgres

                self.log("starting embedded Postgres")
                self._pg_server = start_embedded_postgres()
                url = self._pg_server.url
            self._pg_base = url.rsplit("/", 1)[0]
        return self._pg_base

    def _pg_admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self._postgres() + "/postgres", autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    def new_warehouse(self, backend: str, label: str) -> Target:
        name = self._name(label)
        if backend == "duckdb":
            path = self.workdir / "warehouses" / f"{name}.duckdb"
            path.parent.mkdir(parents=True, exist_ok=True)
            return Target("duckdb", f"duckdb:///{path}", path=path)
        self._pg_admin(f'CREATE DATABASE "{name}"')
        return Target("postgres", f"{self._postgres()}/{name}", database=name)

    def restore(self, target: Target, source: Target) -> None:
        """Make ``target`` hold exactly what ``source`` holds (no process may be using either)."""
        if source.backend == "duckdb":
            assert source.path is not None and target.path is not None
            for path in target.files():
                path.unlink()
            for path in source.files():
                shutil.copy2(path, str(target.path) + path.name[len(source.path.name) :])
            return
        self._pg_admin(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)')
        self._pg_admin(f'CREATE DATABASE "{target.database}" TEMPLATE "{source.database}"')

    # -- CLI runs --------------------------------------------------------------------------------

    def start_cli(
        self,
        target: Target,
        start: dt.date,
        end: dt.date,
        *,
        label: str,
        api_url: str | None = None,
        env: Mapping[str, str] | None = None,
        dagster_home: bool | Path = False,
        tmpdir: Path | None = None,
    ) -> CliProcess:
        """Start ``visibility-sync run --start --end --quiet`` in its own folder (its cwd)."""
        rundir = self.run_folder(label)
        tmp = tmpdir or rundir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        environ = self.cli_env(
            tmp,
            VISIBILITY_API_URL=api_url or self.sandbox.url,
            VISIBILITY_WAREHOUSE=target.url,
            VISIBILITY_START_DATE=self.first_date.isoformat(),
        )
        if dagster_home:
            home = dagster_home if isinstance(dagster_home, Path) else rundir / "dagster_home"
            home.mkdir(parents=True, exist_ok=True)
            if not (home / "dagster.yaml").exists():
                shutil.copy2(ROOT / "dagster.yaml", home / "dagster.yaml")
            environ["DAGSTER_HOME"] = str(home)
        environ.update(env or {})
        argv = [*_cli_command(), "run", "--start", start.isoformat(), "--end", end.isoformat(), "--quiet"]
        proc = CliProcess(label, argv, environ, rundir)
        self._live.add(proc)
        return proc

    def run_folder(self, label: str) -> Path:
        rundir = self.workdir / "runs" / self._name(label)
        rundir.mkdir(parents=True)
        return rundir

    def cli_env(self, tmpdir: Path, **settings: str) -> dict[str, str]:
        """The environment of a CLI run: no inherited project or Dagster settings, one line a failure
        (rich would wrap at 80 columns)."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("VISIBILITY_", "DAGSTER_"))}
        environ.update(VISIBILITY_API_KEY=self.key, TMPDIR=str(tmpdir), COLUMNS="400", NO_COLOR="1")
        return {**environ, "PYTHONDONTWRITEBYTECODE": "1", **settings}

    def finish(
        self,
        proc: CliProcess,
        *,
        kill_after: float | None = None,
        kill_when: Callable[[], bool] | None = None,
    ) -> CliProcess:
        """Wait for a run (see :meth:`CliProcess.finish`), then check what it left running."""
        proc.finish(self.config.run_timeout, kill_after, kill_when)
        self._live.discard(proc)
        self.log(f"  {proc.label}: {proc.brief()} ({proc.seconds:.1f} s)")
        return proc

    def run_cli(
        self,
        target: Target,
        start: dt.date,
        end: dt.date,
        *,
        label: str,
        kill_after: float | None = None,
        kill_when: Callable[[], bool] | None = None,
        **kw: Any,
    ) -> CliProcess:
        proc = self.start_cli(target, start, end, label=label, **kw)
        return self.finish(proc, kill_after=kill_after, kill_when=kill_when)

    # -- references --------------------------------------------------------------------------------

    def reference(
        self, backend: str, start: dt.date | None = None, end: dt.date | None = None
    ) -> tuple[State, float]:
        """A fault-free run's tables (and its seconds) for the range: run once, then cached."""
        start, end = start or self.window[0], end or self.window[1]
        cache = (backend, start, end)
        if cache not in self._references:
            target = self.new_warehouse(backend, f"reference_{backend}")
            self.sandbox.reset_stats()
            run = self.run_cli(target, start, end, label=f"reference {backend} {start}..{end}")
            self.requests[cache] = P.served(self.sandbox.stats())
            if run.rc != 0:
                raise RuntimeError(
                    f"the fault-free reference run on {backend} failed ({run.brief()}): "
                    "no scenario can be judged"
                )
            self._references[cache] = (read_state(target), run.seconds)
            self._baselines.setdefault(cache, (target, self._references[cache][0]))
        return self._references[cache]

    def baseline(self, backend: str, start: dt.date, end: dt.date) -> tuple[Target, State]:
        """A warehouse after a clean run of the range (to copy from), and its tables."""
        if (backend, start, end) not in self._baselines:
            self.reference(backend, start, end)
        return self._baselines[(backend, start, end)]


# ---------------------------------------------------------------------------------------------
# scenario checks shared by several scenarios


def _process_problems(run: CliProcess) -> list[str]:
    outlived = f"{run.label}: {len(run.survivors)} process(es) outlived it: {'; '.join(run.survivors)}"
    timed_out = f"{run.label}: still running after {run.seconds:.0f} s (killed)"
    return [outlived] * bool(run.survivors) + [timed_out] * run.timed_out


#: What a failure line looks like when the mask of a key is garbled: an empty request id or bearer
#: token (``[redacted]`` printed as console markup, so it vanished), or stray brackets after the
#: mask (``Bearer [redacted]]]]``: a text masked again and again).
_GARBLED = re.compile(r"\[X-Request-Id \]|Bearer \]|Bearer \[redacted\]\]")


def _garbled(lines: Sequence[str]) -> list[str]:
    """The garbled part of each garbled line, with some context."""
    found = []
    for line in lines:
        hits = list(_GARBLED.finditer(line))
        if hits:
            found.append(_clip(line[max(0, hits[0].start() - 70) : hits[-1].end() + 10], 200))
    return found


def _temp_problems(run: CliProcess) -> list[str]:
    """A run that ended by itself leaves its TMPDIR empty: spools are deleted once landed or when
    landing fails (docs/OPERATIONS.md); only a killed run may leave one. A failed run keeps what it
    fetched for its re-run (``sync/resume.py``), and nothing else."""
    left = _leftovers(run.tmpdir, skip=TEMP_PREFIX if run.rc not in (0, None) else None)
    if left == "none" or run.killed_at is not None or run.timed_out:
        return []
    return [f"{run.label}: exit {run.rc} but its TMPDIR still holds {left}"]


def _leftovers(folder: Path | None, skip: str | None = None) -> str:
    """What ``folder`` holds, but for its top-level entries named ``skip*``."""
    files = [p for p in folder.rglob("*") if p.is_file()] if folder else []
    files = [p for p in files if not (skip and p.relative_to(folder).parts[0].startswith(skip))]
    if not files:
        return "none"
    size = sum(p.stat().st_size for p in files)
    tops = sorted({p.relative_to(folder).parts[0] for p in files})
    return f"{len(files)} file(s), {size / 1e6:.2f} MB in {', '.join(tops[:4])}{'…' if len(tops) > 4 else ''}"


# ---------------------------------------------------------------------------------------------
# 1. fault soak


def scenario_soak(h: Harness, backend: str) -> list[Result]:
    """A sync under the hostile profile lands what a fault-free sync lands."""
    results = []
    reference, _ = h.reference(backend)
    start, end = h.window
    for index in range(h.config.soak_seeds):
        seed = h.config.seed + index
        result = Result(f"fault soak (hostile, seed {seed})", backend)
        target = h.new_warehouse(backend, f"soak_{backend}")
        h.sandbox.reset_stats()
        h.sandbox.configure(faults={"profile": "hostile", "seed": seed, "overrides": {"quota": 0.0}})
        try:
            run = h.run_cli(target, start, end, label=f"soak {backend} seed {seed}")
        finally:
            h.sandbox.configure(faults={"profile": "none", "seed": 0, "overrides": {}})
        stats = h.sandbox.stats()
        statuses = sum((Counter(by_status) for by_status in stats.values()), Counter[str]())
        faults = ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items()) if s != "200")
        result.runs = 1
        total = P.served(stats)
        result.notes.append(f"{total} requests, {total - statuses['200']} answered with a fault ({faults})")
        if run.rc != 0:
            result.fail(f"exit {run.rc}: {run.brief()}")
        result.observed += _process_problems(run)
        state = read_state(target)
        extra = sorted({c for t in state.values() for c in t.columns} & SANDBOX_EXTRA_FIELDS)
        if extra:
            result.notes.append(
                f"injected unknown fields landed as columns (not compared): {', '.join(extra)}"
            )
        result.observed += compare_states(state, reference, ignore_extra=SANDBOX_EXTRA_FIELDS)
        result.observed += duplicate_keys(state)
        results.append(result.done())
    return results


# ---------------------------------------------------------------------------------------------
# 2. SIGKILL and re-run


def _moment(delay: float, landing: bool) -> str:
    return f"{delay:.1f}s, while landing" if landing else f"{delay:.1f}s"


def scenario_sigkill(h: Harness, backend: str) -> list[Result]:
    """Seeded SIGKILLs at random moments, each followed by a re-run that must converge."""
    start, end = h.long_window
    reference, ref_seconds = h.reference(backend, start, end)
    result = Result(f"SIGKILL x{h.config.kills} + re-run ({h.config.long_days} days)", backend)
    rng = random.Random(f"{h.config.seed}-sigkill-{backend}")
    target = h.new_warehouse(backend, f"sigkill_{backend}")
    base, base_state = h.baseline(backend, *h.window)  # the window's first days only
    before: State = {}
    moments = []
    tmpdir = h.workdir / f"tmp_sigkill_{backend}"  # one TMPDIR, as on one machine: spools meet
    home = h.workdir / f"dagster_home_sigkill_{backend}"  # recorded runs capture output: more processes
    for index in range(h.config.kills):
        if index > 0:  # the window's first days only: a torn table differs from "before" and "complete"
            h.restore(target, base)
            before = base_state
        # odd kills: late in a run recorded into a DAGSTER_HOME (its compute-log capture starts
        # processes of its own), while tables land; even kills: any moment of the run
        landing = index % 2 == 1
        delay = rng.uniform(0.6, 0.95) * ref_seconds if landing else rng.uniform(0.1, 0.9) * ref_seconds
        for _attempt in range(3):  # a run faster than the reference: kill the next one earlier
            proc = h.start_cli(
                target,
                start,
                end,
                label=f"sigkill {backend} #{index + 1}",
                tmpdir=tmpdir,
                dagster_home=home if landing else False,
            )
            run = h.finish(proc, kill_after=delay)
            result.runs += 1
            result.observed += _process_problems(run)
            if not run.finished_before_kill:
                break
            moments.append(f"{_moment(delay, landing)} (had finished: exit {run.rc})")
            before = read_state(target)
            delay /= 2
        if run.finished_before_kill:
            result.fail(f"kill #{index + 1}: every run finished before its kill; nothing was killed")
            continue
        moments.append(f"{run.killed_at:.1f}s" + (f" ({_moment(delay, landing)})" if landing else ""))
        names = ", ".join(f"{n} x{c}" for n, c in Counter(run.descendant_names).items()) or "none"
        result.notes.append(f"kill #{index + 1} at {run.killed_at:.1f} s: descendants recorded: {names}")
        mid = read_state(target)
        result.fail_each(
            torn_tables(mid, before, reference), f"after kill #{index + 1} at {run.killed_at:.1f} s: "
        )
        killed_spools = sorted(p.name for p in tmpdir.glob("visibility-spool-*"))
        rerun = h.run_cli(target, start, end, label=f"re-run {backend} #{index + 1}", tmpdir=tmpdir)
        result.runs += 1
        result.observed += _process_problems(rerun)
        left = sorted(p.name for p in tmpdir.glob("visibility-spool-*"))
        result.notes.append(
            f"kill #{index + 1}: {len(killed_spools)} spool(s) left by the killed run, "
            f"{len(left)} after the re-run"
        )
        if left:
            result.fail(f"re-run #{index + 1} left the killed run's spools behind: {', '.join(left[:3])}")
        if rerun.rc != 0:
            result.fail(f"re-run #{index + 1} after the kill at {run.killed_at:.1f} s: {rerun.brief()}")
        after = read_state(target)
        result.fail_each(compare_states(after, reference), f"after re-run #{index + 1}: ")
        result.fail_each(duplicate_keys(after), f"after re-run #{index + 1}: duplicate keys: ")
        before = after
    result.notes.append(f"TMPDIR after the last re-run: {_leftovers(tmpdir)}")
    result.notes.insert(0, f"kill moments {', '.join(moments)} (clean run {ref_seconds:.1f} s)")
    return [result.done()]


# ---------------------------------------------------------------------------------------------
# 3. overlapping runs


def scenario_overlap(h: Harness, backend: str) -> list[Result]:
    """Two runs at once on one warehouse both finish, with the clean run's rows and no repeated key."""
    start, end = h.long_window
    reference, ref_seconds = h.reference(backend, start, end)
    result = Result(f"overlapping runs x{h.config.overlap_rounds} ({h.config.long_days} days)", backend)
    target = h.new_warehouse(backend, f"overlap_{backend}")
    for index in range(h.config.overlap_rounds):
        # round 2 on: the warehouse holds the window's first days only (both runs insert rows again)
        how = ("started together", "staggered", "together, one DAGSTER_HOME")[min(index, 2)]
        if index > 0:
            h.restore(target, h.baseline(backend, *h.window)[0])
        stagger = ref_seconds * 0.4 if how == "staggered" else 0.0
        home: bool | Path = h.workdir / f"dagster_home_overlap_{backend}" if index >= 2 else False
        first = h.start_cli(
            target, start, end, label=f"overlap {backend} round {index + 1} A", dagster_home=home
        )
        if stagger:
            time.sleep(stagger)
        second = h.start_cli(
            target, start, end, label=f"overlap {backend} round {index + 1} B", dagster_home=home
        )
        runs = [h.finish(first), h.finish(second)]
        result.runs += 2
        for run in runs:
            result.observed += _process_problems(run)
            if run.rc != 0:
                result.fail(f"round {index + 1} ({how}): {run.label}: {run.brief()}")
        state = read_state(target)
        result.fail_each(duplicate_keys(state), f"round {index + 1}: duplicate keys: ")
        result.fail_each(compare_states(state, reference), f"round {index + 1}: ")
        result.notes.append(
            f"round {index + 1} ({how}{f' by {stagger:.1f} s' if stagger else ''}): "
            f"{runs[0].seconds:.1f} s and {runs[1].seconds:.1f} s"
        )
    return [result.done()]


# ---------------------------------------------------------------------------------------------
# 4. the key searched for in everything written


def scenario_keys(h: Harness, backend: str) -> list[Result]:
    """Zero occurrences of the key in anything a run wrote, whatever the service echoed."""
    h.reference(backend)  # a clean run's request count sets the kill moment of `killed_echo`
    start, end = h.window
    result = Result("key never written", backend)
    target = h.new_warehouse(backend, f"keys_{backend}")
    outcomes = []
    for kind in h.config.key_runs:
        make, should_succeed = KEY_RUNS[kind]
        rewrite = make(kind)
        with contextlib.ExitStack() as stack:
            url = None
            if rewrite is not None:
                url = stack.enter_context(proxy.run_proxy(h.sandbox.url, rewrite)).url
            kill_when = None
            if kind == "killed_echo" and rewrite is not None:
                half = max(1, h.requests.get((backend, start, end), 100) // 2)
                kill_when = lambda r=rewrite, n=half: r.requests >= n  # noqa: E731  # mid-fetch
            env = {"VISIBILITY_RETRY_DEADLINE_SECONDS": "5"} if not should_succeed else None
            label = f"keys {backend} {kind}"
            run = h.run_cli(
                target, start, end, label=label, api_url=url, dagster_home=True, kill_when=kill_when, env=env
            )
        result.runs += 1
        outcomes.append(f"{kind}: {run.brief()}")
        result.observed += _process_problems(run)
        result.observed += _temp_problems(run)
        if rewrite is not None and rewrite.requests == 0:
            result.fail(f"{kind}: no request went through the echoing proxy (harness problem)")
        if should_succeed and run.rc != 0:
            result.fail(f"{kind}: expected to land, {run.brief()}")
        if not should_succeed and kill_when is None and run.rc == 0:
            result.fail(f"{kind}: expected to fail, exit 0")
        if "Traceback" in run.output:
            result.fail(f"{kind}: a traceback was printed")
        for fragment in _garbled(run.failure_lines()):  # not a leak: a message defect, said apart
            result.notes.append(f"{kind}: message defect, the mask of the key is garbled: …{fragment}…")
        folders = [p for p in (run.dagster_home, run.tmpdir, run.cwd) if p is not None]
        texts = {f"{kind} stdout": run.stdout, f"{kind} stderr": run.stderr}
        texts[f"{kind} warehouse dump"] = dump_text(read_state(target))
        result.fail_each(
            scan_for_key(h.key, folders, target.files(), texts, h.workdir), f"{kind}: key found in "
        )
    result.notes.append("; ".join(outcomes))
    return [result.done()]


# ---------------------------------------------------------------------------------------------
# 5. bad responses


def _acceptable_values(kind: str, served: Any) -> list[Any] | None:
    """Values a correct landing may hold for the changed field (None: only an error is correct).

    A string where the spec types a number, and an integer no BIGINT holds, have no correct landing
    (a NULL or a guess would be silent data loss; ``sync/tables.py`` makes them errors).
    """
    if kind in ("wrong_type_position", "wrong_type_mention_count", "huge_number"):
        return None
    if kind == "huge_number_double":
        return [float(proxy.HUGE)]
    if kind in ("nul_text", "nul_text_snapshot"):
        return [served.replace("\x00", instead) for instead in ("\x00", "", "\ufffd", " ")]
    if kind == "big_string":
        return [served]
    return []  # judged by the table comparison alone


def scenario_bad(h: Harness, backend: str, kinds: Sequence[str] | None = None) -> list[Result]:
    """Bad answers end in a clear error or a correct landing, never a partial table."""
    start, end = h.window
    complete, _ = h.reference(backend, start, end)
    base, before = h.baseline(backend, start, start + dt.timedelta(days=1))
    results = []
    deadline = {"VISIBILITY_RETRY_DEADLINE_SECONDS": f"{h.config.retry_deadline:g}"}
    for kind in kinds or h.config.bad_kinds:
        result = Result(f"bad response: {kind}", backend)
        target = h.new_warehouse(backend, f"bad_{kind}_{backend}")
        h.restore(target, base)
        rewrite = proxy.bad_response(kind)
        with proxy.run_proxy(h.sandbox.url, rewrite) as handle:
            env = deadline if h.config.retry_deadline > 0 else None
            run = h.run_cli(target, start, end, label=f"bad {kind} {backend}", api_url=handle.url, env=env)
        result.runs = 1
        after = read_state(target)
        result.observed += _process_problems(run)
        result.observed += _temp_problems(run)
        with rewrite.lock:
            events = list(rewrite.events)
        if not events:
            result.fail("the proxy never met its target: nothing was tested (harness problem)")
            results.append(result.done(undecided=True))
            continue
        if "Traceback" in run.output:
            result.fail("a traceback was printed")
        long_lines = [len(line) for line in run.output.splitlines() if len(line) > MAX_LINE_CHARS]
        if long_lines:
            result.fail(f"printed a line of {max(long_lines):,} characters")
        table = BAD_KIND_TABLE.get(kind)
        if run.timed_out:
            result.notes.append(
                f"proxy changed {len(events)} answer(s) before the run was killed; "
                f"TMPDIR then held {_leftovers(run.tmpdir)}"
            )
            result.fail_each(torn_tables(after, before, complete), "partial table: ")
        elif run.rc == 0:
            result.notes.append(f"landed (exit 0); proxy changed {len(events)} answer(s)")
            changed = getattr(rewrite, "field", None)
            drop = {table: frozenset({changed})} if table and changed else {}
            result.fail_each(
                compare_states(after, complete, drop=drop), "exit 0, but not a complete landing: "
            )
            if table:
                problems, note = _judge_landing(kind, after.get(table), events[0])
                result.observed += problems
                result.notes.append(note)
        else:
            lines = run.failure_lines()
            result.notes.append(
                f"{run.brief()}; proxy changed {len(events)} answer(s) of {rewrite.requests} request(s), "
                f"{run.seconds:.0f} s"
            )
            if run.rc not in DOCUMENTED_EXIT_CODES:
                result.fail(f"undocumented exit code {run.rc}")
            if not lines:
                result.fail(f"exit {run.rc} without a failure line on stderr: {_clip(run.stderr[-300:])}")
            else:
                markers = [m for m in (rewrite.endpoint_marker, rewrite.field_marker) if m]
                if not any(all(m in line for m in markers) for line in lines):
                    named = " and ".join(repr(m) for m in markers)
                    result.fail(f"no failure line names {named}: {_clip(lines[0], 260)}")
            result.fail_each(torn_tables(after, before, complete), "partial table: ")
        result.observed += duplicate_keys(after)
        results.append(result.done())
    return results


def _judge_landing(kind: str, table: TableState | None, event: dict[str, Any]) -> tuple[list[str], str]:
    """Problems with the value the changed row landed with, and a note on it (NUL stripped? cut?)."""
    served, name, key = event.get("served"), event["field"], event["key"]
    try:
        landed, found = (table.value("id", key, name), True) if table else (None, False)
    except (KeyError, ValueError):
        landed, found = None, False
    note = f"{name} landed as {_clip(repr(landed), 50)} (served {_clip(repr(served), 50)})"
    if not found:
        note = f"changed row {key} not found"
    elif isinstance(landed, str) and isinstance(served, str):
        same = "the served value" if landed == served else _clip(repr(landed), 50)
        note = f"{name} landed as {same} ({len(landed):,} of {len(served):,} characters)"
    acceptable = _acceptable_values(kind, served)
    if acceptable is None:
        why = "has no correct landing (expected an error naming the field)"
        return [f"exit 0 although {name} = {_clip(repr(served), 40)} {why}"], note
    if acceptable and not found:
        return [
            f"exit 0 but the changed row {key} is missing" if table else "exit 0 but its table is absent"
        ], note
    if acceptable and landed not in acceptable:
        size = f" (len {len(landed):,} of {proxy.BIG_STRING_CHARS:,})" if isinstance(landed, str) else ""
        return [
            f"landed {name} = {_clip(repr(landed), 50)} for the served {_clip(repr(served), 50)}{size}"
        ], note
    return [], note


# ---------------------------------------------------------------------------------------------
# 6. limits: deadlines and settings bounds


def _command(h: Harness, args: Sequence[str], env: Mapping[str, str], label: str) -> tuple[int, str, float]:
    """Run ``visibility-sync ARGS`` with the suite's environment plus ``env``: (exit, output, seconds)."""
    rundir = h.run_folder(label)
    environ = h.cli_env(rundir, **env)
    began = time.monotonic()
    done = subprocess.run(
        [*_cli_command(), *args], env=environ, cwd=rundir, capture_output=True, text=True, timeout=900
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


def scenario_limits(h: Harness, backend: str) -> list[Result]:
    """``check`` honours the retry deadline; a start date before any engine's history is refused
    before the first request."""
    results = []
    port = P.free_port()  # bound, then closed: nothing listens, connections are refused
    for deadline in (2, 4):  # below the 5 s a never-reached service gets (resources/api/calls.py)
        result = Result(f"check, dead service, VISIBILITY_RETRY_DEADLINE_SECONDS={deadline}", backend)
        env = {
            "VISIBILITY_API_URL": f"http://127.0.0.1:{port}",
            "VISIBILITY_RETRY_DEADLINE_SECONDS": str(deadline),
            "VISIBILITY_WAREHOUSE": h.new_warehouse(backend, f"check_{deadline}_{backend}").url,
        }
        rc, output, seconds = _command(h, ["check"], env, f"check {deadline}")
        result.runs = 1
        line = next((ln for ln in output.splitlines() if "retry deadline" in ln), "")
        result.notes.append(f"exit {rc} after {seconds:.1f} s (start-up included): {_clip(line, 200)}")
        if rc != 4 or f"retry deadline {deadline}s" not in output:
            result.fail(f"expected exit 4 naming the {deadline}s deadline: exit {rc}")
        retried = re.search(r"failed every attempt for ([0-9.]+)s", output)
        if retried is None or not deadline - 0.5 <= float(retried.group(1)) <= deadline + 3:
            result.fail(f"retried {retried.group(1) if retried else '?'} s for a {deadline} s deadline")
        results.append(result.done())
    result = Result("VISIBILITY_START_DATE=0001-01-01", backend)
    with proxy.run_proxy(h.sandbox.url) as handle:
        start, end = h.window
        env = {
            "VISIBILITY_API_URL": handle.url,
            "VISIBILITY_START_DATE": "0001-01-01",
            "VISIBILITY_WAREHOUSE": h.new_warehouse(backend, f"start_date_{backend}").url,
        }
        args = ["run", "--start", start.isoformat(), "--end", end.isoformat(), "--quiet"]
        rc, output, seconds = _command(h, args, env, "start date")
        sent = handle.rewrite.requests
    result.runs = 1
    result.notes.append(f"exit {rc}, {sent} request(s): {_clip(output.strip().splitlines()[-1], 200)}")
    if rc != 2 or "VISIBILITY_START_DATE" not in output or sent:
        result.fail(f"expected exit 2 naming VISIBILITY_START_DATE, no request: exit {rc}, {sent} sent")
    results.append(result.done())
    return results


# ---------------------------------------------------------------------------------------------
# running and reporting

RUNNERS: dict[str, Callable[[Harness, str], list[Result]]] = {
    n: globals()[f"scenario_{n}"] for n in SCENARIOS
}


def run_suite(h: Harness, scenarios: Sequence[str], backends: Sequence[str]) -> list[Result]:
    """Every selected scenario on every selected backend; a harness error becomes an ``error`` row."""
    results: list[Result] = []
    for scenario in scenarios:
        for backend in backends:
            h.log(f"== {scenario} on {backend}")
            error = Result(scenario, backend)
            try:
                results += RUNNERS[scenario](h, backend)
            except Exception as exc:
                error.fail(f"harness error: {type(exc).__name__}: {_clip(str(exc), 400)}")
                results.append(error.done(undecided=True))
            for result in results[-1:]:
                h.log(f"   {result.verdict} {result.scenario} ({result.seconds:.1f} s)")
    return results


def markdown(results: Sequence[Result], config: SuiteConfig, wall: float, command: str) -> str:
    """The ``## Reliability`` section of bench/RESULTS.md."""
    passed = sum(r.passed is True for r in results)
    lines = [
        SECTION,
        "",
        f"`tests/reliability/suite.py` (`{command}`), {P.machine()}; {config.size} sandbox, every engine; "
        "SIGKILL "
        f"and overlap sync {config.long_days} days ending before the restated days (more than 7, so that "
        f"each table lands in several 3-day writes), the other scenarios the first "
        f"{config.days} of them; {passed} of {len(results)} scenarios pass, {wall:.0f} s in all. "
        "Tables compared by their rows over every column except `_loaded_at`, `_run_id`, `first_seen_at`, "
        "`last_seen_at`; the key is searched for in Dagster storage and compute logs, every table dumped "
        "to text, the warehouse files, TMPDIR, the working folder, stdout and stderr.",
        "",
        "| scenario | backend | result | runs | seconds | observed |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        observed = "; ".join(_clip(o, 300) for o in r.observed[:3]) or "; ".join(
            _clip(n, 200) for n in r.notes[:2]
        )
        if len(r.observed) > 3:
            observed += f"; … {len(r.observed) - 3} more"
        lines.append(
            f"| {r.scenario} | {r.backend} | {'**FAIL**' if r.passed is False else r.verdict} | {r.runs} | "
            f"{r.seconds:.0f} | {observed.replace('|', '/')} |"
        )
    failed = [r for r in results if r.passed is not True]
    if failed:
        lines += ["", "What failed, in full:", ""]
        for r in failed:
            for item in r.observed:
                lines.append(f"- {r.scenario} ({r.backend}): {_clip(item, 600)}")
            lines += [f"  - {_clip(note, 400)}" for note in r.notes]
    lines.append("")
    return "\n".join(lines)


def results_from_json(path: Path) -> tuple[list[Result], dict[str, Any]]:
    """Results and the run's facts (``meta``) from ``--json`` output."""
    data = json.loads(path.read_text())
    verdicts = {"pass": True, "FAIL": False, "error": None}
    results = [
        Result(**{k: v for k, v in d.items() if k != "result"}, passed=verdicts[d["result"]])
        for d in data["results"]
    ]
    return results, data["meta"]


def print_results(results: Sequence[Result]) -> None:
    width = max((len(r.scenario) for r in results), default=10)
    for r in results:
        print(f"{r.verdict:5}  {r.scenario:<{width}}  {r.backend:8}  runs {r.runs:2}  {r.seconds:6.1f} s")
        for line in r.observed:
            print(f"         - {_clip(line, 400)}")
        for line in r.notes:
            print(f"         . {_clip(line, 300)}")


#: ``--name``: SuiteConfig field, type, help (each repeatable option is a tuple of values)
OPTIONS: dict[str, tuple[Any, str]] = {
    "scenario": (SCENARIOS, "repeatable; default all"),
    "backend": (BACKENDS, "repeatable; default both"),
    "bad": (None, "bad-response kinds (bench/proxy.py)"),
    "key_run": (tuple(KEY_RUNS), "key-search runs"),
    "kills": (int, "SIGKILLs per backend (default 4, quick 1)"),
    "overlap_rounds": (int, "overlap rounds (default 3, quick 1)"),
    "soak_seeds": (int, "hostile runs with successive seeds (default 1)"),
    "days": (int, "days in the window (default 3, quick 2)"),
    "long_days": (int, "days of the sigkill and overlap window (default 9, quick 8; > 7)"),
    "seed": (int, "seed of the kill moments and the hostile profile"),
    "size": (("demo", "large"), "sandbox world size (default demo)"),
    "run_timeout": (float, "seconds before a CLI run is killed"),
    "retry_deadline": (
        float,
        "VISIBILITY_RETRY_DEADLINE_SECONDS of the bad-response runs (default 15; 0: the CLI's own)",
    ),
}
#: repeatable options -> SuiteConfig field
REPEATED = {"scenario": "scenarios", "backend": "backends", "bad": "bad_kinds", "key_run": "key_runs"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="the CI subset (DuckDB, 2 days, 1 kill, 4 bad answers)"
    )
    for name, (kind, text) in OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        if name in REPEATED:
            parser.add_argument(flag, action="append", choices=kind, help=text)
        elif isinstance(kind, tuple):
            parser.add_argument(flag, choices=kind, help=text)
        else:
            parser.add_argument(flag, type=kind, help=text)
    parser.add_argument("--postgres-url", help="use this server (postgresql://user@host:port/db) instead")
    parser.add_argument("--write", action=argparse.BooleanOptionalAction, help="write bench/RESULTS.md")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (runs' output, warehouses)")
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="only write the section from --json output"
    )
    return parser


def config_from_args(args: argparse.Namespace) -> SuiteConfig:
    config = SuiteConfig.quick_config() if args.quick else SuiteConfig()
    for name in OPTIONS:
        value = getattr(args, name)
        if name in REPEATED and value:
            setattr(config, REPEATED[name], tuple(dict.fromkeys(value)))
        elif name not in REPEATED and value is not None:
            setattr(config, name, value)
    for kind in config.bad_kinds:
        proxy.bad_response(kind)  # unknown kinds fail here, before anything starts
    return config


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}")
        return 2
    if args.render:
        results, meta = results_from_json(args.render)
        config = SuiteConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in meta["config"].items()})
        P.write_section(SECTION, markdown(results, config, meta["wall"], meta["command"]))
        print(f"wrote the {SECTION!r} section of {P.RESULTS}")
        return 0
    P.install_signal_handlers()
    command = "tests/reliability/suite.py " + " ".join(argv if argv is not None else sys.argv[1:])
    began = time.monotonic()
    with Harness(
        config, postgres_url=args.postgres_url, keep=args.keep, log=lambda m: print(m, flush=True)
    ) as h:
        if args.keep:
            print(f"work folder: {h.workdir}", flush=True)
        results = run_suite(h, config.scenarios, config.backends)
    wall = time.monotonic() - began
    print()
    print_results(results)
    write = args.write if args.write is not None else not config.quick
    if write:
        P.write_section(SECTION, markdown(results, config, wall, command.strip()))
        print(f"\nwrote the {SECTION!r} section of {P.RESULTS}")
    if args.json:
        meta = {"command": command.strip(), "wall": round(wall, 1), "config": dataclasses.asdict(config)}
        args.json.write_text(json.dumps({"meta": meta, "results": [r.to_dict() for r in results]}, indent=2))
    failed = sum(r.passed is not True for r in results)
    print(f"\n{len(results) - failed} of {len(results)} scenarios pass ({wall:.0f} s)")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
