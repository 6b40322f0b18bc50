"""The metadata quorum: where metadata records are made durable and ordered.

`Quorum` is the interface the controller and the image loader use: append records (one batch,
all or nothing), know the committed offset and the leader epoch, replay what was committed.
Today `MetadataQuorum` is a quorum of one voter whose log is a storage `Log` at
`<data-dir>/__cluster_metadata-0/`: an append is committed once it is fsynced. A KRaft
quorum (replicated log, elections, a high watermark set by the voters) implements the same
interface later.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.metadata.records import MetadataRecord, decode_record, encode_record
from odradek.protocol.records import BatchHeader, Record, build_batch, decode_records, iter_batches
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

__all__ = ["METADATA_LOG_DIR", "MetadataQuorum", "Quorum"]

log = logging.getLogger(__name__)

METADATA_LOG_DIR = "__cluster_metadata-0"
_READ_CHUNK = 1 << 20

# Called for each committed record, in order: apply(offset, record).
Apply = Callable[[int, MetadataRecord], None]


class Quorum(ABC):
    """What the controller needs from the metadata quorum."""

    @property
    @abstractmethod
    def leader_id(self) -> int: ...

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
        """Append records as one atomic batch; return the offset of the last once committed."""

    @abstractmethod
    def replay(self, apply: Apply, from_offset: int = 0) -> int:
        """Feed every committed record from `from_offset` to `apply`; return the next offset."""

    @abstractmethod
    def close(self) -> None: ...


class MetadataQuorum(Quorum):
    """A single voter: this node is the leader and its log is the committed log."""

    def __init__(self, metadata_log: Log, node_id: int) -> None:
        self._log = metadata_log
        self._node_id = node_id
        latest = metadata_log.epochs.latest_epoch
        # every start is a new election won by the only voter
        self._epoch = (latest if latest is not None and latest >= 0 else 0) + 1
        self._lock = threading.Lock()

    @classmethod
    def open(cls, data_dir: Path, node_id: int) -> MetadataQuorum:
        path = Path(data_dir) / METADATA_LOG_DIR
        # the metadata log is small: recover it fully (from offset 0) at every start
        metadata_log = Log.open(path, LogConfig())
        return cls(metadata_log, node_id)

    @property
    def log(self) -> Log:
        return self._log

    @property
    def leader_id(self) -> int:
        return self._node_id

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
            # committed = durable on the only voter
            self._log.flush()
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
