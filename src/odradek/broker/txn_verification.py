"""Transaction verification by the partition leader (KIP-890 part 1, Kafka's
AddPartitionsToTxnManager).

A partition takes a producer's first transactional batch (or TxnOffsetCommit's offsets, in
`__consumer_offsets`) only once the transaction coordinator confirms the partition is in
the producer's open transaction. When the coordinator is this node it sets the partition's
verification itself once its record adding the partition is committed; when it is another
node, the leader asks it with AddPartitionsToTxn v4 `verify_only` over the inter-broker
listener (the marker channels' connections), and on NONE marks the producer verified here,
unless a marker or a leader change came meanwhile (the guard). A verification is spent by
the transaction's first batch here and dropped by its marker and by any leader change. A
zombie's late write, or a batch after the transaction was aborted, is refused instead of
opening a transaction no coordinator knows of.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.add_partitions_to_txn.v4 import request as aptx

from odradek.coordinator.transaction.state_log import TOPIC as TXN_TOPIC
from odradek.coordinator.transaction.state_log import partition_for
from odradek.network.channel import ChannelError
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = ErrorCode
TIMEOUT_S = 30.0


def needs_verification(part: Any, producer_id: int, epoch: int) -> bool:
    """The partition has no open transaction of the producer and no verification for it."""
    state = part.log.producer_state
    return producer_id not in state.ongoing and not state.is_verified(producer_id, epoch)


def coordinator_node(ctx: Any, transactional_id: str) -> int:
    """The leader of the transactional id's `__transaction_state` partition (-1: unknown)."""
    topic = ctx.image.topics_by_name.get(TXN_TOPIC)
    if topic is None:
        return -1
    p = topic.partitions.get(partition_for(transactional_id, len(topic.partitions)))
    return -1 if p is None else int(p.leader)


async def verify(ctx: Any, transactional_id: str, producer_id: int, epoch: int,
                 tp: tuple[str, int], add: bool = False) -> ErrorCode:
    """Ask the transaction coordinator whether `tp` is in the producer's open transaction
    (`add`: add it, KIP-890 part 2's TxnOffsetCommit v5); on NONE the partition is marked
    verified for the producer's epoch. Coordinator trouble comes back as its error code
    (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...), for the caller to map."""
    tc = ctx.transaction_coordinator
    if tc is None:
        return E.coordinator_not_available
    part = ctx.replica_manager.get(*tp)
    if part is None:
        return E.not_leader_or_follower
    # the guard: a marker or a leader change while the coordinator is asked voids the answer
    state = part.log.producer_state
    guard = state.begin_verification(producer_id, epoch)
    leader_epoch = part.leader_epoch
    if tc.coordinator_error(transactional_id) != E.not_coordinator:
        code = tc.add_partitions(transactional_id, producer_id, epoch, [tp], not add)[tp]
        if code == E.none and add:
            # the partition is in the transaction once the coordinator's record is
            # committed (it may still be lost with a leader change): wait for that
            code = await tc.committed(transactional_id)
    else:
        code = await _ask(ctx, tc, transactional_id, producer_id, epoch, tp, add)
    if code == E.none and (not part.is_leader or part.leader_epoch != leader_epoch):
        return E.not_leader_or_follower  # the client retries at the new leader, verified there
    if code == E.none and not part.log.producer_state.complete_verification(producer_id, guard):
        log.info("verification of %r (producer %d epoch %d) in %s-%d voided by the "
                 "transaction's marker meanwhile", transactional_id, producer_id, epoch, *tp)
        return E.invalid_txn_state
    return code


async def _ask(ctx: Any, tc: Any, transactional_id: str, producer_id: int, epoch: int,
               tp: tuple[str, int], add: bool) -> ErrorCode:
    node = coordinator_node(ctx, transactional_id)
    channels = tc.markers.channels
    if node < 0 or channels is None:
        return E.coordinator_not_available
    request = aptx.AddPartitionsToTxnRequest(transactions=(aptx.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
        verify_only=not add, topics=(aptx.AddPartitionsToTxnTopic(
            name=tp[0], partitions=(tp[1],)),)),))
    try:
        response = await channels.request(node, request, TIMEOUT_S)
    except (ChannelError, OSError) as exc:
        log.info("verifying %r with its coordinator %d failed: %s", transactional_id, node, exc)
        return E.coordinator_not_available
    if int(response.error_code) != E.none:
        return ErrorCode(response.error_code)
    for txn in response.results_by_transaction:
        for t in txn.topic_results:
            for p in t.results_by_partition:
                if (t.name, int(p.partition_index)) == tp:
                    return ErrorCode(p.partition_error_code)
    return E.coordinator_not_available
