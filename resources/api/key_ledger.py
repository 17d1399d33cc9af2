"""One key's rate window and requests in flight, shared by every process of this machine using it.

Each process paces itself from the service's ``X-RateLimit-*`` headers (``budget.RateWindow``), but
runs on one key draw on one limit: four runs that each believe the whole window is theirs trade 429s
(bench/RESULTS.md, *One key, four runs*). The ledger is a small JSON file per (URL, key) in the temp
directory, read and written under an exclusive ``flock`` by every process for every request: the
window's estimate (the newest answer's ``remaining``, the reset time, a Retry-After block; once the
key shows a token bucket, its pacing: the refill rate and the time ``remaining`` earns from, so the
processes together send at the key's rate) and the requests in flight of every process, so each
answer is corrected for the requests of *all* processes that it cannot have counted yet, and the
concurrency limit counts everyone's requests in flight.

The file name is a keyed hash of the URL and the key (never the key), in a directory of the user's
own (runs of one user share the budget). Every process using the key is a member of the ledger; one
leaving the key (at its exit) removes its entries, and the file and folder when no other live process
is a member or has a request in it, so what the runs learnt of the key lasts while any of them runs,
and a sync leaves nothing in the temp directory. A process killed mid-request leaves its entries
behind; they are dropped once their process is gone or after ``STALE_SECONDS``, and the file goes
with the next process's exit.
Across machines (Kubernetes run pods) this file is not shared: Dagster's
concurrency pools bound the runs that may use the key at once (docs/OPERATIONS.md).
POSIX only (``fcntl``); elsewhere, and when the file cannot be used, each process paces alone.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("visibility.api")

#: Where the ledgers live (one file per URL and key), under the temp directory.
LEDGER_DIRECTORY = "visibility-sync-keys"
#: An in-flight entry older than this is dropped even if its process lives (a request times out sooner).
STALE_SECONDS = 300.0
#: How long a process found alive is taken to be alive before it is looked up again.
PID_CHECK_SECONDS = 1.0
#: Largest ledger file read (a few hundred requests in flight fit many times over).
MAX_BYTES = 1 << 20
#: Most spaces a shorter state is padded with instead of cutting the file (``_write``).
MAX_PADDING = 4096


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def _read(fd: int, size: int) -> bytes:
    """The whole file of ``size`` bytes (at most ``MAX_BYTES``): asking ``pread`` for ``MAX_BYTES``
    of a small file allocated a megabyte on every request."""
    return os.pread(fd, min(size, MAX_BYTES), 0)


def _write(fd: int, data: bytes, size: int) -> None:
    """Replace the file's ``size`` bytes by ``data``: a shorter text is padded with spaces (JSON
    allows them after the value) rather than cut, since ``ftruncate`` (it journals the new size)
    cost more CPU than the ``pwrite`` itself; a text more than ``MAX_PADDING`` shorter is cut."""
    if len(data) < size <= len(data) + MAX_PADDING:
        data += b" " * (size - len(data))
    os.pwrite(fd, data, 0)
    if len(data) < size:
        os.ftruncate(fd, len(data))


class LedgerState(msgspec.Struct):
    """The shared part of a key's budget, in wall-clock seconds (``time.time()``).

    A msgspec struct, read from and written to the file's JSON at C speed: the file is read and
    written twice per request, and ``json`` with the conversions around it cost about a tenth of a
    request's CPU (issue 21)."""

    limit: int | None = None
    remaining: int | None = None
    reset_at: float | None = None
    reset_from_header: bool = False
    blocked_until: float = 0.0
    block_reason: str = "Retry-After"
    newest_seq: int = 0
    newest_sent_at: float = 0.0
    #: pacing (``budget.RateWindow``): the refill rate learnt, whether requests are paced by it,
    #: since when ``remaining`` earns refills, 429s met while pacing; what it learns the kind
    #: from: the reference answer (remaining, sent, answered, requests sent by then), the admitted
    #: answers counted since, the last refill seen (from, to)
    refill_rate: float | None = None
    paced: bool = False
    credit_at: float = 0.0
    pacing_refusals: int = 0
    reference: tuple[int, float, float, int] | None = None
    counted: int = 0
    refill_seen: tuple[float, float] | None = None
    #: the trial that spreads one window evenly (due; start, end, allowed, sent; done)
    trial_due: bool = False
    trial: tuple[float, float, int, int] | None = None
    trialled: bool = False
    seq: int = 0
    #: requests answered so far (every process)
    releases: int = 0
    #: global send number -> (pid, send time)
    in_flight: dict[int, tuple[int, float]] = msgspec.field(default_factory=dict)
    #: the processes using the key (the ledger, and what it learnt, stays while one of them lives)
    members: list[int] = msgspec.field(default_factory=list)

    @classmethod
    def load(cls, raw: bytes) -> LedgerState:
        """The state a file holds; a fresh one for an empty, torn or foreign file (it is only an
        estimate): anything but a JSON object of these fields with these types."""
        if not raw:
            return cls()
        try:
            return _DECODER.decode(raw)
        except msgspec.MsgspecError:
            return cls()

    def dump(self) -> bytes:
        return _ENCODER.encode(self)

    def drop_stale(self, now: float, own_pid: int, alive: Callable[[int], bool] = _alive) -> None:
        gone = [
            seq
            for seq, (pid, sent_at) in self.in_flight.items()
            if now - sent_at > STALE_SECONDS or (pid != own_pid and not alive(pid))
        ]
        for seq in gone:
            del self.in_flight[seq]
        self.members = [pid for pid in self.members if pid == own_pid or alive(pid)]


_DECODER = msgspec.json.Decoder(LedgerState)
_ENCODER = msgspec.json.Encoder()
# msgspec's information on the type built now, never by two threads at once (as ``endpoints.rows_type`` does)
_ENCODER.encode(LedgerState())


class KeyLedger:
    """The locked file of one key; :meth:`transaction` yields its state and writes it back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd: int | None = None
        self.usable = fcntl is not None
        self._registered = False
        self.pid = os.getpid()
        #: pid -> (alive, when checked): each other process is looked up at most once a second
        self._seen: dict[int, tuple[bool, float]] = {}

    @classmethod
    def for_key(cls, api_url: str, api_key: str, directory: Path | None = None) -> KeyLedger | None:
        """The ledger of ``api_key`` at ``api_url`` on this machine, or None where files cannot be shared."""
        if fcntl is None:
            return None
        digest = hashlib.blake2b(
            f"{api_url.rstrip('/')}\n{api_key}".encode(), digest_size=16, person=b"visibility-key"
        ).hexdigest()
        user = os.getuid() if hasattr(os, "getuid") else 0
        folder = directory or Path(tempfile.gettempdir()) / f"{LEDGER_DIRECTORY}-{user}"
        try:
            folder.mkdir(mode=0o700, exist_ok=True)  # one user's runs share; another's cannot meddle
        except OSError:
            return None
        return cls(folder / f"{digest}.json")

    def _open(self) -> int:
        if self._fd is None or self.pid != os.getpid():  # a forked child opens its own
            self.path.parent.mkdir(mode=0o700, exist_ok=True)  # the last process may have removed it
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
            if self.pid != os.getpid() or not self._registered:
                atexit.register(self.release)  # the last process on the key removes the file
                self._registered = True
            self.pid = os.getpid()
        return self._fd

    def _locked(self) -> tuple[int, int]:
        """The file's descriptor, locked, and the file's size; reopened when the last process on
        the key removed the file since this one opened it (its lock would no longer be the one the
        others take: a removed file has no links left)."""
        for _ in range(3):
            fd = self._open()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                status = os.fstat(fd)
            except OSError:
                status = None
            if status is not None and status.st_nlink > 0:
                return fd, status.st_size
            fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(fd)
            self._fd = None
        raise OSError("the key's ledger file keeps being replaced")

    def release(self) -> None:
        """This process leaves the key: its requests leave the ledger, and the file (and its folder)
        go when no other live process has a request in it, so runs leave nothing on disk."""
        with self._lock:
            if not self.usable or self._fd is None or self.pid != os.getpid():
                return
            try:
                fd, size = self._locked()
            except OSError:
                return
            try:
                state = LedgerState.load(_read(fd, size))
                state.drop_stale(time.time(), self.pid, self._alive)
                state.in_flight = {k: v for k, v in state.in_flight.items() if v[0] != self.pid}
                state.members = [pid for pid in state.members if pid != self.pid]
                if not state.in_flight and not state.members:
                    self.path.unlink(missing_ok=True)
                    with contextlib.suppress(OSError):
                        self.path.parent.rmdir()  # only when empty
                else:
                    _write(fd, state.dump(), size)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                with contextlib.suppress(OSError):
                    os.close(fd)
                self._fd = None

    def transaction(self) -> _Transaction:
        """The state, under the file's lock, written back after the ``with`` block (None, and no
        lock, once the file proved unusable: the caller then paces alone)."""
        return _Transaction(self)

    def _begin(self) -> tuple[LedgerState | None, int | None, int]:
        if not self.usable:
            return None, None, 0
        try:
            fd, size = self._locked()
        except OSError as exc:
            self._give_up(exc)
            return None, None, 0
        try:
            state = LedgerState.load(_read(fd, size))
        except OSError as exc:
            self._give_up(exc)
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            return None, None, 0
        state.drop_stale(time.time(), self.pid, self._alive)
        if self.pid not in state.members:
            state.members.append(self.pid)
        return state, fd, size

    def _alive(self, pid: int) -> bool:
        now = time.monotonic()
        known = self._seen.get(pid)
        if known is None or now - known[1] > PID_CHECK_SECONDS:
            if len(self._seen) > 1024:
                self._seen.clear()
            known = self._seen[pid] = (_alive(pid), now)
        return known[0]

    def _end(self, fd: int, state: LedgerState | None, size: int) -> None:
        try:
            if state is not None:
                _write(fd, state.dump(), size)
        except OSError as exc:
            self._give_up(exc)
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _give_up(self, exc: OSError) -> None:
        self.usable = False
        logger.warning(
            "the request budget shared with other processes on this key is unavailable (%s: %s); "
            "this process paces alone",
            type(exc).__name__,
            exc.strerror or exc,
        )

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None


class _Transaction:
    """``KeyLedger.transaction``: a plain context manager (twice per request: a generator-based one
    costs more than the lock)."""

    __slots__ = ("_fd", "_ledger", "_size", "_state")

    def __init__(self, ledger: KeyLedger) -> None:
        self._ledger = ledger

    def __enter__(self) -> LedgerState | None:
        self._ledger._lock.acquire()
        try:
            self._state, self._fd, self._size = self._ledger._begin()
        except BaseException:
            self._ledger._lock.release()
            raise
        return self._state

    def __exit__(self, *exc: object) -> None:
        try:
            if self._fd is not None:
                self._ledger._end(self._fd, self._state, self._size)
        finally:
            self._ledger._lock.release()
