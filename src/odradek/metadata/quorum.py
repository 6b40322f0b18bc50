"""The metadata quorum: where metadata records are made durable and ordered.

`Quorum` is the interface the controller and the image loader use: append records (one batch,
all or nothing), know the committed offset and the leader epoch, replay what was committed,
hear every committed batch (commit listeners) and every change of leadership. The node's
quorum is `KRaftQuorum` (metadata/raft/kraft.py), one voter or many; `MetadataQuorum` here is
the synchronous single voter kept for tests that run without an event loop (same files).

Commit listeners get `fn(batch)`, `batch` a list of `(offset, record)`, for every committed
batch in offset order, exactly once each. When the node loads a snapshot (at start, or fetched
from the leader), each listener instead gets one `[(end_offset - 1, SnapshotLoaded(...))]`:
the snapshot's records are the whole image as of that offset (replace, do not apply on top),
and the batches after it follow.

What was committed is remembered apart from the log, in `__cluster_metadata-0/quorum-commit`
(see `CommitMarker`): after each fsync of the log its new end offset is written there and
fsynced too, before the records take effect. At start the log is recovered with that offset
as a floor: a torn tail past it (never committed, never seen by anyone) is cut with a log
line; damage below it stops the node (`MetadataLogDamaged`) rather than cutting committed
topics, producer-id blocks or configs away.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.metadata.records import MetadataRecord, decode_record, encode_record
from odradek.protocol.records import BatchHeader, Record, build_batch, decode_records, iter_batches
from odradek.storage.checkpoints import fsync_dir
from odradek.storage.config import LogConfig
from odradek.storage.log import Log, LogDamaged
from odradek.storage.log_dir_failure import channel_for

__all__ = [
    "COMMIT_MARKER",
    "METADATA_LOG_DIR",
    "CommitListener",
    "CommitMarker",
    "LeadershipListener",
    "MetadataLogDamaged",
    "MetadataQuorum",
    "Quorum",
    "QuorumDescription",
    "ReplicaDescription",
    "SnapshotLoaded",
]

log = logging.getLogger(__name__)

METADATA_LOG_DIR = "__cluster_metadata-0"
_READ_CHUNK = 1 << 20

# Called for each committed record, in order: apply(offset, record).
Apply = Callable[[int, MetadataRecord], None]


@dataclass(frozen=True, slots=True)
class SnapshotLoaded:
    """A commit-listener notice: the image is now `records` alone, as of `end_offset - 1`."""

    end_offset: int
    epoch: int
    records: tuple[MetadataRecord, ...]


# fn(batch): batch = [(offset, record)] of one committed batch, or [(offset, SnapshotLoaded)]
CommitListener = Callable[[list[tuple[int, "MetadataRecord | SnapshotLoaded"]]], None]
# fn(is_leader, epoch)
LeadershipListener = Callable[[bool, int], None]


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One voter or observer as DescribeQuorum shows it (timestamps in ms, -1 unknown)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    leader_id: int  # -1 when unknown
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]
    is_leader: bool  # only the leader knows the replicas' progress (Kafka answers elsewhere
    # with NOT_LEADER_OR_FOLLOWER)

COMMIT_MARKER = "quorum-commit"
# One slot: magic, version, sequence, committed end offset, leader epoch, CRC32 of the rest.
_SLOT = struct.Struct(">4shqqi")
_SLOT_MAGIC = b"OQCM"
_SLOT_BYTES = _SLOT.size + 4
# The two slots sit in different 512-byte sectors, so a torn write spoils at most one.
_SLOT_STRIDE = 512


class MetadataLogDamaged(Exception):
    """The metadata log is damaged below what was committed: the node must not start."""


class CommitMarker:
    """The committed end offset of the metadata log, durable apart from the log.

    Two slots written in turn (sequence number odd/even), each with a CRC: a crash while
    writing one leaves the other, one commit older, which is still a valid floor. Reading
    takes the valid slot with the higher sequence number. One pwrite + fdatasync per commit.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._seq = 0
        self.end_offset = 0
        self.epoch = -1

    @staticmethod
    def read(path: Path) -> tuple[int, int, int] | None:
        """(sequence, end offset, epoch) of the newest valid slot; None when the file is
        absent; raises MetadataLogDamaged when it exists but no slot is valid."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        best: tuple[int, int, int] | None = None
        for slot in range(2):
            raw = data[slot * _SLOT_STRIDE : slot * _SLOT_STRIDE + _SLOT_BYTES]
            if len(raw) < _SLOT_BYTES:
                continue
            body, crc = raw[: _SLOT.size], int.from_bytes(raw[_SLOT.size :], "big")
            if zlib.crc32(body) != crc:
                continue
            magic, version, seq, end, epoch = _SLOT.unpack(body)
            if magic != _SLOT_MAGIC or version != 0 or end < 0:
                continue
            if best is None or seq > best[0]:
                best = (seq, end, epoch)
        if best is None:
            raise MetadataLogDamaged(
                f"{path}: no valid slot in the metadata commit marker, so what was committed "
                f"is unknown. Run `odradek storage verify` on the data directory; to accept "
                f"the metadata log as it is, delete {path} and start again"
            )
        return best

    def load(self) -> bool:
        """Read the file; False when there is none (a new or pre-marker data directory)."""
        found = self.read(self.path)
        if found is None:
            return False
        self._seq, self.end_offset, self.epoch = found
        return True

    def write(self, end_offset: int, epoch: int) -> None:
        if self._fd < 0:
            created = not self.path.exists()
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if created:
                fsync_dir(self.path.parent)
        self._seq += 1
        body = _SLOT.pack(_SLOT_MAGIC, 0, self._seq, end_offset, epoch)
        slot = body + zlib.crc32(body).to_bytes(4, "big")
        try:
            os.pwrite(self._fd, slot, (self._seq % 2) * _SLOT_STRIDE)
            os.fdatasync(self._fd)
        except OSError as exc:
            # what is committed can no longer be made durable here: the directory holding
            # the metadata log goes offline like any failed fsync of a log (the node's
            # listener stops it, as Kafka halts on a failed metadata log directory)
            channel_for(self.path.parent.parent).mark_offline(
                f"writing the metadata commit marker {self.path} failed: {exc}")
            raise
        self.end_offset, self.epoch = end_offset, epoch

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Quorum(ABC):
    """What the controller needs from the metadata quorum."""

    @property
    @abstractmethod
    def leader_id(self) -> int | None:
        """The raft leader (the active controller); None when unknown."""

    @property
    @abstractmethod
    def is_leader(self) -> bool:
        """This node leads `leader_epoch` and its listeners have seen everything committed
        before the epoch began: it may append."""

    @property
    @abstractmethod
    def leader_epoch(self) -> int: ...

    @property
    @abstractmethod
    def commit_offset(self) -> int:
        """Offset of the last committed record, -1 when none."""

    @property
    @abstractmethod
    def end_offset(self) -> int:
        """The offset the next appended record gets."""

    @abstractmethod
    def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append records as one atomic batch; return the offset of the last once committed
        and every commit listener has been called for it. Blocking: call it from a worker
        thread, never the event loop. Not the leader, or leadership lost before the commit:
        KafkaError(NOT_CONTROLLER)."""

    @abstractmethod
    def replay(self, apply: Apply, from_offset: int = 0) -> int:
        """Feed every committed record from `from_offset` to `apply`; return the next offset.
        From below the latest snapshot, the snapshot's records come first (each reported at
        the snapshot's last offset), then the log after it."""

    @abstractmethod
    def add_commit_listener(self, fn: CommitListener) -> None:
        """fn hears every committed batch from the start (the snapshot first, if any)."""

    @abstractmethod
    def add_leadership_listener(self, fn: LeadershipListener) -> None: ...

    @abstractmethod
    def describe(self) -> QuorumDescription: ...

    @abstractmethod
    def close(self) -> None: ...


class MetadataQuorum(Quorum):
    """A single voter: this node is the leader and its log is the committed log."""

    def __init__(self, metadata_log: Log, node_id: int, marker: CommitMarker | None = None) -> None:
        self._log = metadata_log
        self._node_id = node_id
        latest = metadata_log.epochs.latest_epoch
        # every start is a new election won by the only voter
        self._epoch = (latest if latest is not None and latest >= 0 else 0) + 1
        self._lock = threading.RLock()
        self._listeners: list[CommitListener] = []
        self._marker = marker or CommitMarker(metadata_log.dir / COMMIT_MARKER)
        if self._marker.end_offset != metadata_log.log_end_offset:
            # a recovered tail past the marker was fsynced before the crash: it is committed
            self._marker.write(metadata_log.log_end_offset, self._epoch)

    @classmethod
    def open(cls, data_dir: Path, node_id: int) -> MetadataQuorum:
        """Recover the metadata log (fully, from offset 0: it is small) with the committed
        offset as a floor. Raises MetadataLogDamaged, naming the file, the offset and what to
        do, when the damage lies below what was committed."""
        path = Path(data_dir) / METADATA_LOG_DIR
        path.mkdir(parents=True, exist_ok=True)
        marker = CommitMarker(path / COMMIT_MARKER)
        has_marker = marker.load()
        floor = marker.end_offset if has_marker else None
        try:
            metadata_log = Log.open(path, LogConfig(), protect_below=floor)
        except LogDamaged as exc:
            raise MetadataLogDamaged(
                f"metadata log damaged below its committed offset {floor}: {exc}. Nothing was "
                f"cut and no partition was touched. Restore {path} from a backup (or another "
                f"controller); `odradek storage verify --data-dir {data_dir}` lists the damage; "
                f"to start anyway, losing the metadata from offset {exc.offset} on, delete "
                f"{marker.path} (the node then cuts the log there and keeps unknown partition "
                f"directories as -stray)"
            ) from exc
        if not has_marker and metadata_log.log_end_offset > 0:
            log.warning("%s: no commit marker (%s); taking the recovered log, %d records, "
                        "as committed", path, COMMIT_MARKER, metadata_log.log_end_offset)
        return cls(metadata_log, node_id, marker)

    @property
    def log(self) -> Log:
        return self._log

    @property
    def leader_id(self) -> int:
        return self._node_id

    @property
    def is_leader(self) -> bool:
        return True

    def add_commit_listener(self, fn: CommitListener) -> None:
        # synchronous: the history now, then each append's batch in the appending thread
        with self._lock:
            batch: list[tuple[int, MetadataRecord | SnapshotLoaded]] = []
            self.replay(lambda offset, record: batch.append((offset, record)))
            if batch:
                fn(batch)
            self._listeners.append(fn)

    def add_leadership_listener(self, fn: LeadershipListener) -> None:
        fn(True, self._epoch)

    def describe(self) -> QuorumDescription:
        end = self._log.log_end_offset
        me = ReplicaDescription(self._node_id, end)
        return QuorumDescription(self._node_id, self._epoch, end, (me,), (), True)

    @property
    def voters(self) -> list[int]:
        return [self._node_id]

    @property
    def leader_epoch(self) -> int:
        return self._epoch

    @property
    def commit_offset(self) -> int:
        return self._log.log_end_offset - 1

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    def append(self, records: Sequence[MetadataRecord]) -> int:
        if not records:
            raise ValueError("nothing to append")
        batch = build_batch(
            [Record(-1, -1, None, encode_record(r)) for r in records],
            partition_leader_epoch=self._epoch,
        )
        view = memoryview(batch)
        header = BatchHeader.parse(view)
        with self._lock:
            info = self._log.append(view, header, self._epoch)
            # committed = durable on the only voter, and known to be: the marker is the floor
            # that recovery never cuts below
            self._log.flush()
            self._marker.write(info.last_offset + 1, self._epoch)
            batch: list[tuple[int, MetadataRecord | SnapshotLoaded]] = [
                (info.first_offset + i, r) for i, r in enumerate(records)]
            for fn in self._listeners:
                fn(batch)
        return info.last_offset

    def replay(self, apply: Apply, from_offset: int = 0) -> int:
        offset = max(from_offset, self._log.log_start_offset)
        end = self._log.log_end_offset
        while offset < end:
            result = self._log.read(offset, _READ_CHUNK, end)
            if result.region is None:
                break
            data = self._log.read_bytes(result.region)
            progressed = False
            for header, view in iter_batches(data, strict=True):
                if header.is_control:
                    offset = header.last_offset + 1  # Raft control records carry no metadata
                    progressed = True
                    continue
                for rec in decode_records(header, view):
                    if rec.offset >= offset and rec.value is not None:
                        apply(rec.offset, decode_record(rec.value))
                offset = header.last_offset + 1
                progressed = True
            if not progressed:
                break
        return offset

    def close(self) -> None:
        with self._lock:
            self._log.flush()
            self._log.close()
            self._marker.close()
