"""A partition's log: an ordered list of segments in `<data-dir>/<topic>-<partition>/`.

Append assigns offsets from the log end offset and writes each batch as
[patched 16-byte prefix, rest of the batch] with one `os.writev` (the batch is
never copied). Read returns a `FileRegion` of whole batches from one segment,
served as stored (sendfile). Nothing here decodes records. Split out: the directory layout
(log_dir.py); mixed into Log, the segment loading at open (log_load.py), the by-timestamp
lookups (time_lookup.py) and retention / record deletion (retention.py).
"""

from __future__ import annotations

import bisect
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.errors import ErrorCode, KafkaError, OffsetOutOfRange
from odradek.protocol.fetch import FileRegion
from odradek.protocol.records import BATCH_PREFIX, BatchHeader
from odradek.storage.checkpoints import fsync_dir
from odradek.storage.config import LogConfig
from odradek.storage.epochs import LeaderEpochCache
from odradek.storage.log_dir import (
    parse_future_dir_name,
    parse_log_dir_name,
    read_partition_metadata,
    write_partition_metadata,
)
from odradek.storage.log_dir_failure import channel_for
from odradek.storage.log_load import SegmentLoading
from odradek.storage.log_lock import locked
from odradek.storage.producer_state import ProducerStateManager, load_producer_state
from odradek.storage.recovery import (
    LogDamaged,
    index_last_batch,
)
from odradek.storage.retention import Retention
from odradek.storage.segment import H_BASE, H_LAST_DELTA, H_LENGTH, Segment, SegmentTorn
from odradek.storage.time_lookup import TimestampLookup

__all__ = ["AppendInfo", "Log", "LogDamaged", "LogReadResult"]


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    # a retried idempotent batch: the offsets it was given first, nothing appended
    duplicate: bool = False


class LogReadResult(NamedTuple):
    region: FileRegion | None
    first_batch_offset: int


# the produce hot path calls these bound C functions directly (one Python frame less each)
_pack_prefix = BATCH_PREFIX.pack  # protocol.records.encode_batch_prefix, inlined
_new_tuple = tuple.__new__


_NOTHING_READ = LogReadResult(None, -1)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Log(SegmentLoading, Retention, TimestampLookup):
    def __init__(self, directory: Path, config: LogConfig) -> None:
        self._dir = directory
        parsed = parse_log_dir_name(directory.name) or parse_future_dir_name(directory.name)
        self._topic, self._partition = parsed if parsed is not None else (directory.name, 0)
        self.config = config
        self._topic_id: uuid.UUID | None = None
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._log_start_offset = 0
        self._leo = 0
        self._recovery_point = 0
        self._last_flush_ms = _now_ms()
        self._dir_dirty = False
        # Deleted segments whose fds may still back a FileRegion in flight: closed later.
        self._retired: list[tuple[int, Segment]] = []
        self._closed = False
        self._abandoned = False
        # the lowest offset this log was cut back to since a replica move last asked
        # (`take_truncation`): its copy in another directory must be cut back as well
        self._cut_to: int | None = None
        self.epochs = LeaderEpochCache(None, lambda: self._leo)
        # idempotent/transactional producers of this partition (issue 6)
        self.producer_state = ProducerStateManager(directory)
        # Guards the segment list: the log cleaner's swap runs on its own thread.
        self.lock = threading.RLock()
        self._allow_gaps = False
        # what open() read of the `.log` files: CRC-scanned past the recovery point, walked
        # below it (index checks); both 0 after a clean shutdown but for those checks
        self.bytes_recovered_at_open = 0
        self.bytes_checked_at_open = 0
        # The health of the log directory (Kafka's LogDirFailureChannel), shared by its logs.
        self.dir_state = channel_for(directory.parent)
        # Internal topics (offsets, transactions) stay writable below the free-space floor:
        # they are small, and consumers must commit while space is being freed.
        self._internal = self._topic.startswith("__")

    # ------------------------------------------------------------------ open

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        topic_id: uuid.UUID | None = None,
        allow_gaps: bool = False,
        protect_below: int | None = None,
    ) -> Log:
        """`allow_gaps`: the log cleaner has rewritten this log (its checkpoint names it), so
        offsets may jump between batches even if the topic is no longer compacted.

        `protect_below`: every offset below it is known durable (the committed metadata log):
        recovery raises LogDamaged instead of cutting there, and a log that ends before it
        (files gone) raises too."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self = cls(directory, config)
        self._allow_gaps = allow_gaps
        self._load_topic_id(topic_id)
        self.epochs = LeaderEpochCache.load(directory, lambda: self._leo)
        self._load_segments(recovery_point, log_start_offset, protect_below)
        self.producer_state = load_producer_state(self)
        return self

    def _load_topic_id(self, topic_id: uuid.UUID | None) -> None:
        stored = read_partition_metadata(self._dir)
        if topic_id is not None and stored is not None and stored != topic_id:
            raise KafkaError(
                ErrorCode.inconsistent_topic_id,
                f"{self._dir} holds topic id {stored}, not {topic_id}",
            )
        self._topic_id = topic_id or stored
        if self._topic_id is not None and stored != self._topic_id:
            write_partition_metadata(self._dir, self._topic_id)

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        if self._topic_id == topic_id:
            return
        if self._topic_id is not None:
            raise KafkaError(
                ErrorCode.inconsistent_topic_id, f"{self._dir} has topic id {self._topic_id}"
            )
        self._topic_id = topic_id
        write_partition_metadata(self._dir, topic_id)

    # ------------------------------------------------------------ properties

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self._topic_id

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    @locked
    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self._segments:
            seg.update_config(config)

    # ---------------------------------------------------------------- append

    def append_as_leader(
        self,
        batch: memoryview,
        header: BatchHeader,
        leader_epoch: int,
        log_append_time_ms: int | None = None,
    ) -> AppendInfo:
        """`append` after the producer-state check (Kafka's analyzeAndValidateProducerState),
        under the lock that also covers recording the batch's producer state: a batch an
        idempotent producer retries gets back the offsets it was given first (`duplicate`,
        nothing appended); out of order or fenced raises the KafkaError its state says."""
        if header.producer_id < 0:
            return self.append(batch, header, leader_epoch, log_append_time_ms)
        with self.lock:
            first = self.producer_state.check(
                header.producer_id, header.producer_epoch, header.base_sequence,
                header.last_offset_delta, header.attributes,
            )
            if first is not None:
                last = first + header.last_offset_delta
                return AppendInfo(first, last, -1, last, -1, True)
            return self.append(batch, header, leader_epoch, log_append_time_ms)

    def append(
        self,
        batch: memoryview,
        header: BatchHeader,
        leader_epoch: int,
        log_append_time_ms: int | None = None,
    ) -> AppendInfo:
        """Append one batch as leader: offsets start at the log end offset, the base offset and
        partition leader epoch in the batch's first 16 bytes are patched on the way to disk.
        With LogAppendTime the caller has already set the batch's max timestamp (CRC included);
        `log_append_time_ms` is then the time indexed."""
        # The produce hot path: the lock is taken here rather than by @locked (one call frame
        # less per batch), and the clock is read only when a roll or flush rule needs it.
        size = header.batch_length + 12
        if len(batch) != size:
            raise KafkaError(
                ErrorCode.corrupt_message, f"batch is {len(batch)} bytes, header says {size}"
            )
        config = self.config
        if size > config.max_message_bytes:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes}",
            )
        if size > config.segment_bytes:
            raise KafkaError(
                ErrorCode.record_list_too_large,
                f"batch of {size} bytes exceeds segment.bytes={config.segment_bytes}",
            )
        ts = header.max_timestamp if log_append_time_ms is None else log_append_time_ms
        state = self.dir_state
        if state.refusing and (state.offline or not self._internal):
            raise state.refused(str(self._dir))
        with self.lock:
            if self._closed:
                raise self._closed_error()
            first = self._leo
            last = first + header.last_offset_delta
            seg = self._segments[-1]
            try:
                if seg.size and seg.should_roll(size, ts, last, None, config):
                    seg = self._roll(first, _now_ms())
                seg.append(_pack_prefix(first, header.batch_length, leader_epoch), batch, size,
                           last, ts)
            except OSError as exc:
                # the segment is as it was (or the directory is now offline)
                raise self._write_failed(seg, exc) from exc
            self._leo = last + 1
            if header.producer_id >= 0:
                self.producer_state.note_batch(batch, header, first, last, ts, seg.base_offset)
            if leader_epoch >= 0 and leader_epoch != self.epochs.latest_epoch:
                self.epochs.assign(leader_epoch, first)
            if config.flush_messages is not None or config.flush_ms is not None:
                self._maybe_flush(_now_ms())
        # tuple.__new__ straight: a NamedTuple's own __new__ is a Python frame per append
        return _new_tuple(AppendInfo, (
            first, last, ts, last, -1 if log_append_time_ms is None else log_append_time_ms,
            False))

    @locked
    def append_many(
        self,
        batches: Iterable[tuple[memoryview, BatchHeader]],
        leader_epoch: int | None = None,
        assign_offsets: bool = True,
    ) -> AppendInfo | None:
        """Append several batches. With `assign_offsets` they get offsets as in `append` (and
        `leader_epoch`); without, they are written as given (a follower copying its leader):
        their base offsets must not go below the log end offset."""
        first = last = max_ts = offset_of_max = -1
        for batch, header in batches:
            if assign_offsets:
                epoch = header.partition_leader_epoch if leader_epoch is None else leader_epoch
                info = self.append(batch, header, epoch)
                a_first, a_last, a_ts = info.first_offset, info.last_offset, info.max_timestamp
            else:
                a_first, a_last, a_ts = self._append_as_is(batch, header)
            if first < 0:
                first = a_first
            last = a_last
            if a_ts > max_ts:
                max_ts, offset_of_max = a_ts, a_last
        if first < 0:
            return None
        return AppendInfo(first, last, max_ts, offset_of_max, -1)

    def _append_as_is(self, batch: memoryview, header: BatchHeader) -> tuple[int, int, int]:
        size = header.batch_length + 12
        if len(batch) != size:
            raise KafkaError(
                ErrorCode.corrupt_message, f"batch is {len(batch)} bytes, header says {size}"
            )
        if self._closed:
            raise self._closed_error()
        first = header.base_offset
        if first < self._leo:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"append at offset {first} below the log end offset {self._leo}",
            )
        last = first + header.last_offset_delta
        now = _now_ms()
        state = self.dir_state
        if state.refusing and (state.offline or not self._internal):
            raise state.refused(str(self._dir))
        seg = self._segments[-1]
        try:
            if seg.size and seg.should_roll(size, header.max_timestamp, last, now, self.config):
                seg = self._roll(first, now)
            seg.append_raw(batch, size, last, header.max_timestamp)
        except OSError as exc:
            raise self._write_failed(seg, exc) from exc
        self._leo = last + 1
        if header.producer_id >= 0:
            self.producer_state.note_batch(batch, header, first, last, header.max_timestamp,
                                           seg.base_offset)
        if (
            header.partition_leader_epoch >= 0
            and header.partition_leader_epoch != self.epochs.latest_epoch
        ):
            self.epochs.assign(header.partition_leader_epoch, first)
        self._maybe_flush(now)
        return first, last, header.max_timestamp

    def _closed_error(self) -> KafkaError:
        # Kafka's KafkaStorageException for a closed log (retriable for the client): the
        # node is shutting down; the files are not touched and the directory stays online
        return KafkaError(ErrorCode.kafka_storage_error,
                          f"{self._dir.name}: the log is closed (the node is shutting down)")

    def _write_failed(self, seg: Segment, exc: OSError) -> KafkaError:
        return self.dir_state.write_failed(str(seg.log_path), exc, isinstance(exc, SegmentTorn))

    def _maybe_flush(self, now: int) -> None:
        cfg = self.config
        by_count = (
            cfg.flush_messages is not None
            and self._leo - self._recovery_point >= cfg.flush_messages
        )
        by_time = cfg.flush_ms is not None and now - self._last_flush_ms >= cfg.flush_ms
        if by_count or by_time:
            self.flush()

    @locked
    def roll(self) -> None:
        """Start a new segment at the log end offset (no-op when the active one is empty)."""
        if self._segments[-1].size:
            self._roll(self._leo, _now_ms())

    def _roll(self, base_offset: int, now: int) -> Segment:
        # Kafka's snapshot at roll: a restart after kill -9 scans producers from here, not
        # from the log's start; snapshots older than the first segment are of no more use.
        self.producer_state.take_snapshot(base_offset)
        self.producer_state.delete_snapshots_below(self._segments[0].base_offset)
        old = self._segments[-1]
        index_last_batch(old)
        old.on_become_inactive()
        seg = Segment(self._dir, base_offset, self.config, now)
        if seg.size:
            # A stale file at this base (cannot happen through this class): start it afresh.
            os.ftruncate(seg.fd, 0)
            seg.size = 0
        seg.offset_index.reset()
        seg.time_index.reset()
        self._segments.append(seg)
        self._bases.append(base_offset)
        self._dir_dirty = True
        return seg

    # ------------------------------------------------------------------ read

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> LogReadResult:
        """Whole batches from one segment, starting with the batch that contains `offset`,
        none whose last offset is >= `max_offset`, at most `max_bytes` unless the first batch
        alone is larger and `min_one_batch`."""
        # The fetch hot path: the lock is taken here rather than by @locked (one call frame
        # less per read), and the segment finds the batch and the read's end in one scan.
        with self.lock:
            if self.dir_state.offline:
                raise self.dir_state.refused(str(self._dir))
            leo = self._leo
            if offset < self._log_start_offset or offset > leo:
                raise OffsetOutOfRange(
                    f"offset {offset} outside [{self._log_start_offset}, {leo}] of "
                    f"{self._dir.name}"
                )
            if max_offset is None or max_offset > leo:
                max_offset = leo
            if offset >= max_offset:
                return _NOTHING_READ
            segments = self._segments
            i = bisect.bisect_right(self._bases, offset) - 1
            if i < 0:
                i = 0
            hit = None
            while i < len(segments):
                hit = segments[i].scan_for_read(offset, max_offset, max_bytes)
                if hit is not None:
                    break
                i += 1
            if hit is None:
                return _NOTHING_READ
            start, end, h = hit
            if h[H_BASE] + h[H_LAST_DELTA] >= max_offset:
                return _NOTHING_READ
            if end <= start:
                if not min_one_batch:
                    return _NOTHING_READ
                end = start + h[H_LENGTH] + 12
            # tuple.__new__ straight: NamedTuples' own __new__ is a Python frame each
            return _new_tuple(LogReadResult, (
                _new_tuple(FileRegion, (segments[i].fd, start, end - start)), h[H_BASE]))

    def read_bytes(self, region: FileRegion) -> bytes:
        """The bytes of a region (pread), for transports that cannot sendfile."""
        out = os.pread(region.fd, region.size, region.position)
        while len(out) < region.size:
            more = os.pread(region.fd, region.size - len(out), region.position + len(out))
            if not more:
                raise OSError(f"short read of {region} in {self._dir}")
            out += more
        return out

    # ------------------------------------------------------ truncate / delete

    @locked
    def truncate_to(self, offset: int) -> None:
        """Remove everything at or after `offset` (a follower diverged, or a leader epoch moved)."""
        if self._closed:
            raise self._closed_error()
        if offset >= self._leo:
            return
        self._note_cut(offset)
        if offset < self._log_start_offset:
            self._truncate_fully_and_start_at(offset)
            return
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._retire(self._segments.pop())
            self._bases.pop()
        seg = self._segments[-1]
        seg.truncate_to(offset)
        self._leo = seg.next_offset
        self._recovery_point = min(self._recovery_point, self._leo)
        self.epochs.truncate_from_end(self._leo)
        self.producer_state.truncate_snapshots(self._leo)
        self.producer_state = load_producer_state(self)

    @locked
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start empty at `offset` (a follower whose leader's log
        starts above this log's end)."""
        if self._closed:
            raise self._closed_error()
        self._truncate_fully_and_start_at(offset)

    def _note_cut(self, offset: int) -> None:
        self._cut_to = offset if self._cut_to is None else min(self._cut_to, offset)

    def take_truncation(self) -> int | None:
        """The lowest offset this log was truncated to since the last call (None: none)."""
        with self.lock:
            cut, self._cut_to = self._cut_to, None
            return cut

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self._note_cut(min(offset, self._leo))
        for seg in self._segments:
            self._retire(seg)
        seg = Segment(self._dir, offset, self.config, _now_ms())
        if seg.size:
            os.ftruncate(seg.fd, 0)
            seg.size = 0
        seg.offset_index.reset()
        seg.time_index.reset()
        self._segments = [seg]
        self._bases = [offset]
        self._leo = offset
        self._log_start_offset = offset
        self._recovery_point = offset
        self._dir_dirty = True
        self.epochs.clear()
        self.producer_state.truncate_snapshots(-1)
        self.producer_state.producers.clear()
        self.producer_state.ongoing.clear()
        self.producer_state.map_end_offset = offset

    @property
    def is_closed(self) -> bool:
        return self._closed or self._abandoned

    @locked
    def replace_segments(
        self, old: list[Segment], commit: Callable[[], None], open_new: Callable[[], Segment]
    ) -> bool:
        """The log cleaner's swap. `old` (consecutive, inactive segments of this log) give way
        to one cleaned segment: `commit` renames its `.cleaned` files to `.swap` (the commit
        point), the old segments are renamed `.deleted`, then `open_new` renames the `.swap`
        files into place and opens the segment. Readers never see a half-swapped list: they
        take the same lock. Returns False, changing nothing, when the log moved on meanwhile
        (closed, retention or truncation removed one of `old`, or one became active)."""
        if self.is_closed or not old:
            return False
        segments = self._segments
        try:
            i = next(n for n, s in enumerate(segments) if s is old[0])
        except StopIteration:
            return False
        if i + len(old) >= len(segments) or any(
            segments[i + k] is not seg for k, seg in enumerate(old)
        ):
            return False
        commit()
        for seg in old:
            self._retire(seg)
        new = open_new()
        self._segments = [*segments[:i], new, *segments[i + len(old) :]]
        self._bases = [s.base_offset for s in self._segments]
        self._dir_dirty = True
        return True

    # -------------------------------------------------------------- durability

    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding offsets below `up_to` (default: all) and move the
        recovery point there."""
        state = self.dir_state
        if state.offline:
            # Nothing written since the failure is trusted: the recovery point stays put and
            # the next start recovers from there.
            return
        target = self._leo if up_to is None else min(up_to, self._leo)
        what = str(self._dir)
        try:
            if target > self._recovery_point:
                # a consistent snapshot (the cleaner swaps lists); the fsyncs run outside the
                # lock
                with self.lock:
                    segments, bases = list(self._segments), list(self._bases)
                start = max(0, bisect.bisect_right(bases, self._recovery_point) - 1)
                for seg in segments[start:]:
                    if seg.base_offset >= target:
                        break
                    what = str(seg.log_path)
                    seg.flush()
                self._recovery_point = target
            if self._dir_dirty:
                what = str(self._dir)
                fsync_dir(self._dir)
                self._dir_dirty = False
        except OSError as exc:
            # Kafka: after a failed fsync the page cache cannot be trusted (the kernel may
            # have dropped the dirty pages), so the whole directory goes offline.
            raise state.fsync_failed(what, exc) from exc
        self._last_flush_ms = _now_ms()

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @locked
    def abandon(self) -> None:
        """Stop writing to this log (its files are being deleted). The segment fds stay open
        until `close()`, so FileRegions already handed out stay valid meanwhile."""
        self._abandoned = True
        for seg in self._segments:
            seg.offset_index.close()
            seg.time_index.close()

    @locked
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._abandoned and not self.dir_state.offline:
            index_last_batch(self._segments[-1])
            self._segments[-1].on_become_inactive()
            self.producer_state.take_snapshot(self._leo)
        for seg in self._segments:
            seg.close()
        self.close_retired(force=True)

    def delete(self) -> None:
        self.close()
        shutil.rmtree(self._dir, ignore_errors=True)
