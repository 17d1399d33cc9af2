"""Landing in the sync's process, or in a child process when asked (Dagster-free).

A sync step lands one table while it fetches the next. Landing a table holds a chunk of its rows in
Arrow, and the warehouse's own buffers. A worker process would keep that memory apart from the
fetch's, but its own interpreter and its second copy of DuckDB's and Arrow's libraries cost more than
the chunk (bench/RESULTS.md, *Memory of the process tree*): the sync lands in its own process unless
asked otherwise (``landing_worker`` of the warehouse settings, ``VISIBILITY_LANDING_WORKER=1``). A
worker then lands the tables one after the other; the run process only waits for it.

The worker never outlives the process that started it, however that process ends (SIGKILL,
SIGTERM, Ctrl+C, a run terminated by Dagster): on Linux the kernel kills it when its parent dies
(``PR_SET_PDEATHSIG``); everywhere a watchdog thread in the worker exits when a pipe only the
parent holds reaches end-of-file, or when its parent pid changes. A worker killed mid-write leaves
the table as it was, since every landing is one warehouse transaction.

It is a plain ``subprocess`` (POSIX), not a ``multiprocessing`` one: no resource tracker process,
no queue feeder threads, no re-import of the parent's ``__main__``, and nothing else holds its
pipes. It runs in its own process group, so a Ctrl+C at the terminal reaches only the parent,
which decides (the worker also ignores SIGINT): no worker traceback is printed.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from resources.warehouse.contract import TableSpec, WriteResult
from sync.landing import FetchOutcome, land
from sync.without_pandas import keep_pandas_out

#: ``prctl`` option of Linux: the signal a process gets when the thread that created it ends.
PR_SET_PDEATHSIG = 1
#: How often the worker's watchdog checks that its parent is still the process that started it.
WATCHDOG_INTERVAL_SECONDS = 0.5
#: How long a worker may take to leave after its requests pipe closed, before it is killed.
EXIT_TIMEOUT_SECONDS = 10.0

#: What the worker runs: the parent's ``sys.path`` first (``{path!r}``), then :func:`serve`.
_BOOT = (
    "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "import sys; sys.path[:] = {path!r}\n"
    "from sync.landing_worker import serve; serve(*map(int, sys.argv[1:]))\n"
)


class LandingError(Exception):
    """A landing failed in a way its own exception cannot tell: the worker died, or the error's own
    class cannot cross the process boundary (then: its class name and message)."""


class Lander:
    """``land()`` runs in one worker process while the ``with`` block lasts.

    Outside a ``with`` block, or with ``in_process`` (what a sync does unless its settings ask for the
    worker), ``land()`` lands in the calling process.
    """

    def __init__(self, warehouse_config: Mapping[str, Any], *, in_process: bool = False) -> None:
        self._config = dict(warehouse_config)
        self._worker: _Worker | None = None
        self._entered = False
        self._in_process = in_process

    def __enter__(self) -> Lander:
        if not self._in_process:
            self._worker = _Worker.start(self._config)  # it imports what landing needs while we fetch
            self._entered = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._entered = False
        worker, self._worker = self._worker, None
        if worker is not None:
            # the step is failing or being stopped: end a landing in progress now (its open
            # transaction rolls back) rather than wait for it
            worker.stop(kill=exc_type is not None)

    @property
    def worker_pid(self) -> int | None:
        """The pid of the worker process (None outside a ``with`` block)."""
        return None if self._worker is None else self._worker.pid

    def land(self, spec: TableSpec, outcome: FetchOutcome, run_id: str) -> list[WriteResult]:
        """Land ``outcome`` into the table of ``spec`` (sent whole: the worker needs no catalog).

        The worker's exception is raised here with its own class and message and no remote
        traceback attached, as if the landing had run in this process. A worker that died (killed,
        out of memory) fails this landing with :class:`LandingError`; the next one starts a new
        worker.
        """
        if not self._entered:
            return _land(self._config, spec, outcome, run_id)
        if self._worker is None or not self._worker.alive:
            if self._worker is not None:
                self._worker.stop(kill=True)
            self._worker = _Worker.start(self._config)
        status, value = self._worker.call(spec, outcome, run_id)
        if status == "ok":
            return value
        raise value


# ---------------------------------------------------------------------------------------------
# the parent's side


class _Worker:
    """One worker process, its pipes, and the thread that started it and waits for it to end.

    The process is started from that thread, which lives exactly as long as the process: Linux
    sends ``PR_SET_PDEATHSIG`` when the *thread* that created a process ends, so starting it from a
    step's thread (which may end before the process does) would kill it early.
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        keeper: threading.Thread,
        requests: Connection,
        results: Connection,
        lifeline: int,
    ) -> None:
        self.process = process
        self._keeper = keeper
        self._requests = requests
        self._results = results
        self._lifeline = lifeline
        self._lock = threading.Lock()
        #: the results pipe is closed by a failed call or by stop(), which may run in another thread
        #: (a step stopped while its landing waits): closed once, never an fd number twice
        self._closing = threading.Lock()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self._keeper.is_alive() and not self._results.closed

    @classmethod
    def start(cls, config: Mapping[str, Any]) -> _Worker:
        request_r, request_w = os.pipe()
        result_r, result_w = os.pipe()
        lifeline_r, lifeline_w = os.pipe()  # never written: its end-of-file means "the parent is gone"
        child_fds = (request_r, result_w, lifeline_r)
        command = [
            sys.executable,
            "-c",
            _BOOT.format(path=[os.fspath(p) for p in sys.path if isinstance(p, str | os.PathLike)]),
            str(os.getpid()),
            *map(str, child_fds),
        ]
        started = threading.Event()
        box: dict[str, Any] = {}

        def keep() -> None:
            try:
                box["process"] = process = subprocess.Popen(  # noqa: S603 - our own interpreter and code
                    command,
                    stdin=subprocess.DEVNULL,
                    pass_fds=child_fds,
                    process_group=0,  # Ctrl+C at the terminal reaches the parent only
                )
            except BaseException as exc:
                box["error"] = exc
                return
            finally:
                started.set()
            process.wait()  # this thread must outlive the process (PR_SET_PDEATHSIG)

        keeper = threading.Thread(target=keep, name="visibility-lander", daemon=True)
        ours = (request_w, result_r, lifeline_w)
        keeper.start()
        try:
            started.wait()
        except BaseException:  # interrupted: let the start finish (it uses the fds), then undo it
            started.wait(timeout=EXIT_TIMEOUT_SECONDS)
            if "process" in box:
                box["process"].kill()
            _close(*ours)
            raise
        finally:
            _close(*child_fds)  # the worker's copies are its own now
        if "error" in box:
            _close(*ours)
            raise box["error"]
        worker = cls(
            box["process"],
            keeper,
            Connection(request_w, readable=False),
            Connection(result_r, writable=False),
            lifeline_w,
        )
        try:
            worker._requests.send(dict(config))
        except BaseException:
            worker.stop(kill=True)
            raise
        return worker

    def call(self, spec: TableSpec, outcome: FetchOutcome, run_id: str) -> tuple[str, Any]:
        """Send one landing and wait for its answer; a dead worker is a :class:`LandingError`."""
        with self._lock:
            try:
                self._requests.send((spec, outcome, run_id))
                return self._results.recv()
            except (EOFError, OSError):
                pass
        self._close_results()  # not alive any more; the next landing starts a new worker
        self._keeper.join(timeout=EXIT_TIMEOUT_SECONDS)
        raise LandingError(
            f"the landing worker (pid {self.pid}) {_how_it_ended(self.process.returncode)} while landing "
            f"{spec.name}; the table keeps its previous rows (each landing is one transaction)"
        )

    def stop(self, *, kill: bool) -> None:
        """End the worker, at once (``kill``) or by closing its requests pipe, and reap it."""
        if kill:
            with contextlib.suppress(OSError):
                self.process.kill()
        with contextlib.suppress(OSError):
            self._requests.close()  # an idle worker's loop ends: it exits by itself
        self._keeper.join(timeout=EXIT_TIMEOUT_SECONDS)
        self._close_results()
        with contextlib.suppress(OSError):
            os.close(self._lifeline)
        if self._keeper.is_alive():  # stuck: it must not outlive the step either
            with contextlib.suppress(OSError):
                self.process.kill()
            self._keeper.join(timeout=EXIT_TIMEOUT_SECONDS)

    def _close_results(self) -> None:
        with self._closing, contextlib.suppress(OSError):
            self._results.close()


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _how_it_ended(returncode: int | None) -> str:
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-returncode).name}"
        return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


# ---------------------------------------------------------------------------------------------
# the worker's side


def serve(parent_pid: int, requests_fd: int, results_fd: int, lifeline_fd: int) -> None:
    """The worker's main loop: land each request, answer ``("ok", results)`` or ``("error", exc)``.

    The first message is the warehouse config. The loop ends when the parent closes the requests
    pipe; the worker ends sooner, without a word, if the parent goes away.
    """
    _die_with_parent(parent_pid, lifeline_fd)
    requests = Connection(requests_fd, writable=False)
    results = Connection(results_fd, readable=False)
    try:
        config = requests.recv()
    except EOFError:
        return
    _warm_up()
    while True:
        try:
            spec, outcome, run_id = requests.recv()
        except EOFError:
            return
        try:
            answer: tuple[str, Any] = ("ok", _land(config, spec, outcome, run_id))
        except Exception as exc:
            answer = ("error", _portable(exc))
        try:
            results.send(answer)
        except OSError:  # the parent closed its end: it no longer waits for this answer
            return


def _die_with_parent(parent_pid: int, lifeline_fd: int) -> None:
    """Make sure this process ends when ``parent_pid`` does, even when it is SIGKILLed."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the line above took effect
        os._exit(1)
    threading.Thread(
        target=_watch_parent, args=(parent_pid, lifeline_fd), name="parent-watchdog", daemon=True
    ).start()


def _watch_parent(parent_pid: int, lifeline_fd: int) -> None:
    """Exit at once when the lifeline pipe reaches end-of-file or the parent pid changes."""
    poller = select.poll()  # not select(): the fd may be above FD_SETSIZE in a busy parent
    poller.register(lifeline_fd, select.POLLIN)
    while True:
        ready = poller.poll(WATCHDOG_INTERVAL_SECONDS * 1000)
        if (ready and not os.read(lifeline_fd, 1)) or os.getppid() != parent_pid:
            os._exit(1)  # no cleanup: an open transaction rolls back


def _warm_up() -> None:
    """Import what landing needs while the first table is still being fetched.

    Nothing of Dagster: the worker needs the warehouse's engine only (importing Dagster was most of
    the worker's start-up CPU, and 40 MB of its memory), nor pandas (:mod:`sync.without_pandas`).
    Arrow's freed buffers go back to the system
    (:func:`sync.allocator.return_freed_memory`), so the worker does not stay at its largest chunk's
    memory.
    """
    keep_pandas_out("the landing worker")
    from sync.allocator import return_freed_memory

    return_freed_memory()
    import resources.warehouse.duckdb
    import resources.warehouse.factory  # noqa: F401


def _land(
    warehouse_config: Mapping[str, Any], spec: TableSpec, outcome: FetchOutcome, run_id: str
) -> list[WriteResult]:
    from resources.warehouse.factory import warehouse_for

    with warehouse_for(warehouse_config, landing=True) as warehouse:
        return land(warehouse, spec, outcome, run_id)


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives pickling (its class and message), else a :class:`LandingError` saying both.

    Pickling keeps neither the traceback nor ``__cause__``/``__context__``: the parent raises the
    exception with a clean chain, as the landing would have raised it in process.
    """
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 - our own bytes, just made
    except Exception:
        return LandingError(f"{type(exc).__name__}: {exc}")
    return exc
