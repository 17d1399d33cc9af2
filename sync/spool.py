"""A disk spool of fetched rows, so a run's memory does not grow with its number of days.

Fetched rows (filtered to the run's cells) are appended to Arrow IPC files by date bucket; landing
reads them back one write scope at a time. A spool is removed once its table landed or failed; its
process holds its lock meanwhile, so one whose process was killed is swept by the next spool. A
full disk is one ``SpoolDiskFullError`` naming ``TMPDIR``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from sync.private_dir import lock_folder, sweep, unlock

#: Temp-directory prefix of every spool, so stale ones can be found and swept.
SPOOL_PREFIX = "visibility-spool-"
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class SpoolDiskFullError(OSError):
    """The spool's disk is full: one line naming the folder and the setting that moves it."""


def _is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
        return True
    text = str(exc)  # pyarrow's IO errors carry the errno in their text only
    return isinstance(exc, OSError) and ("No space left on device" in text or "Disk quota exceeded" in text)


@contextlib.contextmanager
def disk_full_named(directory: str | Path) -> Iterator[None]:
    """Turn a full disk under ``directory`` into ``SpoolDiskFullError`` (one line, no traceback needed)."""
    try:
        yield
    except SpoolDiskFullError:
        raise
    except OSError as exc:
        if not _is_disk_full(exc):
            raise
        free = shutil.disk_usage(directory).free if Path(directory).exists() else 0
        raise SpoolDiskFullError(
            errno.ENOSPC,
            f"no space left on the device of the spool folder {directory} ({free // 2**20} MiB free): "
            "set TMPDIR to a folder on a larger disk; the partial spool was removed and no "
            "table was changed by it",
        ) from None


def sweep_stale() -> list[Path]:
    """Remove this user's spools no process holds (their process was killed before removing them)."""
    return sweep(Path(tempfile.gettempdir()).glob(f"{SPOOL_PREFIX}*"))


@dataclass
class Spool:
    """Append tables (their extra columns may differ: a segment per schema); read back filtered.

    Each append is one write: its callers hand batches of many calls' rows (``sync.fetching``).
    """

    directory: str
    segments: list[str] = field(default_factory=list)
    rows: int = 0

    def __post_init__(self) -> None:
        self._writer: ipc.RecordBatchFileWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._schema: pa.Schema | None = None

    def append(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._schema is not None and not table.schema.equals(self._schema):
            self.close()  # other extra columns: a segment of their own
        if self._writer is None:
            path = str(Path(self.directory) / f"segment-{len(self.segments):05d}.arrow")
            self._sink = pa.OSFile(path, "wb")
            self.segments.append(path)
            self._writer = ipc.new_file(self._sink, table.schema)
            self._schema = table.schema
        self._writer.write_table(table)
        self.rows += table.num_rows

    def close(self) -> None:
        """Close the open segment (required before reading); its file is closed even when the last
        write fails (a full disk), so removing the spool frees its space at once."""
        writer, sink = self._writer, self._sink
        self._writer, self._schema, self._sink = None, None, None
        try:
            if writer is not None:
                writer.close()
        finally:
            if sink is not None:
                sink.close()

    def adopt(self, path: str | Path, rows: int) -> None:
        """Take an Arrow IPC file another writer made (a resume journal's) as a segment, without
        rewriting its rows: a hard link in this spool's folder, so either side may remove its own
        name first; a copy where a link cannot be made (another file system)."""
        if rows == 0:
            return
        target = str(Path(self.directory) / f"segment-{len(self.segments):05d}.arrow")
        try:
            os.link(path, target)
        except OSError as exc:
            if _is_disk_full(exc):
                raise
            shutil.copyfile(path, target)
        self.segments.append(target)
        self.rows += rows

    def read(self, predicate: Callable[[pa.Table], pa.Table]) -> Iterator[pa.Table]:
        """Each stored batch passed through ``predicate`` (a filter); empty results skipped."""
        self.close()
        for path in self.segments:
            with pa.OSFile(path, "rb") as source:
                reader = ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    part = predicate(pa.Table.from_batches([reader.get_batch(i)]))
                    if part.num_rows:
                        yield part

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)


_EPOCH = dt.date(1970, 1, 1)


def bucket_of(day: dt.date, days_per_bucket: int) -> int:
    """Buckets are aligned on the epoch, so the same day always falls in the same bucket."""
    return (day - _EPOCH).days // days_per_bucket


def bucket_pieces(table: pa.Table, date_column: str, days_per_bucket: int) -> list[tuple[int, pa.Table]]:
    """``table``'s rows by date bucket (each piece one bucket's rows), in bucket order."""
    if table.num_rows == 0:
        return []
    days = pc.cast(table[date_column], pa.int32())
    bounds = pc.min_max(days)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is not None and low // days_per_bucket == high // days_per_bucket:
        return [(low // days_per_bucket, table)]  # one bucket (most calls' rows): no filter
    keys = pc.floor(pc.divide(pc.cast(days, pa.float64()), float(days_per_bucket)))
    keys = pc.cast(keys, pa.int64())
    return [(int(key), table.filter(pc.equal(keys, key))) for key in sorted(pc.unique(keys).to_pylist())]


def bucket_windows(start: dt.date, end: dt.date, days_per_bucket: int) -> Iterator[tuple[dt.date, dt.date]]:
    """``[start, end)`` cut at bucket boundaries: each piece lies in exactly one bucket."""
    while start < end:
        boundary = _EPOCH + dt.timedelta(days=(bucket_of(start, days_per_bucket) + 1) * days_per_bucket)
        piece_end = min(end, boundary)
        yield start, piece_end
        start = piece_end


@dataclass
class DateSpool:
    """Rows spooled by date bucket, so landing a bucket reads only that bucket's files.

    Landing a long backfill chunk by chunk then costs one pass over the rows, not one pass per chunk.
    """

    directory: str
    date_column: str
    days_per_bucket: int
    #: the spool's lock, held until it is removed (:func:`sync.private_dir.lock_folder`)
    lock: IO[bytes]
    buckets: dict[int, Spool] = field(default_factory=dict)

    @classmethod
    def create(
        cls, date_column: str, days_per_bucket: int, name: str = "rows", parent: str | Path | None = None
    ) -> DateSpool:
        """A new spool in the temp directory, or in ``parent``, locked by this process."""
        sweep_stale()
        folder = parent if parent is not None else tempfile.gettempdir()
        with disk_full_named(folder):
            for _ in range(3):
                directory = tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{name}-", dir=parent)
                try:
                    lock = lock_folder(Path(directory))
                except FileNotFoundError:
                    continue  # another spool's sweep removed it before it was locked: make another
                except BaseException:
                    shutil.rmtree(directory, ignore_errors=True)
                    raise
                if lock is not None:
                    return cls(directory, date_column, days_per_bucket, lock)
        raise OSError(errno.EAGAIN, f"no spool folder could be locked in {folder}")

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.buckets.values())

    def _bucket(self, key: int) -> Spool:
        if key not in self.buckets:
            path = Path(self.directory) / f"bucket-{key}"
            path.mkdir()
            self.buckets[key] = Spool(directory=str(path))
        return self.buckets[key]

    def split(self, table: pa.Table) -> list[tuple[int, pa.Table]]:
        """``table``'s rows by this spool's buckets: what :meth:`adopt` takes back as files."""
        return bucket_pieces(table, self.date_column, self.days_per_bucket)

    def adopt(self, bucket: int, path: str | Path, rows: int) -> None:
        """Take a file of one bucket's rows (:meth:`split`) written elsewhere (a resume journal's),
        without rewriting them (:meth:`Spool.adopt`)."""
        with disk_full_named(self.directory):
            self._bucket(bucket).adopt(path, rows)

    def append(self, table: pa.Table) -> None:
        with disk_full_named(self.directory):
            for key, piece in self.split(table):
                self._bucket(key).append(piece)

    def close(self) -> None:
        with disk_full_named(self.directory):
            for spool in self.buckets.values():
                spool.close()

    def read(
        self,
        predicate: Callable[[pa.Table], pa.Table],
        start: dt.date | None = None,
        end: dt.date | None = None,
    ) -> Iterator[pa.Table]:
        """Batches of the buckets that meet ``[start, end)`` (all when no window), filtered."""
        wanted = set(self.buckets)
        if start is not None and end is not None:
            last = end - dt.timedelta(days=1)
            wanted = {
                k
                for k in self.buckets
                if bucket_of(start, self.days_per_bucket) <= k <= bucket_of(last, self.days_per_bucket)
            }
        for key in sorted(wanted):
            yield from self.buckets[key].read(predicate)

    def remove(self) -> None:
        for spool in self.buckets.values():
            with contextlib.suppress(OSError):  # a full disk may fail the last write: remove anyway
                spool.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        unlock(self.lock)
