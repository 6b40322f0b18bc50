"""`__transaction_state` records as Kafka 3.9 writes them (TransactionLogKey v0,
TransactionLogValue v0), and the transaction states with their Kafka numbers."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from odradek.coordinator.offsets_topic import partition_for as _partition_for
from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import Reader, Writer

TOPIC = "__transaction_state"


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """The name DescribeTransactions/ListTransactions use (Kafka's TransactionState)."""
        return "".join(w.capitalize() for w in self.name.split("_"))


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    # the last transaction was ended by an EndTxn v5+ (KIP-890 part 2), which bumped the
    # epoch: a retry of that EndTxn comes with the previous epoch. Not persisted (value v0
    # has no place for it): after a restart such a retry is answered PRODUCER_FENCED.
    ended_by_v2: bool = False


def partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's `abs(transactionalId.hashCode) % transaction.state.log.num.partitions`."""
    return _partition_for(transactional_id, partitions)


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.write_int16(0)
    w.write_string(transactional_id)
    return w.getvalue()


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key version this log does not hold."""
    r = Reader(data)
    if r.int16() != 0:
        return None
    s = r.string()
    if s is None:
        raise ProtocolError("null transactional id")
    return s


def encode_value(m: TxnMetadata) -> bytes:
    w = Writer()
    w.write_int16(0)
    w.write_int64(m.producer_id)
    w.write_int16(m.producer_epoch)
    w.write_int32(m.timeout_ms)
    w.write_int8(int(m.state))
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    w.write_int32(len(by_topic))
    for t, ps in by_topic.items():
        w.write_string(t)
        w.write_int32(len(ps))
        for p in ps:
            w.write_int32(p)
    w.write_int64(m.last_update_ms)
    w.write_int64(m.start_ms)
    return w.getvalue()


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    try:
        r = Reader(data)
        version = r.int16()
        if version not in (0, 1):
            raise ProtocolError(f"transaction log value version {version}")
        if version == 1:
            return _decode_v1(transactional_id, r)
        pid, epoch, timeout, state = r.int64(), r.int16(), r.int32(), r.int8()
        partitions: set[tuple[str, int]] = set()
        n = r.int32()
        for _ in range(max(n, 0)):
            topic = r.string() or ""
            for _ in range(max(r.int32(), 0)):
                partitions.add((topic, r.int32()))
        return TxnMetadata(transactional_id, pid, epoch, timeout, TxnState(state), partitions,
                           r.int64(), r.int64())
    except (struct.error, ValueError) as exc:
        raise ProtocolError(f"bad transaction log value: {exc}") from exc


def _decode_v1(transactional_id: str, r: Reader) -> TxnMetadata:
    # flexible (Kafka 4.0 adds tagged fields); read what v0 holds
    pid, epoch, timeout, state = r.int64(), r.int16(), r.int32(), r.int8()
    partitions: set[tuple[str, int]] = set()
    n = r.compact_array_len()
    for _ in range(max(n or 0, 0)):
        topic = r.compact_string() or ""
        for _ in range(max(r.compact_array_len() or 0, 0)):
            partitions.add((topic, r.int32()))
        r.tagged_fields()
    last, start = r.int64(), r.int64()
    return TxnMetadata(transactional_id, pid, epoch, timeout, TxnState(state), partitions,
                       last, start)
