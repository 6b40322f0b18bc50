"""Offsets committed in a transaction (AddOffsetsToTxn, TxnOffsetCommit): the group
coordinator's checks, then the offsets written as a transactional batch to the group's
`__consumer_offsets` partition, where they wait for the transaction's marker. A mixin of
TransactionCoordinator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.coordinator.group.offset_manager import encode_offset_record
from odradek.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from odradek.coordinator.offsets_topic import partition_for as group_partition
from odradek.coordinator.transaction.state_log import TxnMetadata, TxnState
from odradek.coordinator.transaction.uncommitted import UncommittedWrites
from odradek.protocol.errors import ErrorCode

E = ErrorCode
S = TxnState


class TxnOffsetCommits:
    """Mixin of TransactionCoordinator: offsets in a transaction."""

    groups: Any  # the group coordinator (its public API only)
    txns: dict[str, TxnMetadata]
    uncommitted: UncommittedWrites
    add_partitions: Callable[..., dict[tuple[str, int], ErrorCode]]

    def add_offsets(self, tid: str, producer_id: int, epoch: int, group_id: str,
                    offsets_topic: str, offsets_partitions: int) -> ErrorCode:
        tp = (offsets_topic, group_partition(group_id, offsets_partitions))
        result = self.add_partitions(tid, producer_id, epoch, [tp])
        return result[tp]

    def commit_offsets(self, tid: str, producer_id: int, epoch: int, group_id: str,
                       offsets: dict[tuple[str, int], tuple[int, int, str]],
                       generation: int, member_id: str, instance_id: str | None,
                       offsets_partitions: int) -> ErrorCode:
        """A TxnOffsetCommit request up to v4: the group coordinator's checks first (its
        coordinator, then the member's generation when one is given, then the topics), then
        the write."""
        code = self._offsets_checks(group_id, offsets, generation, member_id, instance_id)
        if code == E.none:
            code = self._write_offsets(tid, producer_id, epoch, group_id, offsets,
                                       offsets_partitions)
        return code

    async def commit_offsets_v5(self, tid: str, producer_id: int, epoch: int, group_id: str,
                                offsets: dict[tuple[str, int], tuple[int, int, str]],
                                generation: int, member_id: str, instance_id: str | None,
                                offsets_partitions: int) -> ErrorCode:
        """TxnOffsetCommit v5+ (KIP-890 part 2): the checks, AddOffsetsToTxn's work, and the
        write once that addition is committed (the group's partition takes the offsets only
        then)."""
        code = self._offsets_checks(group_id, offsets, generation, member_id, instance_id)
        if code == E.none:
            code = self.add_offsets(tid, producer_id, epoch, group_id, OFFSETS_TOPIC,
                                    offsets_partitions)
        if code == E.none:
            code = await self.uncommitted.committed(tid)
        if code == E.none:
            code = self._write_offsets(tid, producer_id, epoch, group_id, offsets,
                                       offsets_partitions)
        return code

    def _offsets_checks(self, group_id: str, offsets: dict[tuple[str, int], Any],
                        generation: int, member_id: str, instance_id: str | None
                        ) -> ErrorCode:
        g = self.groups
        if g is None:
            return E.coordinator_not_available
        if (code := g.coordinator_error(group_id)) != E.none:
            return code  # type: ignore[no-any-return]  # NOT_COORDINATOR / LOAD_IN_PROGRESS
        if generation >= 0:
            code = g.validate_commit(group_id, generation, member_id, instance_id, False)
        if code == E.none and any(g.topics(t) is None for t, _ in offsets):
            code = E.unknown_topic_or_partition
        return code  # type: ignore[no-any-return]

    def _write_offsets(self, tid: str, producer_id: int, epoch: int, group_id: str,
                       offsets: dict[tuple[str, int], tuple[int, int, str]],
                       offsets_partitions: int) -> ErrorCode:
        return self.txn_offset_commit(tid, producer_id, epoch, group_id, offsets,
                                      OFFSETS_TOPIC, offsets_partitions, encode_offset_record)

    def txn_offset_commit(self, tid: str, producer_id: int, epoch: int, group_id: str,
                          offsets: dict[tuple[str, int], tuple[int, int, str]],
                          offsets_topic: str, offsets_partitions: int,
                          encode: Callable[[str, str, int, int, int, str, int], tuple[bytes, bytes]]
                          ) -> ErrorCode:
        """Write the offsets as a transactional batch to the group's `__consumer_offsets`
        partition; they become the group's committed offsets with the commit marker."""
        if self.groups is None:
            return E.coordinator_not_available
        if (cerr := self.groups.coordinator_error(group_id)) != E.none:
            return cerr  # the group's coordinator is elsewhere, or still loading
        m = self.txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if m.producer_epoch != epoch:
            return E.producer_fenced
        tp = (offsets_topic, group_partition(group_id, offsets_partitions))
        state, partitions = self.uncommitted.committed_view(m)
        if state != S.ONGOING or tp not in partitions:
            return E.invalid_txn_state
        return self.groups.append_txn_offsets(group_id, producer_id, epoch, offsets,
                                              encode)  # type: ignore[no-any-return]
