"""Processes of the benchmarks and end-to-end tests: the sandbox, the command line, their sections
of RESULTS.md. A :class:`Service` is a child in its own session, ended with its whole process group
when its block or the interpreter exits (and on SIGTERM/SIGHUP after :func:`install_signal_handlers`);
it gets SIGTERM if the process that started it dies. Nothing here imports Dagster or the project:
the code under test may be another tree (``code_root``).
"""

from __future__ import annotations

import argparse
import atexit
import compileall
import contextlib
import datetime as dt
import functools
import multiprocessing
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "RESULTS.md"
SANDBOX_TODAY = dt.date(2026, 11, 1)  # first day without data: the newest date with data is the 31st
#: First daily partition of every stack and CLI run started here (the sandbox holds 120 days).
START_DATE = dt.date(2026, 7, 5)


def write_section(section: str, text: str, path: Path = RESULTS) -> None:
    """Replace the ``section`` heading's section of ``path`` with ``text`` (append it if absent)."""
    current = path.read_text() if path.exists() else "# Benchmark results\n\n"
    pattern = re.compile(rf"^{re.escape(section)}\n.*?(?=^## |\Z)", re.S | re.M)
    block = text.rstrip("\n") + "\n\n"
    if pattern.search(current):
        updated = pattern.sub(lambda _: block, current, count=1)
    else:
        updated = current.rstrip("\n") + "\n\n" + block
    path.write_text(updated.rstrip("\n") + "\n")


def parser(doc: str) -> argparse.ArgumentParser:
    """A benchmark's parser: its docstring as the help, and ``--no-write``."""
    parsed = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parsed.add_argument("--no-write", action="store_true", help="print the figures, leave RESULTS.md alone")
    return parsed


def publish(section: str, text: str, write: bool, path: Path = RESULTS) -> None:
    """Print a benchmark's section, and write it into ``path`` when ``write``."""
    print(text, flush=True)
    if write:
        write_section(section, text, path)
        print(f"wrote {section!r} of {path}")


def work_folder(prefix: str) -> Path:
    """A temporary folder, removed with everything in it when the benchmark exits."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, work, True)
    return work


def code_label(code_root: Path = ROOT) -> str:
    """How RESULTS.md names the code under test: its commit, and whether the tree has changes."""
    git = ["git", "-C", str(code_root)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run([*git, "status", "--porcelain", "-uno"], capture_output=True, text=True)
    except (subprocess.CalledProcessError, OSError):
        return f"the tree at `{code_root}`"
    return f"`{head.stdout.strip()}`" + (" with uncommitted changes" if dirty.stdout.strip() else "")


def machine(when: str = "at the end") -> str:
    """The time and the machine's load, as every section of RESULTS.md states them."""
    return (
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores shared with other work "
        f"(load average {os.getloadavg()[0]:.1f} {when})"
    )


#: Runs first in every child (a ``preexec_fn`` is unsafe in a threaded parent): SIGTERM when its
#: parent dies (``PR_SET_PDEATHSIG``, kept across exec), then it becomes the command.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "parent = int(sys.argv[1])\n"
    "if sys.platform.startswith('linux'):\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"
    "if os.getppid() != parent:\n"
    "    sys.exit(143)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


class Service:
    """A child process in its own session; :meth:`stop` ends its whole process group."""

    live: set[Service] = set()
    _lock = threading.Lock()

    def __init__(
        self,
        name: str,
        cmd: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        log: Path,
        stderr: Path | None = None,
    ) -> None:
        """Output to ``log`` (stderr too, unless ``stderr`` names a file of its own)."""
        self.name = name
        self.cmd = list(cmd)
        self.log_path = log
        log.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as files:
            self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
            err = files.enter_context(open(stderr, "ab")) if stderr else subprocess.STDOUT
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *self.cmd],
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=err,
                start_new_session=True,  # its own process group: code servers and run workers join it
            )
        with Service._lock:
            Service.live.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # pragma: no cover
            return True
        return True

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to the group, then SIGKILL to whatever of it is left after ``grace`` seconds."""
        with Service._lock:
            Service.live.discard(self)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.2)
            if self.proc.poll() is not None and not self._group_alive():
                break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self._log.close()

    @classmethod
    def stop_all(cls) -> None:
        for service in list(cls.live):
            service.stop(grace=5.0)


atexit.register(Service.stop_all)


class TreeSampler:
    """Peak of the summed RSS of some process trees, sampled in a thread; ``seen``: every descendant
    (pid -> process, short name, description); ``peaks``: ``command``, the largest process's."""

    def __init__(self, *roots: int, every: float = 0.05) -> None:
        self.every = every
        self.peak = self.base = 0
        self.peaks: dict[str, int] = {}
        self.seen: dict[int, tuple[psutil.Process, str, str]] = {}
        self.lock = threading.Lock()
        self._roots = list(roots)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, pid: int) -> None:
        self._roots.append(pid)

    def __enter__(self) -> TreeSampler:
        self.sample()
        self.base = self.peak
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def sample(self) -> None:
        total = 0
        for pid in list(self._roots):
            try:
                root = psutil.Process(pid)
                children = root.children(recursive=True)
            except psutil.Error:
                continue
            for proc in [root, *children]:
                try:
                    rss = proc.memory_info().rss
                    cmd = proc.cmdline()
                except psutil.Error:
                    continue
                total += rss
                self.peaks["command"] = max(self.peaks.get("command", 0), rss)
                if proc is not root and proc.pid not in self.seen:
                    name = Path(cmd[0]).name if cmd else "?"
                    with self.lock:
                        self.seen[proc.pid] = (proc, name, f"pid {proc.pid} ({' '.join(cmd)[:120]})")
        self.peak = max(self.peak, total)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)


def process_cpu(process: psutil.Process) -> float | None:
    """CPU one process has spent so far (user + system); None once it is gone."""
    try:
        times = process.cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def in_child(target: Callable[..., None], *args: Any) -> dict[str, Any]:
    """``target(*args, out)`` in a fresh spawned process: the dict ``out`` it filled."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        out = manager.dict()
        proc = ctx.Process(target=target, args=(*args, out))
        proc.start()
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"{target.__name__} failed (exit {proc.exitcode})")
        return dict(out)


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP end the interpreter through ``SystemExit``: every ``with`` block (and
    :meth:`Service.stop_all` at exit) then stops the services. Main thread only."""

    def handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: Folders of a code tree that hold no module of the project's.
_NOT_CODE = re.compile(r"[/\\](\.venv|\.git|__pycache__)([/\\]|$)")


@functools.cache
def compiled(code_root: Path) -> Path:
    """The code tree's modules compiled to bytecode (once a process), as a user's command finds them
    after its first run (pip compiles the libraries it installs; Python writes the project's own
    bytecode the first time it imports them). Where ``PYTHONDONTWRITEBYTECODE`` is set, as on the
    machines these benchmarks ran on, every measured process would otherwise compile the project's
    modules again: 0.25 s of CPU at each start of the command (its modules' imports, eight alternated
    runs each way: 2.47 s compiled, 2.72 s not)."""
    compileall.compile_dir(code_root, quiet=2, rx=_NOT_CODE, workers=1)
    return code_root


def code_env(code_root: Path, **extra: str) -> dict[str, str]:
    """This environment with the code tree (compiled: :func:`compiled`) first on the path and no
    inherited project settings."""
    compiled(code_root)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VISIBILITY_", "DAGSTER_HOME", "DAGSTER_IS_DEV_CLI"))
    }
    env["PYTHONPATH"] = os.pathsep.join([str(code_root), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def wait_until(
    what: str,
    probe: Any,
    timeout: float,
    services: Iterable[Service] = (),
    every: float = 0.25,
    errors: tuple[type[Exception], ...] = (httpx.HTTPError, OSError, KeyError, ValueError, RuntimeError),
) -> Any:
    """Call ``probe()`` until it returns something truthy (``errors`` count as not yet); fail early
    when a service died."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        for service in services:
            if not service.alive():
                raise RuntimeError(f"{service.name} exited ({service.proc.returncode}):\n{service.tail()}")
        try:
            value = probe()
        except errors as exc:
            last, value = exc, None
        if value:
            return value
        time.sleep(every)
    tails = "\n".join(f"--- {s.name}\n{s.tail()}" for s in services)
    raise TimeoutError(f"{what}: not ready after {timeout:.0f} s ({last!r})\n{tails}")


# ---------------------------------------------------------------------------------------------
# the sandbox


@dataclass
class SandboxService:
    url: str
    keys: dict[str, str]
    size: str
    rate: float
    service: Service | None = None

    @property
    def key(self) -> str:
        return self.keys["workspace"]

    def stats(self) -> dict[str, dict[str, int]]:
        response = httpx.get(f"{self.url}/_sandbox/stats", timeout=30)
        response.raise_for_status()
        return response.json()

    def reset_stats(self) -> None:
        httpx.post(f"{self.url}/_sandbox/stats/reset", timeout=30).raise_for_status()

    def cpu_seconds(self) -> float:
        """CPU the sandbox's process has spent so far (user + system): on a machine it shares with
        the command line, the service's work is CPU the command could not use."""
        if self.service is None:
            return 0.0
        return process_cpu(psutil.Process(self.service.pid)) or 0.0

    def configure(self, **changes: Any) -> None:
        """``POST /_sandbox/config``: limits and faults changed as a user would."""
        httpx.post(f"{self.url}/_sandbox/config", json=changes, timeout=30).raise_for_status()


def served(stats: Mapping[str, Mapping[str, int]]) -> int:
    """Requests the sandbox answered (every status)."""
    return sum(sum(by_status.values()) for by_status in stats.values())


def throttled(stats: Mapping[str, Mapping[str, int]]) -> int:
    return sum(by_status.get("429", 0) for by_status in stats.values())


def by_endpoint(stats: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    return {endpoint: sum(by_status.values()) for endpoint, by_status in sorted(stats.items())}


@contextlib.contextmanager
def sandbox_service(
    *,
    size: str = "demo",
    rate: float = 50.0,
    seed: int = 7,
    today: dt.date = SANDBOX_TODAY,
    code_root: Path = ROOT,
    log_dir: Path,
    max_concurrent: int = 16,
) -> Iterator[SandboxService]:
    """``python -m sandbox`` in its own process (its GIL is not the sync's), limited to ``rate``/s."""
    port = free_port()
    cmd = [sys.executable, "-m", "sandbox", "--port", str(port), "--size", size, "--seed", str(seed)]
    cmd += ["--today", today.isoformat()]
    service = Service("sandbox", cmd, code_env(code_root), code_root, log_dir / "sandbox.log")
    try:
        url = f"http://127.0.0.1:{port}"
        keys = wait_until(
            "sandbox",
            lambda: httpx.get(f"{url}/_sandbox/keys", timeout=5).json()["keys"],
            120,
            [service],
        )
        limits = {
            "rate_per_second": rate,
            "burst": max(1, int(rate)),
            "max_concurrent": max_concurrent,
            "endpoint_limit": 100_000,
        }
        # the competitors the workspace tracks "at start" are backfilled from the first request on:
        # their history (2 s by default) would otherwise depend on how soon a command first asks
        steady = {"limits": limits, "backfill_delay_seconds": 0}
        httpx.post(f"{url}/_sandbox/config", json=steady, timeout=30).raise_for_status()
        yield SandboxService(url, dict(keys), size, rate, service)
    finally:
        service.stop()


# ---------------------------------------------------------------------------------------------
# the command line


class Watcher(Protocol):
    """What watches a started command (:class:`TreeSampler`, or a benchmark's own sampler)."""

    def watch(self, pid: int) -> None: ...


@dataclass
class CliOutcome:
    exit_code: int
    wall_seconds: float
    output: str


def cli_args(dates: Sequence[dt.date], engines: Sequence[str] | None) -> list[str]:
    args = [
        "run",
        "--start",
        min(dates).isoformat(),
        "--end",
        (max(dates) + dt.timedelta(days=1)).isoformat(),
    ]
    for engine in engines or ():
        args += ["--engine", engine]
    return [*args, "--quiet"]


def cli_env(url: str, key: str, db: Path, code_root: Path = ROOT, **extra: str) -> dict[str, str]:
    """The environment of a ``visibility-sync`` process against ``url``, into the DuckDB file ``db``."""
    return code_env(
        code_root,
        VISIBILITY_API_URL=url,
        VISIBILITY_API_KEY=key,
        VISIBILITY_WAREHOUSE=f"duckdb:///{db}",
        VISIBILITY_START_DATE=START_DATE.isoformat(),
        **extra,
    )


def run_cli(
    args: Sequence[str],
    *,
    url: str,
    key: str,
    db: Path,
    code_root: Path = ROOT,
    log_dir: Path,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 3600.0,
    fresh: bool = True,
    sampler: Watcher | None = None,
    command: Sequence[str] | None = None,
    kill_when: Callable[[], bool] | None = None,
) -> CliOutcome:
    """``visibility-sync <args>`` as a process (``python -m pipelines.cli``: the code tree's own
    CLI; or ``command``), into ``db`` (a fresh DuckDB file unless not ``fresh``), with no
    ``DAGSTER_HOME``; its tree watched by ``sampler``; SIGKILLed (its group) once ``kill_when()``."""
    for path in (db, Path(f"{db}.wal")) if fresh else ():
        path.unlink(missing_ok=True)
    env = cli_env(url, key, db, code_root, **dict(extra_env or {}))
    log = log_dir / f"cli-{db.stem}-{time.time_ns()}.log"
    started = time.monotonic()
    command = command or [sys.executable, "-m", "pipelines.cli", *args]
    service = Service("visibility-sync", command, env, code_root, log)
    if sampler is not None:
        sampler.watch(service.pid)
    try:
        while kill_when is not None and service.alive() and not kill_when():
            time.sleep(0.05)
        if kill_when is not None and service.alive():
            os.killpg(service.pid, signal.SIGKILL)
        code = service.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = -1
    finally:
        wall = time.monotonic() - started
        service.stop(grace=5)
    return CliOutcome(code, round(wall, 2), service.tail(4000))


@dataclass
class TreeRun:
    """One measured process tree: wall, CPU, peak RSS (in all, and by role), requests answered."""

    exit_code: int
    wall: float
    cpu: float
    peak_rss_mb: float
    peaks_mb: dict[str, float]
    requests: int
    throttled: int
    output: str = field(repr=False)
    rows: int = 0  # rows landed, when counted
    label: str = ""
    service_cpu: float = 0.0  # CPU the sandbox spent serving the run


def measured_cli(sandbox: SandboxService, args: Sequence[str], db: Path, **kw: Any) -> TreeRun:
    """:func:`run_cli` against ``sandbox`` (its counts reset first), the whole tree measured: CPU by
    ``RUSAGE_CHILDREN`` (every descendant is waited for), RSS by a :class:`TreeSampler`."""
    sandbox.reset_stats()
    before, service_before = children_cpu(), sandbox.cpu_seconds()
    with TreeSampler() as sampler:
        cli = run_cli(args, url=sandbox.url, key=sandbox.key, db=db, sampler=sampler, **kw)
    cpu, service_cpu = children_cpu() - before, sandbox.cpu_seconds() - service_before
    stats = sandbox.stats()
    peaks = {role: round(v / 2**20, 1) for role, v in sampler.peaks.items()}
    mb = round(sampler.peak / 2**20, 1)
    return TreeRun(
        cli.exit_code,
        cli.wall_seconds,
        round(cpu, 2),
        mb,
        peaks,
        served(stats),
        throttled(stats),
        cli.output,
        service_cpu=round(service_cpu, 2),
    )
