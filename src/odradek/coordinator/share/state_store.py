"""The share coordinator's state store (Kafka's ShareCoordinatorShard): the persisted state
of the share-partitions whose `__share_group_state` partition this node leads, and the five
operations the persister RPCs ask of it.

It is the runtime's CoordinatorShard for `__share_group_state`: a partition is replayed when
this node becomes its leader and forgotten when it resigns, so the state follows partition
leadership. Every operation is answered from memory and, for the writing ones, appended to
the partition before the caller answers (the request handler waits for the ISR through
CoordinatorRuntime.durably).

Fencing, as Kafka's: a read records the reader's leader epoch (the share-partition leader's
epoch of the topic-partition); a read or write with an older leader epoch than the one
recorded is FENCED_LEADER_EPOCH, so a deposed leader cannot overwrite its successor's state.
A write or initialize with an older state epoch than the stored one is FENCED_STATE_EPOCH:
an admin's InitializeShareGroupState (AlterShareGroupOffsets) bumps the state epoch, which
fences every leader still holding the window from before.

Writes carry state batches that are merged into the stored ones (`merge_batches`, Kafka's
PersisterStateBatchCombiner): the new batches win where they overlap and nothing below the
start offset is kept. odradek's share-partition leaders send their whole window, for which
the merge is a replacement; a delta from another writer merges the same way.

Every method is sans-I/O apart from `runtime.append` (a page-cache append) and blocking
replay; the answers are plain values, so each rule is a unit test.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.coordinator.offsets_topic import partition_for
from odradek.coordinator.share.partition import DONE, RecordState, StateBatch
from odradek.coordinator.share.state_log import (
    TOPIC,
    ShareKey,
    ShareSnapshot,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.records import decode_records

log = logging.getLogger(__name__)
E = ErrorCode

# what a read of a share-partition with no state answers (Kafka's PartitionFactory defaults):
# the share-partition leader then starts it where share.auto.offset.reset says
UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0


@dataclass(frozen=True, slots=True)
class Answer:
    """One partition's answer of a persister operation."""

    error: ErrorCode = E.none
    message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED_START_OFFSET
    batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1


def merge_batches(stored: Iterable[StateBatch], new: Iterable[StateBatch],
                  start_offset: int) -> tuple[StateBatch, ...]:
    """Stored batches overwritten by `new` where they overlap, cut below `start_offset`,
    in offset order, with touching runs of one state and count joined. `new` must not
    overlap itself (the write checks it: `overlapping`)."""
    fresh = sorted(new, key=lambda b: b.first_offset)
    firsts = [b.first_offset for b in fresh]
    pieces: list[StateBatch] = list(fresh)
    for b in stored:
        # the parts of b no new batch covers (offsets are never expanded one by one: a
        # batch may span millions)
        lo = b.first_offset
        i = max(0, bisect.bisect_right(firsts, b.first_offset) - 1)
        while lo <= b.last_offset:
            while i < len(fresh) and fresh[i].last_offset < lo:
                i += 1
            if i == len(fresh) or fresh[i].first_offset > b.last_offset:
                pieces.append(StateBatch(lo, b.last_offset, b.state, b.delivery_count))
                break
            if fresh[i].first_offset > lo:
                pieces.append(StateBatch(lo, fresh[i].first_offset - 1, b.state,
                                         b.delivery_count))
            lo = fresh[i].last_offset + 1
    out: list[StateBatch] = []
    for p in sorted(pieces, key=lambda b: b.first_offset):
        if p.last_offset < start_offset:
            continue
        if p.first_offset < start_offset:
            p = StateBatch(start_offset, p.last_offset, p.state, p.delivery_count)
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == p.first_offset
                and prev.state == p.state and prev.delivery_count == p.delivery_count):
            out[-1] = StateBatch(prev.first_offset, p.last_offset, p.state, p.delivery_count)
        else:
            out.append(p)
    return tuple(out)


def overlapping(batches: Iterable[StateBatch]) -> bool:
    ordered = sorted(batches, key=lambda b: b.first_offset)
    return any(a.last_offset >= b.first_offset for a, b in itertools.pairwise(ordered))


def _done_count(batches: Iterable[StateBatch]) -> int:
    return sum(b.last_offset - b.first_offset + 1 for b in batches if b.state in DONE)


class ShareStateStore:
    """`runtime`: the CoordinatorRuntime; `partition_exists(topic_id, partition)`: whether
    the metadata image has the topic-partition (UNKNOWN_TOPIC_OR_PARTITION otherwise)."""

    def __init__(self, runtime: object,
                 partition_exists: Callable[[uuid.UUID, int], bool]) -> None:
        self.runtime = runtime
        self.partition_exists = partition_exists
        self.num_partitions = 0  # of __share_group_state; 0 until registered
        self.snapshots: dict[ShareKey, ShareSnapshot] = {}
        # the latest leader epoch a share-partition leader read or wrote with, in memory as
        # Kafka keeps it (a new coordinator starts from the one in the snapshot)
        self.leader_epochs: dict[ShareKey, int] = {}

    # ------------------------------------------------------------------ CoordinatorShard

    def register(self, num_partitions: int) -> None:
        self.runtime.register(TOPIC, num_partitions, self)  # type: ignore[attr-defined]
        self.num_partitions = num_partitions

    def replay_partition(self, partition: int) -> int:
        count = 0
        for header, batch in self.runtime.replay(TOPIC, partition):  # type: ignore[attr-defined]
            if header.attributes & 0x20:  # control batch
                continue
            for rec in decode_records(header, batch):
                if rec.key is None:
                    continue
                try:
                    key = decode_key(rec.key)
                    if rec.value is None:
                        self.snapshots.pop(key, None)
                        self.leader_epochs.pop(key, None)
                    else:
                        snap = self.snapshots[key] = decode_value(rec.value)
                        self.leader_epochs[key] = snap.leader_epoch
                except ProtocolError as e:
                    log.warning("skipping a bad record of %s-%d: %s", TOPIC, partition, e)
                    continue
                count += 1
        return count

    def unload_partition(self, partition: int) -> None:
        for d in (self.snapshots, self.leader_epochs):
            for key in [k for k in d if self.state_partition(k) == partition]:
                del d[key]  # type: ignore[attr-defined]

    def partition_loaded(self, partition: int) -> None:
        pass

    # ------------------------------------------------------------------ ownership

    def state_partition(self, key: ShareKey) -> int:
        """The `__share_group_state` partition of a key (Kafka's partitionFor on
        "group:topicId:partition", the FindCoordinator share key)."""
        return partition_for(key.coordinator_key(), self.num_partitions)

    def owns(self, key: ShareKey) -> ErrorCode:
        """NONE when this node serves the key; NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS as Kafka's runtime answers; COORDINATOR_NOT_AVAILABLE
        before the topic is known here."""
        if not self.num_partitions:
            return E.coordinator_not_available
        return ErrorCode(self.runtime.error_for(  # type: ignore[attr-defined]
            TOPIC, self.state_partition(key)))

    def _check(self, key: ShareKey) -> Answer | None:
        if not key.group_id:
            return Answer(E.invalid_request, "Group id must be set.")
        if key.partition < 0:
            return Answer(E.invalid_request, "Partition id must not be negative.")
        code = self.owns(key)
        if code != E.none:
            return Answer(code)
        if not self.partition_exists(key.topic_id, key.partition):
            return Answer(E.unknown_topic_or_partition,
                          "This server does not host this topic-partition.")
        return None

    # ------------------------------------------------------------------ operations

    def read(self, key: ShareKey, leader_epoch: int) -> Answer:
        """ReadShareGroupState: the state, and the reader's leader epoch recorded."""
        bad = self._check(key)
        if bad is not None:
            return bad
        if self.leader_epochs.get(key, -1) > leader_epoch:
            return Answer(E.fenced_leader_epoch, "The leader epoch in the request is older "
                                                 "than the one recorded.")
        snap = self.snapshots.get(key)
        if snap is None:
            return Answer()
        self.leader_epochs[key] = leader_epoch
        return Answer(state_epoch=snap.state_epoch, leader_epoch=leader_epoch,
                      start_offset=snap.start_offset, batches=snap.batches)

    def summary(self, key: ShareKey, leader_epoch: int) -> Answer:
        """ReadShareGroupStateSummary: the start offset and epochs, no batches (an admin's
        view: it neither fences nor records the epoch)."""
        bad = self._check(key)
        if bad is not None:
            return bad
        snap = self.snapshots.get(key)
        if snap is None:
            return Answer()
        return Answer(state_epoch=snap.state_epoch,
                      leader_epoch=self.leader_epochs.get(key, snap.leader_epoch),
                      start_offset=snap.start_offset,
                      delivery_complete_count=_done_count(snap.batches))

    def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: Iterable[StateBatch]) -> Answer:
        """WriteShareGroupState: merge the batches in and append the new snapshot."""
        bad = self._check(key)
        if bad is not None:
            return bad
        if self.leader_epochs.get(key, -1) > leader_epoch:
            return Answer(E.fenced_leader_epoch, "The leader epoch in the request is older "
                                                 "than the one recorded.")
        old = self.snapshots.get(key)
        if old is not None and old.state_epoch > state_epoch:
            return Answer(E.fenced_state_epoch, "The state epoch in the request is older "
                                                "than the one stored.")
        new = list(batches)
        for b in new:
            if b.first_offset < 0 or b.last_offset < b.first_offset or b.delivery_count < 0 \
                    or b.state not in (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED,
                                       RecordState.ARCHIVED):
                return Answer(E.invalid_request, f"Bad state batch {b.first_offset}-"
                                                 f"{b.last_offset} state {int(b.state)}.")
        if overlapping(new):
            return Answer(E.invalid_request, "State batches must not overlap.")
        # -1 keeps the stored value, as Kafka's merge does
        start = start_offset if start_offset >= 0 else (old.start_offset if old else -1)
        if start < 0:
            return Answer(E.invalid_request, "The start offset of a new state must be set.")
        epoch = state_epoch if state_epoch >= 0 else (old.state_epoch if old else 0)
        merged = merge_batches(old.batches if old else (), new, start)
        snap = ShareSnapshot(epoch, start, merged, int(time.time() * 1000), leader_epoch)
        code = self._append(key, snap)
        if code == E.none:
            self.leader_epochs[key] = leader_epoch
        return Answer(code)

    def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Answer:
        """InitializeShareGroupState: a fresh state at `start_offset` with `state_epoch`
        (an admin moving the start offset bumps it, fencing the leaders' old windows)."""
        bad = self._check(key)
        if bad is not None:
            return bad
        old = self.snapshots.get(key)
        if old is not None and old.state_epoch > state_epoch:
            return Answer(E.fenced_state_epoch, "The state epoch in the request is older "
                                                "than the one stored.")
        if start_offset < 0:
            return Answer(E.invalid_request, "The start offset must not be negative.")
        return Answer(self._append(key, ShareSnapshot(state_epoch, start_offset, (),
                                                      int(time.time() * 1000))))

    def delete(self, key: ShareKey) -> Answer:
        """DeleteShareGroupState: a tombstone; the share-partition starts afresh."""
        bad = self._check(key)
        if bad is not None:
            return bad
        code = self._append(key, None)
        if code == E.none:
            self.leader_epochs.pop(key, None)
        return Answer(code)

    def _append(self, key: ShareKey, snap: ShareSnapshot | None) -> ErrorCode:
        value = None if snap is None else encode_value(snap)
        result = self.runtime.append(  # type: ignore[attr-defined]
            TOPIC, self.state_partition(key), [(encode_key(key), value)])
        if result.error != E.none:
            return ErrorCode(result.error)
        if snap is None:
            self.snapshots.pop(key, None)
        else:
            self.snapshots[key] = snap
        return E.none
