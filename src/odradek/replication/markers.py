"""A transaction marker appended by the partition's leader (Kafka's ReplicaManager append of
a WriteTxnMarkers request, origin Coordinator).

The transaction coordinator sends COMMIT/ABORT markers to each partition's leader; the leader
appends the control batch as it appends a client batch with acks=-1 (min.insync.replicas is
enforced before anything is written), updates the producer state (the open transaction ends,
the LSO moves, an abort goes to the .txnindex) and answers once the ISR has it. A marker from
a coordinator older than the last one that wrote a marker for the producer here is refused
TRANSACTION_COORDINATOR_FENCED, and one with a producer epoch older than the partition's
INVALID_PRODUCER_EPOCH (Kafka's ProducerAppendInfo.appendEndTxnMarker checks), so a zombie
coordinator cannot end a transaction its successor decides.

Both the WriteTxnMarkers handler and the coordinator, for the partitions it leads itself,
append through `append_marker`: one path.
"""

from __future__ import annotations

import time
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchHeader, ControlRecordType, build_control_batch

__all__ = ["MarkerAppend", "append_marker"]

E = ErrorCode


class MarkerAppend:
    """What one marker append gave: its error, and where it lies when it was written (the
    acks=all wait needs the partition, the offset the HW must pass and the leader epoch)."""

    __slots__ = ("error", "leader_epoch", "message", "partition", "required_offset")

    def __init__(self, error: ErrorCode, partition: Any = None, required_offset: int = -1,
                 message: str = "") -> None:
        self.error = error
        self.partition = partition
        self.required_offset = required_offset
        self.leader_epoch = -1 if partition is None else int(partition.leader_epoch)
        self.message = message

    @property
    def replicated(self) -> bool:
        """The HW already passed the marker (a partition whose ISR is this node alone)."""
        return (self.error == E.none and self.partition is not None
                and self.partition.high_watermark >= self.required_offset)


def append_marker(rm: Any, topic: str, partition: int, producer_id: int, producer_epoch: int,
                  coordinator_epoch: int, commit: bool) -> MarkerAppend:
    """Append one COMMIT (commit) or ABORT marker to a partition this node leads."""
    part = rm.get(topic, partition)
    if part is None:
        return MarkerAppend(E.unknown_topic_or_partition,
                            message=f"{topic}-{partition} is not hosted here")
    if not part.is_leader:
        return MarkerAppend(E.not_leader_or_follower,
                            message=f"{topic}-{partition} is led by {part.leader}")
    state = part.log.producer_state
    entry = state.producers.get(producer_id)
    if entry is not None:
        if coordinator_epoch < entry.coordinator_epoch:
            return MarkerAppend(E.transaction_coordinator_fenced,
                                message=f"coordinator epoch {coordinator_epoch} is older than "
                                        f"{entry.coordinator_epoch}")
        if producer_epoch < entry.epoch:
            return MarkerAppend(E.invalid_producer_epoch,
                                message=f"producer {producer_id} epoch {producer_epoch} is older "
                                        f"than {entry.epoch}")
    try:
        part.check_acks(-1)  # markers go with required acks -1: below min ISR, nothing lands
        ctype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        raw = build_control_batch(ctype, producer_id=producer_id, producer_epoch=producer_epoch,
                                  coordinator_epoch=coordinator_epoch,
                                  timestamp=int(time.time() * 1000))
        view = memoryview(raw)
        info = part.append(view, BatchHeader.parse(view), None)
    except KafkaError as exc:
        return MarkerAppend(exc.code, message=exc.message)
    except OSError as exc:  # the log directory failed: the coordinator retries elsewhere/later
        return MarkerAppend(E.kafka_storage_error, message=str(exc))
    return MarkerAppend(E.none, part, int(info.last_offset) + 1)
