"""The records of `__share_group_state`: one snapshot of a share-partition's state per key.

The key names the share-partition (group id, topic id, partition), as Kafka's ShareSnapshot
key does; the value is its start offset and its state batches (first offset, last offset,
delivery state, delivery count). The topic is compacted, so the latest snapshot of each
share-partition is what a coordinator reads back; a tombstone (no value) deletes the state
(DeleteShareGroupState). The layout follows Kafka's ShareSnapshot record (key version 0,
value version 0) in classic fixed-width encoding; only odradek reads it back.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass

from odradek.coordinator.share.partition import RecordState, StateBatch
from odradek.protocol.errors import ProtocolError

TOPIC = "__share_group_state"
SNAPSHOT_KEY_VERSION = 0
SNAPSHOT_VALUE_VERSION = 0

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hiiiqqqi")  # version, snapshot/state/leader epochs, start, ts x2, n
_BATCH = struct.Struct(">qqbh")
_STATES = {int(s) for s in RecordState} - {int(RecordState.ACQUIRED)}


@dataclass(frozen=True, slots=True)
class ShareKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """FindCoordinator's key for the share coordinator (key type 2), as Kafka's
        SharePartitionKey writes it (the topic id in Kafka's Uuid form: url-safe base64
        without padding), so the key hashes to Kafka's `__share_group_state` partition."""
        tid = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        return f"{self.group_id}:{tid}:{self.partition}"


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    write_timestamp: int = 0
    # the share-partition leader's epoch that wrote it (-1: an admin's Initialize)
    leader_epoch: int = -1


def encode_key(key: ShareKey) -> bytes:
    gid = key.group_id.encode()
    return (_H.pack(SNAPSHOT_KEY_VERSION) + _H.pack(len(gid)) + gid + key.topic_id.bytes
            + _I.pack(key.partition))


def decode_key(buf: bytes) -> ShareKey:
    try:
        (version,) = _H.unpack_from(buf, 0)
        if version != SNAPSHOT_KEY_VERSION:
            raise ProtocolError(f"unknown share state key version {version}")
        (n,) = _H.unpack_from(buf, 2)
        if n < 0 or 4 + n + 16 + 4 != len(buf):
            raise ProtocolError("bad share state key length")
        gid = bytes(buf[4:4 + n]).decode()
        tid = uuid.UUID(bytes=bytes(buf[4 + n:20 + n]))
        (partition,) = _I.unpack_from(buf, 20 + n)
    except (struct.error, UnicodeDecodeError) as e:
        raise ProtocolError(f"bad share state key: {e}") from e
    return ShareKey(gid, tid, partition)


def encode_value(snap: ShareSnapshot) -> bytes:
    parts = [_VALUE_HEAD.pack(SNAPSHOT_VALUE_VERSION, 0, snap.state_epoch, snap.leader_epoch,
                              snap.start_offset, snap.write_timestamp, snap.write_timestamp,
                              len(snap.batches))]
    parts.extend(_BATCH.pack(b.first_offset, b.last_offset, int(b.state), b.delivery_count)
                 for b in snap.batches)
    return b"".join(parts)


def decode_value(buf: bytes) -> ShareSnapshot:
    try:
        version, _, state_epoch, leader_epoch, start, _, written, n = _VALUE_HEAD.unpack_from(
            buf, 0)
        if version != SNAPSHOT_VALUE_VERSION:
            raise ProtocolError(f"unknown share state value version {version}")
        if n < 0 or _VALUE_HEAD.size + n * _BATCH.size != len(buf):
            raise ProtocolError("bad share state value length")
        batches = []
        for i in range(n):
            first, last, state, count = _BATCH.unpack_from(buf, _VALUE_HEAD.size + i * _BATCH.size)
            if state not in _STATES or last < first or count < 0:
                raise ProtocolError(f"bad state batch {first}-{last} state {state}")
            batches.append(StateBatch(first, last, RecordState(state), count))
    except struct.error as e:
        raise ProtocolError(f"bad share state value: {e}") from e
    if start < 0:
        raise ProtocolError(f"bad share-partition start offset {start}")
    return ShareSnapshot(state_epoch, start, tuple(batches), written, leader_epoch)
