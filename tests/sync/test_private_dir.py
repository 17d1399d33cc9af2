"""Nothing a sync writes outside the warehouse (resume journals, spools) goes through a link or into a
folder another user owns: real folders and links planted before the run, another user simulated by
``os.chown`` (the tests that give a folder away need root)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from resources.failures import FailureKind, failure_kind
from sync import spool as spool_module
from sync.private_dir import LOCK, UnsafeFolderError, lock_file, unlock
from sync.resume import FORMAT, MANIFEST, SELECTION, ResumeStore, resume_root

OTHER_UID = 54321
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A 0600 file of this user's that a planted link points to."""
    path = tmp_path / "victim"
    path.write_bytes(b"this user's own file")
    path.chmod(0o600)
    return path


def _private(path: Path) -> Path:
    """``path`` made 0700, and its parent too when missing (as a sync makes them)."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700)
    path.mkdir(mode=0o700)
    return path


@as_root
def test_a_resume_folder_another_user_made_first_is_refused_naming_it_and_tmpdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    root = resume_root(None)
    assert root.parent == tmp_path and root.name == f"visibility-resume-{os.getuid()}"
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeFolderError) as caught:
        ResumeStore(root).journal("answers-1")
    assert str(caught.value) == (
        f"the folder {root} is owned by uid {OTHER_UID}, not by this user (uid {os.geteuid()}): a sync "
        "writes only in a folder of its own user; remove it, or set TMPDIR to another folder"
    )
    assert failure_kind(caught.value) is FailureKind.CONFIGURATION  # exit 2, and the sync stops
    assert list(root.iterdir()) == []  # no lock file made in it


def test_a_resume_folder_open_to_other_users_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "visibility-resume-0"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(UnsafeFolderError, match=r"open to other users \(mode 777, not 700\)"):
        ResumeStore(root).journal("answers-1")
    assert list(root.iterdir()) == []


def test_a_resume_folder_that_is_a_link_is_refused_and_its_targets_content_stays(tmp_path: Path) -> None:
    target = _private(tmp_path / "someone's folder")
    (target / "sub").mkdir()
    (target / "sub" / "data").write_text("kept")  # a folder without a manifest: what a sweep removes
    root = tmp_path / "root"
    root.symlink_to(target)
    with pytest.raises(UnsafeFolderError, match="is a link"):
        ResumeStore(root).journal("answers-1")
    assert (target / "sub" / "data").read_text() == "kept"


def test_a_journal_folder_that_is_a_link_is_refused_and_nothing_lands_in_its_target(tmp_path: Path) -> None:
    target = _private(tmp_path / "elsewhere")
    root = _private(tmp_path / "root")
    (root / "answers-1").symlink_to(target)
    with pytest.raises(UnsafeFolderError, match="is a link"):
        ResumeStore(root).journal("answers-1")
    assert list(target.iterdir()) == []


def test_a_lock_link_planted_in_a_journal_leaves_its_target_alone(tmp_path: Path, victim: Path) -> None:
    directory = _private(tmp_path / "root" / "answers-1")
    (directory / LOCK).symlink_to(victim)
    assert ResumeStore(tmp_path / "root").journal("answers-1") is None  # the fetch runs without one
    assert victim.read_bytes() == b"this user's own file"


@pytest.mark.parametrize(
    "planted",
    [MANIFEST, pytest.param(f".part-{os.getpid()}-000000.arrow.tmp", id="part-of-this-process")],
)
def test_a_link_planted_for_a_journals_file_receives_nothing(
    tmp_path: Path, victim: Path, planted: str
) -> None:
    directory = _private(tmp_path / "root" / "answers-1")
    (directory / SELECTION).write_text(json.dumps({"format": FORMAT, "created": time.time()}))
    (directory / MANIFEST).touch()  # a journal in use: not swept before it is opened
    (directory / planted).unlink(missing_ok=True)
    (directory / planted).symlink_to(victim)
    journal = ResumeStore(tmp_path / "root").journal("answers-1")
    assert journal is not None
    with pytest.raises(OSError):  # the fetch then goes on without journalling (write_error)
        journal.record([(0, pa.table({"n": [1]}))], ["call-1"])
    journal.close()
    assert victim.read_bytes() == b"this user's own file"


def test_the_journal_sweep_never_follows_a_link(tmp_path: Path) -> None:
    target = _private(tmp_path / "elsewhere")
    (target / "data").write_text("kept")
    root = _private(tmp_path / "root")
    (root / "answers-old").symlink_to(target)  # no manifest behind it: swept, were it a folder
    journal = ResumeStore(root).journal("answers-1")
    assert journal is not None
    journal.close()
    assert sorted(target.iterdir()) == [target / "data"] and (root / "answers-old").is_symlink()


@as_root
def test_the_spool_sweep_removes_only_this_users_folders_and_never_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module.tempfile, "gettempdir", lambda: str(tmp_path))
    prefix = spool_module.SPOOL_PREFIX
    mine, theirs, target = (tmp_path / f"{prefix}mine", tmp_path / f"{prefix}theirs", tmp_path / "elsewhere")
    for folder in (mine, theirs, target):
        folder.mkdir()  # no process holds any of them
    os.chown(theirs, OTHER_UID, OTHER_UID)
    (target / "data").write_text("kept")
    (tmp_path / f"{prefix}link").symlink_to(target)
    assert spool_module.sweep_stale() == [mine]
    assert theirs.is_dir() and (target / "data").read_text() == "kept"


def test_a_lock_file_is_refused_while_held_and_taken_once_let_go(tmp_path: Path) -> None:
    path = tmp_path / "the.lock"
    first = lock_file(path)
    assert first is not None
    assert lock_file(path) is None  # another open file (as another process's) is refused at once
    assert os.stat(path).st_mode & 0o777 == 0o600
    unlock(first)
    second = lock_file(path, wait=True)
    assert second is not None and not second.closed
    unlock(second)


def test_a_lock_file_planted_as_a_link_is_not_followed(tmp_path: Path, victim: Path) -> None:
    (tmp_path / "the.lock").symlink_to(victim)
    with pytest.raises(OSError):
        lock_file(tmp_path / "the.lock")
    assert victim.read_bytes() == b"this user's own file"
