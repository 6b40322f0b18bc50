"""One log segment: `<base offset>.log` plus its sparse `.index` and `.timeindex`.

Batches are stored exactly as served. The offset index holds one entry per
`index.interval.bytes` of log written, as Kafka does: (last offset of the batch
- base offset, position of the batch). The time index gets an entry at the same
points when the segment's max timestamp has grown, and a final one when the
segment stops being active, so a closed segment's last time index entry is its
max timestamp.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

from odradek.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    CURRENT_MAGIC,
    H_BASE,
    H_EPOCH,
    H_LAST_DELTA,
    H_LENGTH,
    H_MAGIC,
    H_MAX_TS,
    LOG_OVERHEAD,
    batch_crc_ok,
)
from odradek.storage.config import LogConfig
from odradek.storage.file_pool import DEFAULT_POOL, PinnedFd, PooledFile
from odradek.storage.index import CorruptIndex, OffsetIndex, TimeIndex

# the segment's errors are importable from here, where they are raised
from odradek.storage.segment_errors import SegmentDamaged, SegmentTorn, SegmentWriteError

# The batch header and its field indexes are protocol.records' (one definition); HEADER and the
# H_* names stay importable from here for storage modules (log.py) that use them.
HEADER = BATCH_HEADER
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1

# Header scans start with a small read (an index lookup lands within index.interval.bytes of
# its target) and double it while the scan goes on.
_SCAN_FIRST_BLOCK = 8 * 1024
_SCAN_MAX_BLOCK = 1024 * 1024
# Recovery reads this much at a time (batches bigger than this are read whole).
_RECOVER_BLOCK = 8 * 1024 * 1024

Header = tuple  # a HEADER.unpack result; fields by the H_* indexes above

__all__ = ["Segment", "SegmentDamaged", "SegmentTorn", "SegmentWriteError", "log_file_name"]


def _now_ms() -> int:
    return int(time.time() * 1000)


def log_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class Segment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> None:
        self.base_offset = base_offset
        stem = f"{base_offset:020d}"
        self._log_path = directory / f"{stem}.log"
        # The .log goes through the file pool (storage/file_pool.py): an inactive segment holds
        # no fd. The segment taking appends pins its fd once, at its first append
        # (`_activate`), so the hot path reads a plain int and makes no extra syscall.
        self._file: PooledFile = DEFAULT_POOL.file(
            self._log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND
        )
        self._fd = -1
        self._active_pin: PinnedFd | None = None
        self._size_at_release_check = -1
        self.size = os.fstat(self._file.pinned_fd()).st_size
        self.offset_index = OffsetIndex(directory / f"{stem}.index", config.segment_index_bytes)
        self.time_index = TimeIndex(directory / f"{stem}.timeindex", config.segment_index_bytes)
        self.next_offset = base_offset
        # why load_clean refused the segment, for the recovery log line
        self.unclean_reason = ""
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        self.created_ms = now_ms
        self.bytes_since_last_index = 0
        self.index_interval = config.index_interval_bytes
        # Without compaction a segment's offsets are gapless from its base: recovery holds them
        # to that, which catches a damaged base offset (the CRC does not cover it). A log the
        # cleaner has ever rewritten keeps its gaps after a switch to `delete`: `Log.open`
        # (allow_gaps) turns this off for it.
        self.contiguous = "compact" not in config.cleanup_policy.split(",")
        self.roll_jitter_ms = (
            random.randrange(config.segment_jitter_ms) if config.segment_jitter_ms > 0 else 0
        )

    @property
    def log_path(self) -> Path:
        return self._log_path

    @log_path.setter
    def log_path(self, value: Path) -> None:
        self._log_path = value
        self._file.path = value  # a reopen after eviction finds the renamed file

    @property
    def fd(self) -> int:
        """The .log's fd, pinned in the pool for as long as the returned int lives: a
        FileRegion holding it keeps the file open until the response is sent, even if the
        segment rolls meanwhile and the pool evicts it (a lock and a dict move, no syscall
        while the file is open). -1 once closed."""
        pin = self._active_pin
        if pin is not None:
            # the active segment's own pin, shared: a holder keeps it alive past a roll
            return pin
        if self._file.closed:
            return -1
        return self._file.pinned_fd()

    def _activate(self) -> PinnedFd:
        pin = self._active_pin = self._file.pinned_fd()
        self._fd = int(pin)
        self._size_at_release_check = self.size
        # the pool bounds how many segments hold such a pin (issue 22: 20,000 partitions
        # written at once must not need 20,000 fds)
        self._file.pool.hold_writer(self, self._let_go)
        return pin

    def _let_go(self) -> None:
        """The pool takes the write pin back (too many writers): drop our reference only; an
        append in flight holds the pin in a local and keeps its fd until it returns."""
        self._fd = -1
        self._active_pin = None

    def release_if_idle(self) -> bool:
        """Hand the active fd back to the pool when nothing was appended since the last call
        (or since activation): an idle partition then costs no fd, and its next append takes
        the fd back from the pool (no syscall while the pool still holds it open). Call on the
        thread that appends (the event loop): an append in flight must keep its fd."""
        if self._fd < 0:
            return False
        if self.size != self._size_at_release_check:
            self._size_at_release_check = self.size
            return False
        self._fd = -1
        self._active_pin = None
        self._file.pool.forget_writer(self)
        self.offset_index.release()
        self.time_index.release()
        return True

    def __repr__(self) -> str:
        return f"Segment(base={self.base_offset}, next={self.next_offset}, size={self.size})"

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def update_config(self, config: LogConfig) -> None:
        self.index_interval = config.index_interval_bytes
        self.contiguous = self.contiguous and "compact" not in config.cleanup_policy.split(",")
        self.offset_index.max_entries = max(1, config.segment_index_bytes // OffsetIndex.entry_size)
        self.time_index.max_entries = max(1, config.segment_index_bytes // TimeIndex.entry_size)

    # ------------------------------------------------------------------ append

    def should_roll(
        self,
        batch_size: int,
        timestamp: int,
        last_offset: int,
        now_ms: int | None,
        config: LogConfig,
    ) -> bool:
        """`now_ms` None: the clock is read here, only when the age rule needs wall-clock time
        (a segment whose first batch has no timestamp)."""
        size = self.size
        if size == 0:
            return False
        if size + batch_size > config.segment_bytes:
            return True
        # is_full of both indexes, without two property calls per append
        oi, ti = self.offset_index, self.time_index
        if len(oi.rel_offsets) >= oi.max_entries or len(ti.timestamps) >= ti.max_entries:
            return True
        if last_offset - self.base_offset > INT32_MAX:
            return True
        # Kafka: the age of a segment is measured in record time from its first batch when
        # that batch has a timestamp, else in wall-clock time since the segment was created.
        first = self.first_batch_timestamp
        if first is not None and first >= 0:
            waited = timestamp - first
        else:
            waited = (_now_ms() if now_ms is None else now_ms) - self.created_ms
        return waited > config.segment_ms - self.roll_jitter_ms

    def append(
        self, prefix: bytes, batch: memoryview, size: int, last_offset: int, timestamp: int
    ) -> None:
        """Write [prefix, batch[16:]] at the end; `size` is the batch's total size. The batch
        lands whole or not at all: on any failure (a short write included) the file is cut back
        to where it ended and SegmentWriteError raised (SegmentTorn when even that fails)."""
        position = self.size
        # the pin object itself, not its number: it keeps the fd open for this call even if
        # the pool takes the segment's pin back meanwhile (see `_let_go`)
        fd = self._active_pin
        if fd is None:
            fd = self._activate()
        try:
            written = os.writev(fd, (prefix, batch[16:]))
        except OSError as exc:
            self._cut_back(position, exc)
        if written != size:
            # A regular file writes short only when the disk fills (or a signal lands): the
            # partial bytes must not stay, or the next batch would land after torn bytes.
            self._cut_back(
                position,
                OSError(errno.ENOSPC, f"short write: {written} of {size} bytes"),
            )
        # _index inlined (the produce hot path): only an index entry can fail
        if self.bytes_since_last_index > self.index_interval:
            try:
                self._index_entry(position, last_offset, timestamp)
            except OSError as exc:
                self._cut_back(position, exc)
        elif timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
            self.offset_of_max_timestamp = last_offset
        self.bytes_since_last_index += size
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = timestamp
        self.size = position + size
        self.next_offset = last_offset + 1

    def append_raw(self, batch: memoryview, size: int, last_offset: int, timestamp: int) -> None:
        """Write a batch unchanged (follower / already-assigned offsets)."""
        self.append(bytes(batch[:16]), batch, size, last_offset, timestamp)

    def _cut_back(self, position: int, exc: OSError) -> NoReturn:
        """Undo a failed append: the file ends at `position` again (the size, offsets and
        indexes were not moved yet)."""
        try:
            os.ftruncate(self.fd, position)
        except OSError as trunc_exc:
            raise SegmentTorn(self.log_path, position, exc, trunc_exc) from exc
        raise SegmentWriteError(self.log_path, position, exc) from exc

    def _index(self, position: int, size: int, last_offset: int, timestamp: int) -> None:
        if self.bytes_since_last_index > self.index_interval:
            self._index_entry(position, last_offset, timestamp)
        elif timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
            self.offset_of_max_timestamp = last_offset
        self.bytes_since_last_index += size

    def _index_entry(self, position: int, last_offset: int, timestamp: int) -> None:
        # Rare (once per index.interval.bytes): the one place an append writes index files.
        # The new max timestamp is kept only once both entries are written; a failure takes
        # back whatever entry made it, in memory and on disk.
        if timestamp > self.max_timestamp:
            max_ts, max_off = timestamp, last_offset
        else:
            max_ts, max_off = self.max_timestamp, self.offset_of_max_timestamp
        oi, ti = self.offset_index, self.time_index
        n_off, n_time = len(oi.rel_offsets), len(ti.timestamps)
        try:
            oi.append(last_offset - self.base_offset, position)
            ti.maybe_append(max_ts, max_off - self.base_offset)
        except OSError:
            for index, n, arrays in (
                (oi, n_off, (oi.rel_offsets, oi.positions)),
                (ti, n_time, (ti.timestamps, ti.rel_offsets)),
            ):
                for arr in arrays:
                    del arr[n:]
                index._truncate_file(n)
            raise
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
        self.bytes_since_last_index = 0

    def on_become_inactive(self) -> None:
        """The segment stops taking appends: write the final time index entry, release fds."""
        if self.max_timestamp >= 0:
            ti = self.time_index
            n = len(ti.timestamps)
            try:
                ti.maybe_append(
                    self.max_timestamp,
                    self.offset_of_max_timestamp - self.base_offset,
                    skip_full_check=True,
                )
            except OSError:
                # memory stays what the file holds; the caller reports the failure
                del ti.timestamps[n:]
                del ti.rel_offsets[n:]
                with contextlib.suppress(OSError):
                    ti._truncate_file(n)
                raise
        self.offset_index.close()
        self.time_index.close()
        # back to the pool: the fd may be evicted now (never while a reader holds it)
        self._fd = -1
        self._active_pin = None
        self._file.pool.forget_writer(self)

    # -------------------------------------------------------------------- read

    def headers(self, start: int, end: int | None = None) -> Iterator[tuple[int, Header]]:
        """(position, header) of each batch from `start` (a batch boundary) up to `end`."""
        end = self.size if end is None else end
        buf = b""
        buf_start = start
        pos = start
        fd = self.fd
        block = _SCAN_FIRST_BLOCK
        while pos + BATCH_HEADER_SIZE <= end:
            off = pos - buf_start
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(block, end - pos), pos)
                block = min(block * 2, _SCAN_MAX_BLOCK)
                buf_start = pos
                off = 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            h = HEADER.unpack_from(buf, off)
            size = h[H_LENGTH] + LOG_OVERHEAD
            if size < BATCH_HEADER_SIZE:
                return
            yield pos, h
            pos += size

    def find_batch(self, offset: int) -> tuple[int, Header] | None:
        """The batch containing `offset` or, failing that, the first one after it."""
        if offset >= self.next_offset:
            return None
        start = (
            self.offset_index.lookup(offset - self.base_offset) if offset > self.base_offset else 0
        )
        for pos, h in self.headers(start):
            if h[H_BASE] + h[H_LAST_DELTA] >= offset:
                return pos, h
        return None

    def scan_for_read(
        self, offset: int, max_offset: int, max_bytes: int
    ) -> tuple[int, int, Header] | None:
        """For Log.read: (position, end, header) of the batch containing `offset` (or the first
        after it), `end` being the end of the whole batches from there that lie below
        `max_offset` and within `max_bytes` (the position itself when not even the first one
        does); None when no batch of this segment reaches `offset`.

        What find_batch, find_batch(max_offset) and whole_batches_end answer together, with
        one read: the block read at the index entry usually holds the batch and, for a small
        fetch, where the read ends too (a consumer's fetch is mostly that). Past the block,
        the index finishes the job as those do."""
        if offset >= self.next_offset:
            return None
        start = (
            self.offset_index.lookup(offset - self.base_offset) if offset > self.base_offset else 0
        )
        size = self.size
        buf = os.pread(self.fd, min(_SCAN_FIRST_BLOCK, size - start), start)
        n = len(buf)
        unpack = HEADER.unpack_from
        off = 0
        while True:
            if off + BATCH_HEADER_SIZE > n:
                if start + off >= size:
                    return None
                hit = self.find_batch(offset)  # beyond the first block: the generic scan
                if hit is None:
                    return None
                pos, h = hit
                return pos, self._read_end(pos, pos, h, max_offset, pos + max_bytes), h
            h = unpack(buf, off)
            length = h[H_LENGTH] + LOG_OVERHEAD
            if length < BATCH_HEADER_SIZE:
                return None  # as headers() stops there
            if h[H_BASE] + h[H_LAST_DELTA] >= offset:
                break
            off += length
        first = start + off
        limit = first + max_bytes
        if limit > start + n:  # the read ends past this block: the index finds where
            return first, self._read_end(first, first, h, max_offset, limit), h
        end = first
        hh = h
        while hh[H_BASE] + hh[H_LAST_DELTA] < max_offset:
            nxt = end + length
            if nxt > limit:
                break
            end = nxt
            off += length
            if off + BATCH_HEADER_SIZE > n:
                break  # the limit lies within this block: no further batch fits
            hh = unpack(buf, off)
            length = hh[H_LENGTH] + LOG_OVERHEAD
            if length < BATCH_HEADER_SIZE:
                break
        return first, end, h

    def _read_end(self, first: int, pos: int, h: Header, max_offset: int, limit: int) -> int:
        # the end of a read from `first` as Log.read bounds it, the batch boundary `pos` on
        if h[H_BASE] + h[H_LAST_DELTA] >= max_offset:
            return first
        end = self.size
        if max_offset < self.next_offset:
            bound = self.find_batch(max_offset)
            if bound is not None:
                end = bound[0]
        if end > limit:
            end = self.whole_batches_end(pos, limit)
        return end

    def whole_batches_end(self, start: int, limit: int) -> int:
        """The largest batch boundary <= `limit`, scanning from the batch boundary `start`."""
        if limit >= self.size:
            return self.size
        pos = max(start, self.offset_index.lookup_by_position(limit))
        for p, h in self.headers(pos):
            nxt = p + h[H_LENGTH] + LOG_OVERHEAD
            if nxt > limit:
                return p
            pos = nxt
        return pos

    def read_bytes(self, position: int, size: int) -> bytes:
        out = os.pread(self.fd, size, position)
        if len(out) == size:
            return out
        parts = [out]
        got = len(out)
        while got < size:
            chunk = os.pread(self.fd, size - got, position + got)
            if not chunk:
                raise OSError(f"{self.log_path}: short read at {position + got}")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    # ---------------------------------------------------------- load / recover

    def load_clean(self, check_crc: bool) -> bool:
        """Load and sanity-check the indexes of a segment believed intact, then find its end by
        scanning the batches after the last index entry. False when anything is off (the caller
        then recovers the segment)."""
        try:
            self.offset_index.load(self.size, INT32_MAX)
            self.time_index.load(INT32_MAX)
        except CorruptIndex as exc:
            self.unclean_reason = str(exc)
            return False
        start = self.offset_index.last_position()
        if self.size and start:
            # Cheap framing check of the first batch; the rest below `start` is trusted.
            if self.size < BATCH_HEADER_SIZE:
                return False
            h = HEADER.unpack_from(os.pread(self.fd, BATCH_HEADER_SIZE, 0))
            if (
                h[H_MAGIC] != CURRENT_MAGIC
                or h[H_BASE] < self.base_offset
                or (self.contiguous and h[H_BASE] != self.base_offset)
                or h[H_LENGTH] + LOG_OVERHEAD > self.size
            ):
                self.unclean_reason = f"{self.log_path}: first batch header is not valid"
                return False
        if len(self.offset_index):
            first = self.headers(start)
            hit = next(first, None)
            if hit is None:
                self.unclean_reason = f"{self.offset_index.path}: last entry points past the log"
                return False
            _, h = hit
            if h[H_BASE] + h[H_LAST_DELTA] - self.base_offset != self.offset_index.rel_offsets[-1]:
                self.unclean_reason = (
                    f"{self.offset_index.path}: last entry does not match the batch it points at"
                )
                return False
        last = self.time_index.last_entry()
        if last is not None:
            self.max_timestamp, rel = last
            self.offset_of_max_timestamp = self.base_offset + rel
        elif self.size > 0:
            # A segment with batches but no time index entry: rebuild rather than trust it.
            self.unclean_reason = f"{self.time_index.path}: no entry for a segment with batches"
            return False
        end, next_offset, ok = self._scan(start, check_crc, rebuild=False, on_epoch=None)
        if not ok or end != self.size:
            self.unclean_reason = (
                f"{self.log_path}: batch at byte {end} of {self.size} fails its checks"
            )
            return False
        if last is not None and last[1] + self.base_offset >= next_offset:
            self.unclean_reason = f"{self.time_index.path}: last entry points past the log"
            return False
        self.next_offset = max(next_offset, self.next_offset)
        self._load_first_timestamp()
        return True

    def recover(
        self, on_epoch: Callable[[int, int], None] | None, protect_below: int | None = None
    ) -> bool:
        """Rebuild the indexes by scanning every batch with CRC checks. A torn or corrupt batch
        and everything after it are cut off; returns True when something was cut.

        `protect_below`: offsets known to be durable (committed metadata). Damage that would
        cut the segment below it raises SegmentDamaged and leaves the file as it is."""
        if protect_below is not None:
            # check first, touch after: damage below the floor leaves every file as it was
            self.next_offset = self.base_offset
            end, next_offset, _ = self._scan(0, True, rebuild=False, on_epoch=None)
            if end != self.size and next_offset < protect_below:
                raise SegmentDamaged(self.log_path, end, next_offset, self.size)
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.bytes_since_last_index = 0
        self.next_offset = self.base_offset
        end, next_offset, _ = self._scan(0, True, rebuild=True, on_epoch=on_epoch)
        self.next_offset = next_offset
        truncated = end != self.size
        if truncated:
            os.ftruncate(self.fd, end)
            self.size = end
        self._load_first_timestamp()
        return truncated

    def _scan(
        self,
        start: int,
        check_crc: bool,
        rebuild: bool,
        on_epoch: Callable[[int, int], None] | None,
    ) -> tuple[int, int, bool]:
        """Walk batches from `start`; returns (end of the good prefix, next offset, clean)."""
        file_size = os.fstat(self.fd).st_size
        self.size = file_size
        pos = start
        next_offset = self.next_offset
        # The clean-load tail scan starts mid-segment, after an indexed batch it has not seen.
        expected = self.base_offset if start == 0 else -1
        contiguous = self.contiguous
        buf = b""
        buf_start = pos
        while pos < file_size:
            left = file_size - pos
            if left < BATCH_HEADER_SIZE:
                return pos, next_offset, False
            off = pos - buf_start
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, min(_RECOVER_BLOCK, left), pos)
                buf_start, off = pos, 0
            h = HEADER.unpack_from(buf, off)
            size = h[H_LENGTH] + LOG_OVERHEAD
            last = h[H_BASE] + h[H_LAST_DELTA]
            if (
                size < BATCH_HEADER_SIZE
                or size > left
                or h[H_MAGIC] != CURRENT_MAGIC
                or h[H_LAST_DELTA] < 0
                or h[H_BASE] < expected
                or (contiguous and expected >= 0 and h[H_BASE] != expected)
                or last - self.base_offset > INT32_MAX
            ):
                return pos, next_offset, False
            if check_crc:
                if off + size > len(buf):
                    buf = (
                        self.read_bytes(pos, size)
                        if size > _RECOVER_BLOCK
                        else os.pread(self.fd, min(_RECOVER_BLOCK, left), pos)
                    )
                    buf_start, off = pos, 0
                if not batch_crc_ok(memoryview(buf)[off : off + size]):
                    return pos, next_offset, False
            if rebuild:
                self._index(pos, size, last, h[H_MAX_TS])
            elif h[H_MAX_TS] > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h[H_MAX_TS], last
            if on_epoch is not None and h[H_EPOCH] >= 0:
                on_epoch(h[H_EPOCH], h[H_BASE])
            expected = last + 1
            next_offset = last + 1
            pos += size
        return pos, next_offset, True

    def _load_first_timestamp(self) -> None:
        if self.size >= BATCH_HEADER_SIZE:
            h = HEADER.unpack_from(os.pread(self.fd, BATCH_HEADER_SIZE, 0))
            self.first_batch_timestamp = h[H_MAX_TS]
        else:
            self.first_batch_timestamp = None

    # --------------------------------------------------------------- truncate

    def truncate_to(self, offset: int) -> None:
        """Cut the batch containing `offset` (or the first after it) and everything after."""
        hit = self.find_batch(offset)
        if hit is None:
            return
        pos, h = hit
        os.ftruncate(self.fd, pos)
        self.size = pos
        self.offset_index.truncate_to_position(pos)
        self.time_index.truncate_to_rel_offset(h[H_BASE] - self.base_offset)
        self._rescan_tail()

    def _rescan_tail(self) -> None:
        """Recompute next offset and max timestamp from the indexes and the unindexed tail."""
        last = self.time_index.last_entry()
        if last is not None:
            self.max_timestamp, rel = last
            self.offset_of_max_timestamp = self.base_offset + rel
        else:
            self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, -1
        start = self.offset_index.last_position()
        self.next_offset = self.base_offset
        if len(self.offset_index):
            self.next_offset = self.base_offset + self.offset_index.rel_offsets[-1] + 1
        for _, h in self.headers(start):
            last_off = h[H_BASE] + h[H_LAST_DELTA]
            self.next_offset = last_off + 1
            if h[H_MAX_TS] > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h[H_MAX_TS], last_off
        self.bytes_since_last_index = 0
        self._load_first_timestamp()

    # ------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        try:
            fd = self.fd
        except OSError as exc:  # closed by another thread between the check and the pin
            if exc.errno == errno.EBADF:
                return
            raise
        if fd < 0:  # closed meanwhile (deleted by another thread's truncation)
            return
        os.fsync(fd)
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self._fd = -1
        self._active_pin = None
        self._file.pool.forget_writer(self)
        self._file.close()  # a reader still holding the fd closes it when done

    def rename_to_deleted(self) -> None:
        """Kafka's first step of deleting a segment: its files get the `.deleted` suffix (the fd
        stays valid); `delete_files` removes them later, a restart removes any left over."""
        for holder, attr in ((self, "log_path"), (self.offset_index, "path"),
                             (self.time_index, "path")):
            path: Path = getattr(holder, attr)
            if path.name.endswith(".deleted"):
                continue
            target = path.with_name(path.name + ".deleted")
            try:
                os.replace(path, target)
            except FileNotFoundError:
                pass
            setattr(holder, attr, target)

    def delete_files(self) -> None:
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
