"""Folders only this user can use, for what a sync writes outside the warehouse (resume journals, spools).

A folder in a shared temp folder is used only when it is this user's own, mode 0700 and not a link
(another user could otherwise read, swap or redirect what is written there); its files are opened
with ``O_NOFOLLOW``. A process holds its folder's lock file while it uses the folder (the lock goes
with the process, however it ends), and a sweep removes only this user's real folders no one holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from resources.failures import FailureKind

#: Flags of every file opened in a private folder: never through a link, not inherited by children.
_NO_LINKS = os.O_NOFOLLOW | os.O_CLOEXEC
#: The lock file of a folder in use (a journal, a spool).
LOCK = "lock"


class UnsafeFolderError(Exception):
    """A folder a sync would write in is not this user's private one (one line: the folder, why, and
    the setting that moves it). Not an ``OSError``: callers that treat a failed write as "go on
    without the file" must not go on through another user's folder."""

    failure_kind = FailureKind.CONFIGURATION


def private_folder(path: Path, setting: str) -> Path:
    """``path``, made mode 0700 if missing (its parents as usual), after checking it is a folder (not
    a link) owned by this user that no one else may enter; else :class:`UnsafeFolderError` naming
    ``setting``, the variable that moves it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "a link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "not a folder"
    elif info.st_uid != os.geteuid():
        problem = f"owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})"
    elif info.st_mode & 0o077:
        problem = f"open to other users (mode {stat.S_IMODE(info.st_mode):o}, not 700)"
    if problem is not None:
        raise UnsafeFolderError(
            f"the folder {path} is {problem}: a sync writes only in a folder of its own user; remove "
            f"it, or set {setting} to another folder"
        )
    return path


def open_private(path: Path, mode: str) -> IO[bytes]:
    """``path`` opened in binary ``mode`` (``wb``, ``ab``, ``rb``), created 0600, never
    through a link (``OSError`` when ``path`` is one)."""
    flags = {
        "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
        "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        "rb": os.O_RDONLY,
    }[mode]
    return os.fdopen(os.open(path, flags | _NO_LINKS, 0o600), mode)


def lock_file(path: Path, *, wait: bool = False) -> IO[bytes] | None:
    """``path`` opened as :func:`open_private` does and locked exclusively (``flock``): the lock goes
    with :func:`unlock`, or with the process. None when another process holds it and ``wait`` is
    false; ``OSError`` when ``path`` cannot be opened (or, with ``wait``, locked)."""
    lock = open_private(path, "ab")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        if wait:
            raise
        return None
    return lock


def unlock(lock: IO[bytes]) -> None:
    """Let go of a :func:`lock_file` lock (also for a child that inherited the file) and close it;
    nothing when it is closed already."""
    if lock.closed:
        return
    with contextlib.suppress(OSError):
        fcntl.flock(lock, fcntl.LOCK_UN)
    lock.close()


def lock_folder(folder: Path) -> IO[bytes] | None:
    """``folder``'s :data:`LOCK` taken; None when another process holds it, or when another
    process's sweep removed the folder between its making and this lock (a lock on a removed file
    is no one's: make the folder again)."""
    lock = lock_file(folder / LOCK)
    if lock is not None and os.fstat(lock.fileno()).st_nlink == 0:
        lock.close()
        return None
    return lock


def sweep(folders: Iterable[Path], useless: Callable[[Path], bool] | None = None) -> list[Path]:
    """Remove the ``folders`` no process holds (:data:`LOCK`), of those ``useless`` says (asked again
    once locked: the folder's process may have kept something between the look and the lock); only
    this user's folders, never through a link."""
    removed: list[Path] = []
    for folder in folders:
        if not _own_folder(folder) or (useless is not None and not useless(folder)):
            continue
        try:
            lock = lock_file(folder / LOCK)
        except OSError:
            continue
        if lock is None:
            continue
        with lock:
            if useless is None or useless(folder):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed


def _own_folder(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
