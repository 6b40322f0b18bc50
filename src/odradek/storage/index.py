"""A segment's sparse indexes, held in memory as arrays and appended to Kafka-format files.

`.index`: entries of (relative offset int32, position int32), big-endian, 8 bytes each.
`.timeindex`: entries of (timestamp int64, relative offset int32), big-endian, 12 bytes each.

Kafka preallocates index files to `segment.index.bytes` and trims them when a
segment rolls or closes; we write exactly the entries instead, so the file is
always a valid trimmed Kafka index (its length is a whole number of entries).
Lookups are binary searches over the in-memory arrays.
"""

from __future__ import annotations

import bisect
import errno
import operator
import os
import struct
import sys
from array import array
from pathlib import Path

from odradek.storage.file_pool import DEFAULT_POOL, FilePool, PinnedFd, PooledFile

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LITTLE_ENDIAN_HOST = sys.byteorder == "little"


class CorruptIndex(ValueError):
    """An index file that fails its sanity check; the caller rebuilds it from the log."""


class _IndexFile:
    """The append-only file behind an index. Written only while its segment is active, through
    the process's file pool (storage/file_pool.py): each write borrows the file's fd and gives
    it back at once, so an index holds no fd of its own and the pool's `max_open` bounds how
    many index files stay open (issue 22: an active segment used to pin its `.index` and
    `.timeindex` too, three fds a written partition for ~10 s that the fd budget counted as
    one). Entries are written once per `index.interval.bytes` of log: the borrow (a lock and a
    dict move while the pool holds the file open, an open() when it had evicted it) is paid
    there, not per append."""

    entry_size = 0

    def __init__(self, path: Path, max_index_bytes: int, pool: FilePool | None = None) -> None:
        self._path = path
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self._pool = pool if pool is not None else DEFAULT_POOL
        self._pf: PooledFile | None = None
        # written or cut since the last fsync: a flush of a clean index makes no syscall (a
        # checkpoint over 20,000 logs was three fsyncs a log, two of them for indexes that
        # had not changed)
        self._dirty = False

    @property
    def path(self) -> Path:
        return self._path

    @path.setter
    def path(self, value: Path) -> None:
        # a rename (`.deleted`): a reopen after eviction must find the file under its new name
        self._path = value
        if self._pf is not None:
            self._pf.path = value

    def _open(self) -> PinnedFd:
        """The file's fd, pinned while the caller holds the returned object (one write)."""
        pf = self._pf
        if pf is None:
            pf = self._pf = self._pool.file(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return pf.pinned_fd()

    def release(self) -> None:
        """Nothing is held between writes any more; kept for callers (a segment going idle)."""

    def _write(self, data: bytes) -> None:
        self._dirty = True
        fd = self._open()
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]

    def _truncate_file(self, entries: int) -> None:
        self._dirty = True
        os.ftruncate(self._open(), entries * self.entry_size)

    def _read_file(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError as exc:
            raise CorruptIndex(f"{self.path}: missing") from exc

    def flush(self) -> None:
        # Flushes run on a worker thread while the event loop may roll the segment and close
        # this file: fall back to fsync by path, and a file deleted meanwhile needs nothing.
        # (fsync flushes the inode's pages whatever fd it is given, so a reopen is as good.)
        if not self._dirty:
            return
        self._dirty = False  # before the fsync: a write meanwhile marks it again
        try:
            self._fsync()
        except BaseException:
            self._dirty = True
            raise

    def _fsync(self) -> None:
        pf = self._pf
        if pf is not None:
            try:
                fd = pf.pinned_fd()
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBADF:  # closed meanwhile: by path below
                    raise
            else:
                # an fsync that failed (EIO) must not be retried by path, which would report
                # success over lost pages (issue 22)
                os.fsync(fd)
                return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._pf is not None:
            self._pf.close()
            self._pf = None


class OffsetIndex(_IndexFile):
    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: Path, max_index_bytes: int) -> None:
        super().__init__(path, max_index_bytes)
        self.rel_offsets = array("i")
        self.positions = array("i")

    def __len__(self) -> int:
        return len(self.rel_offsets)

    @property
    def is_full(self) -> bool:
        return len(self.rel_offsets) >= self.max_entries

    def append(self, rel_offset: int, position: int) -> None:
        self.rel_offsets.append(rel_offset)
        self.positions.append(position)
        self._write(_OFFSET_ENTRY.pack(rel_offset, position))

    def lookup(self, rel_offset: int) -> int:
        """Position of the last indexed batch at or before `rel_offset` (0 when none)."""
        i = bisect.bisect_right(self.rel_offsets, rel_offset) - 1
        return self.positions[i] if i >= 0 else 0

    def lookup_by_position(self, position: int) -> int:
        """The largest indexed batch position <= `position` (0 when none)."""
        i = bisect.bisect_right(self.positions, position) - 1
        return self.positions[i] if i >= 0 else 0

    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def reset(self) -> None:
        del self.rel_offsets[:]
        del self.positions[:]
        self._truncate_file(0)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or beyond `position` (the log is cut there)."""
        keep = bisect.bisect_left(self.positions, position)
        if keep == len(self.positions) and self.path.exists():
            return
        del self.rel_offsets[keep:]
        del self.positions[keep:]
        self._truncate_file(keep)

    def load(self, segment_bytes: int, max_rel_offset: int) -> None:
        """Read and sanity-check the file; raises CorruptIndex."""
        data = self._read_file()
        if len(data) % self.entry_size:
            raise CorruptIndex(
                f"{self.path}: size {len(data)} is not a multiple of {self.entry_size}"
            )
        flat = array("i")
        flat.frombytes(data)
        if _LITTLE_ENDIAN_HOST:
            flat.byteswap()
        rel, pos = flat[0::2], flat[1::2]
        if rel and (
            rel[0] < 0
            or pos[0] < 0
            or rel[-1] > max_rel_offset
            or pos[-1] >= segment_bytes
            or not all(map(operator.lt, rel, rel[1:]))
            or not all(map(operator.lt, pos, pos[1:]))
        ):
            raise CorruptIndex(f"{self.path}: entries out of order or out of range")
        self.rel_offsets = rel
        self.positions = pos


class TimeIndex(_IndexFile):
    entry_size = _TIME_ENTRY.size

    def __init__(self, path: Path, max_index_bytes: int) -> None:
        super().__init__(path, max_index_bytes)
        self.timestamps = array("q")
        self.rel_offsets = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def is_full(self) -> bool:
        return len(self.timestamps) >= self.max_entries

    def last_entry(self) -> tuple[int, int] | None:
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.rel_offsets[-1]

    def maybe_append(self, timestamp: int, rel_offset: int, skip_full_check: bool = False) -> None:
        """Append when `timestamp` is past the last indexed one (timestamps only grow)."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        if not skip_full_check and self.is_full:
            return
        if self.rel_offsets and rel_offset < self.rel_offsets[-1]:
            return
        self.timestamps.append(timestamp)
        self.rel_offsets.append(rel_offset)
        self._write(_TIME_ENTRY.pack(timestamp, rel_offset))

    def lookup_below(self, timestamp: int) -> int | None:
        """Relative offset of the last entry with a timestamp < `timestamp`: every record up to
        that offset is older than `timestamp`. None when no entry qualifies."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.rel_offsets[i] if i >= 0 else None

    def reset(self) -> None:
        del self.timestamps[:]
        del self.rel_offsets[:]
        self._truncate_file(0)

    def truncate_to_rel_offset(self, rel_offset: int) -> None:
        """Drop entries for offsets >= `rel_offset`."""
        keep = bisect.bisect_left(self.rel_offsets, rel_offset)
        if keep == len(self.rel_offsets) and self.path.exists():
            return
        del self.timestamps[keep:]
        del self.rel_offsets[keep:]
        self._truncate_file(keep)

    def load(self, max_rel_offset: int) -> None:
        data = self._read_file()
        if len(data) % self.entry_size:
            raise CorruptIndex(
                f"{self.path}: size {len(data)} is not a multiple of {self.entry_size}"
            )
        entries = list(_TIME_ENTRY.iter_unpack(data))
        ts = array("q", [t for t, _ in entries])
        rel = array("i", [r for _, r in entries])
        if rel and (
            rel[0] < 0
            or rel[-1] > max_rel_offset
            or not all(map(operator.lt, ts, ts[1:]))
            or not all(map(operator.le, rel, rel[1:]))
        ):
            raise CorruptIndex(f"{self.path}: entries out of order or out of range")
        self.timestamps = ts
        self.rel_offsets = rel
