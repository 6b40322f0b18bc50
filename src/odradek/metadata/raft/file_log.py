"""`FileRaftLog`: the raft log on disk, Kafka's `__cluster_metadata-0`.

A storage `Log` holds the record batches (magic v2, the raft epoch as each batch's partition
leader epoch, the leader-epoch cache in `leader-epoch-checkpoint`); a leader's proposal is one
batch, so it commits or vanishes whole; a new leader opens its epoch with a LeaderChange control
batch. The snapshots of the log (`SnapshotStore`) sit in the same directory; after a snapshot the
log may start at its end offset. A follower appends the leader's batches unchanged (offsets,
epochs, CRCs), after checking their CRCs: the replicas are byte-identical.

Blocking (writes, fsync); the quorum calls it on its own schedule. Not thread-safe beyond what
`Log` guarantees: one driver calls it.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path
from typing import Any

from odradek.metadata.raft.log import SnapshotId
from odradek.metadata.snapshot import SnapshotDamaged, SnapshotStore
from odradek.protocol.records import (
    BatchHeader,
    ControlRecordType,
    Record,
    batch_crc_ok,
    build_batch,
    build_control_batch,
    iter_batches,
)
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

__all__ = ["FileRaftLog", "metadata_log_config"]

log = logging.getLogger(__name__)

READ_MAX_BYTES = 1 << 20  # per Fetch answer, as Kafka's raft fetch max bytes is 8 MiB: smaller


def metadata_log_config(segment_bytes: int = 1 << 30) -> LogConfig:
    """metadata.log.segment.bytes (Kafka's default 1 GiB); the rest of Kafka's topic defaults."""
    return LogConfig(segment_bytes=segment_bytes)


class FileRaftLog:
    def __init__(self, the_log: Log, snapshots: SnapshotStore) -> None:
        self.log = the_log
        self.snapshots = snapshots
        self._snapshot = snapshots.latest()

    @classmethod
    def open(cls, directory: Path, protect_below: int | None = None,
             config: LogConfig | None = None) -> FileRaftLog:
        """Recover the log from its latest snapshot on (only what the snapshot does not cover
        is CRC-scanned); below `protect_below` (what this node knows committed) damage raises
        LogDamaged instead of being cut."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        snapshots = SnapshotStore(directory)
        snap = snapshots.latest()
        start = snap.end_offset if snap is not None else 0
        the_log = Log.open(directory, config or metadata_log_config(), recovery_point=start,
                           log_start_offset=start, protect_below=protect_below)
        return cls(the_log, snapshots)

    # ---- the RaftLog protocol ------------------------------------------------------------

    def start_offset(self) -> int:
        return self.log.log_start_offset

    def end_offset(self) -> int:
        return self.log.log_end_offset

    def last_epoch(self) -> int:
        latest = self.log.epochs.latest_epoch
        if latest is not None and latest >= 0:
            return latest
        return self._snapshot.epoch if self._snapshot is not None else 0

    def _epochs(self) -> list[tuple[int, int]]:
        entries = self.log.epochs.entries
        snap = self._snapshot
        if snap is not None and (not entries or entries[0][1] > snap.end_offset or
                                 entries[0][0] > snap.epoch):
            # the snapshot's epoch ends where the log's first epoch starts
            entries = [(snap.epoch, -1), *entries]
        return entries

    def epoch_at(self, offset: int) -> int | None:
        if not self.start_offset() <= offset < self.end_offset():
            snap = self._snapshot
            return snap.epoch if snap is not None and offset == snap.end_offset - 1 else None
        entries = self._epochs()
        i = bisect_right([s for _, s in entries], offset) - 1
        return entries[i][0] if i >= 0 else None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= `epoch` that we hold (the snapshot's counts), and where it
        ends: the start of the next epoch, or the log end; (0, 0) when none."""
        entries = self._epochs()
        i = bisect_right(entries, (epoch, float("inf"))) - 1
        if i < 0:
            return (0, 0)
        found = entries[i][0]
        if i + 1 < len(entries):
            return (found, entries[i + 1][1])
        return (found, self.end_offset())

    def append_as_leader(self, epoch: int, payloads: list[bytes], control: bool = False) -> int:
        if control:
            [value] = payloads
            batch = build_control_batch(ControlRecordType.LEADER_CHANGE, value=value,
                                        partition_leader_epoch=epoch)
        else:
            batch = build_batch([Record(-1, -1, None, p) for p in payloads],
                                partition_leader_epoch=epoch)
        view = memoryview(batch)
        return self.log.append(view, BatchHeader.parse(view), epoch).last_offset

    def append_as_follower(self, records: Any) -> int:
        """Append the leader's batches if they start at our end: whole batches with good CRCs
        only (a batch cut by the leader's byte limit comes again in the next fetch)."""
        batches: list[tuple[memoryview, BatchHeader]] = []
        expected, epoch = self.end_offset(), self.last_epoch()
        for header, batch in iter_batches(memoryview(records)):
            # the CRC does not cover a batch's offset and epoch: check they follow ours
            if (not batch_crc_ok(batch) or header.base_offset != expected
                    or header.last_offset < header.base_offset
                    or header.partition_leader_epoch < epoch):
                if batches or header.base_offset == expected:
                    log.warning("%s: batch at offset %d from the leader is damaged or out of "
                                "order; not appended", self.log.dir, header.base_offset)
                break
            batches.append((batch, header))
            expected, epoch = header.last_offset + 1, header.partition_leader_epoch
        if not batches:
            return 0
        before = self.end_offset()
        self.log.append_many(batches, assign_offsets=False)
        return self.end_offset() - before

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def read(self, start: int, max_entries: int = 0) -> bytes:
        """Whole batches from `start` (up to READ_MAX_BYTES, at least one batch)."""
        if start >= self.end_offset():
            return b""
        result = self.log.read(start, READ_MAX_BYTES)
        if result.region is None:
            return b""
        return self.log.read_bytes(result.region)

    def flush(self) -> None:
        self.log.flush()

    # ---- snapshots ------------------------------------------------------------------------

    def latest_snapshot(self) -> SnapshotId | None:
        return self._snapshot

    def read_snapshot(self, sid: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        return self.snapshots.read_chunk(sid, position, max_bytes)

    def write_snapshot_chunk(self, sid: SnapshotId, position: int, data: bytes, size: int) -> bool:
        try:
            done = self.snapshots.write_chunk(sid, position, data, size)
        except SnapshotDamaged as exc:
            log.warning("snapshot %s from the leader is damaged (%s); fetching it again", sid, exc)
            return False
        if done:
            self.install_snapshot(sid)
        return done

    def install_snapshot(self, sid: SnapshotId) -> None:
        """The log now starts at the snapshot's end: what it held below is covered (or, past
        its end or of another history, thrown away: the snapshot is the committed truth)."""
        self._snapshot = sid
        if sid.end_offset <= self.end_offset() and self.epoch_at(sid.end_offset - 1) == sid.epoch:
            self.log.delete_records_before(sid.end_offset)
        else:
            with self.log.lock:
                self.log._truncate_fully_and_start_at(sid.end_offset)
        self.log.flush()
        log.info("%s: installed snapshot %s", self.log.dir, sid)

    def snapshot_taken(self, sid: SnapshotId) -> None:
        """A snapshot this node wrote of its own committed log: the log may start there."""
        self._snapshot = sid
        self.log.delete_records_before(sid.end_offset)
        self.snapshots.delete_before(sid)

    def close(self) -> None:
        self.log.flush()
        self.log.close()
