"""Metadata snapshots (KIP-630): `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` files.

A snapshot holds the metadata image as of its end offset (everything below it), written as
Kafka writes one: record batches whose partition leader epoch is the snapshot's epoch and whose
offsets start at 0, opened by a SnapshotHeader control record and closed by a SnapshotFooter
control record, the metadata records in between. A snapshot is written whole to a `.part` file,
fsynced, renamed into place and the directory fsynced, so one either exists whole or not at all;
a snapshot being downloaded from the leader (FetchSnapshot) grows in its `.part` file the same
way and is checked (CRCs, header, footer) before the rename.

Plain files, no sockets, no asyncio: the quorum calls these from a thread.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from odradek.metadata.raft.control import encode_snapshot_footer, encode_snapshot_header
from odradek.metadata.raft.log import SnapshotId
from odradek.metadata.records import MetadataRecord, decode_record, encode_record
from odradek.protocol.errors import KafkaError, ProtocolError
from odradek.protocol.records import (
    ControlRecordType,
    Record,
    batch_crc_ok,
    build_batch,
    build_control_batch,
    decode_control_record,
    decode_records,
    iter_batches,
)
from odradek.storage.checkpoints import fsync_dir

__all__ = ["SNAPSHOT_SUFFIX", "SnapshotDamaged", "SnapshotStore", "snapshot_file_name"]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".checkpoint"
_PART = ".part"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
RECORDS_PER_BATCH = 1000  # Kafka caps a snapshot batch by bytes; records are small


class SnapshotDamaged(Exception):
    """A snapshot file fails its CRCs or lacks its header or footer."""


def snapshot_file_name(sid: SnapshotId) -> str:
    return f"{sid.end_offset:020d}-{sid.epoch:010d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(sid: SnapshotId, records: Sequence[MetadataRecord],
                    timestamp_ms: int = -1) -> bytes:
    """The bytes of a snapshot file."""
    parts = [build_control_batch(
        ControlRecordType.SNAPSHOT_HEADER, base_offset=0, partition_leader_epoch=sid.epoch,
        value=encode_snapshot_header(timestamp_ms), timestamp=timestamp_ms)]
    offset = 1
    for i in range(0, len(records), RECORDS_PER_BATCH):
        chunk = records[i : i + RECORDS_PER_BATCH]
        parts.append(build_batch(
            [Record(-1, timestamp_ms, None, encode_record(r)) for r in chunk],
            base_offset=offset, partition_leader_epoch=sid.epoch))
        offset += len(chunk)
    parts.append(build_control_batch(
        ControlRecordType.SNAPSHOT_FOOTER, base_offset=offset, partition_leader_epoch=sid.epoch,
        value=encode_snapshot_footer(), timestamp=timestamp_ms))
    return b"".join(parts)


def decode_snapshot(data: bytes | memoryview, where: str = "snapshot") -> list[MetadataRecord]:
    """The metadata records of a whole snapshot; SnapshotDamaged when it is not one."""
    out: list[MetadataRecord] = []
    header = footer = False
    end = 0
    try:
        for h, batch in iter_batches(data, strict=True):
            end += len(batch)
            if not batch_crc_ok(batch):
                raise SnapshotDamaged(f"{where}: batch at offset {h.base_offset} fails its CRC")
            if footer:
                raise SnapshotDamaged(f"{where}: batches after the footer")
            recs = decode_records(h, batch)
            if h.is_control:
                for rec in recs:
                    ctype = decode_control_record(rec).type
                    if ctype == ControlRecordType.SNAPSHOT_HEADER:
                        header = True
                    elif ctype == ControlRecordType.SNAPSHOT_FOOTER:
                        footer = True
                continue
            if not header:
                raise SnapshotDamaged(f"{where}: records before the snapshot header")
            out.extend(decode_record(r.value) for r in recs if r.value is not None)
    except (ProtocolError, KafkaError) as exc:  # bad framing, a cut batch, a bad record
        raise SnapshotDamaged(f"{where}: {exc}") from None
    if not (header and footer):
        raise SnapshotDamaged(f"{where}: no snapshot {'footer' if header else 'header'}")
    return out


class SnapshotStore:
    """The snapshots of one metadata log directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._download: tuple[SnapshotId, int] | None = None  # (id, bytes written)
        for stale in self.directory.glob(f"*{SNAPSHOT_SUFFIX}{_PART}"):
            stale.unlink()  # a write or download cut by a crash: never whole, never used

    def ids(self) -> list[SnapshotId]:
        found = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            match = _NAME.match(path.name)
            if match:
                found.append(SnapshotId(int(match.group(1)), int(match.group(2))))
        return sorted(found)

    def latest(self) -> SnapshotId | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def path(self, sid: SnapshotId) -> Path:
        return self.directory / snapshot_file_name(sid)

    def _publish(self, part: Path, sid: SnapshotId) -> None:
        os.replace(part, self.path(sid))
        fsync_dir(self.directory)

    def write(self, sid: SnapshotId, records: Sequence[MetadataRecord],
              timestamp_ms: int = -1) -> Path:
        part = self.path(sid).with_name(snapshot_file_name(sid) + _PART)
        data = encode_snapshot(sid, records, timestamp_ms)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        self._publish(part, sid)
        return self.path(sid)

    def load(self, sid: SnapshotId) -> list[MetadataRecord]:
        path = self.path(sid)
        return decode_snapshot(path.read_bytes(), str(path))

    def read_chunk(self, sid: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        try:
            fd = os.open(self.path(sid), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if position < 0 or position > size:
                return b"", size
            return os.pread(fd, max(0, min(max_bytes, size - position)), position), size
        finally:
            os.close(fd)

    def write_chunk(self, sid: SnapshotId, position: int, data: bytes, size: int) -> bool:
        """Append a downloaded chunk; True once the snapshot is whole, checked and in place.
        A chunk out of order restarts the download (the caller asks again from 0)."""
        part = self.path(sid).with_name(snapshot_file_name(sid) + _PART)
        if position == 0 or self._download is None or self._download[0] != sid:
            if position != 0:
                self._download = None
                return False
            part.unlink(missing_ok=True)
            self._download = (sid, 0)
        if self._download[1] != position:
            self._download = None
            return False
        with open(part, "ab") as f:
            f.write(data)
            if position + len(data) >= size:
                f.flush()
                os.fsync(f.fileno())
        written = position + len(data)
        self._download = (sid, written)
        if written < size:
            return False
        self._download = None
        try:
            decode_snapshot(part.read_bytes(), str(part))
        except SnapshotDamaged:
            part.unlink(missing_ok=True)
            raise
        self._publish(part, sid)
        return True

    def delete_before(self, sid: SnapshotId) -> int:
        """Remove snapshots older than `sid` (the latest one is all a node needs)."""
        gone = 0
        for old in self.ids():
            if old < sid:
                self.path(old).unlink(missing_ok=True)
                gone += 1
        return gone

