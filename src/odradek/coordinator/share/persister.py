"""The share-partition leader's persister (Kafka's DefaultStatePersister with its
PersisterStateManager): reads and writes a share-partition's state at the share coordinator
that serves its key, wherever that is.

The coordinator of a key is the leader of its `__share_group_state` partition
(`ShareStateStore.state_partition`). When that is this node, the store is called directly;
otherwise the persister RPC (Read/Write/Initialize/Delete/ReadShareGroupStateSummary) goes
to that node over the inter-broker listener. Kafka's persister finds the node with a
FindCoordinator of key type 2 first; here the node's own metadata image names the leader,
which is the answer FindCoordinator would give, without the round trip.

A coordinator that moved or is loading (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, a lost connection) is asked again, each time at the leader
the image names by then, with a growing backoff, until `timeout_s` passes; then the last
error is the answer. Any other error (FENCED_*_EPOCH, UNKNOWN_TOPIC_OR_PARTITION...) is
answered at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kio.schema.delete_share_group_state.v0 import request as dreq
from kio.schema.initialize_share_group_state.v0 import request as ireq
from kio.schema.read_share_group_state.v0 import request as rreq
from kio.schema.read_share_group_state_summary.v1 import request as sreq
from kio.schema.write_share_group_state.v1 import request as wreq
from kio.static.primitive import i8, i16, i32, i64

from odradek.coordinator.share.partition import RecordState, StateBatch
from odradek.coordinator.share.state_log import ShareKey
from odradek.coordinator.share.state_store import Answer, ShareStateStore
from odradek.network.channel import ChannelError
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
E = ErrorCode

RETRIABLE = frozenset({E.not_coordinator, E.coordinator_not_available,
                       E.coordinator_load_in_progress})
REQUEST_TIMEOUT_S = 30.0
BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)


def _batches(got: Any) -> tuple[StateBatch, ...]:
    out = []
    for b in got:
        state = int(b.delivery_state)
        if state not in (0, 2, 4):
            raise ValueError(f"bad delivery state {state}")
        out.append(StateBatch(int(b.first_offset), int(b.last_offset), RecordState(state),
                              int(b.delivery_count)))
    return tuple(out)


def _only(response: Any) -> Any:
    """The one partition result of a one-partition persister response."""
    [result] = response.results
    [part] = result.partitions
    return part


class SharePersister:
    """`leader_of(state partition)`: its leader in the image (-1/None: none now);
    `channels`: the inter-broker Channels (None on a single node)."""

    def __init__(self, store: ShareStateStore, node_id: int,
                 leader_of: Callable[[int], int | None], channels: Any = None,
                 timeout_s: float = 20.0) -> None:
        self.store = store
        self.node_id = node_id
        self.leader_of = leader_of
        self.channels = channels
        self.timeout_s = timeout_s
        self.remote_calls = 0  # requests sent to other nodes (a test sees the path taken)

    # ------------------------------------------------------------------ operations

    async def read(self, key: ShareKey, leader_epoch: int) -> Answer:
        def local() -> Answer:
            return self.store.read(key, leader_epoch)

        def entity() -> Any:
            return rreq.ReadShareGroupStateRequest(group_id=key.group_id, topics=(
                rreq.ReadStateData(topic_id=key.topic_id, partitions=(
                    rreq.PartitionData(partition=i32(key.partition),
                                       leader_epoch=i32(leader_epoch)),)),))

        def parse(r: Any) -> Answer:
            p = _only(r)
            if p.error_code != E.none:
                return Answer(ErrorCode(p.error_code), p.error_message)
            return Answer(state_epoch=int(p.state_epoch), leader_epoch=leader_epoch,
                          start_offset=int(p.start_offset), batches=_batches(p.state_batches))

        return await self._call(key, local, entity, parse)

    async def write(self, key: ShareKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...]) -> Answer:
        def local() -> Answer:
            return self.store.write(key, state_epoch, leader_epoch, start_offset, batches)

        def entity() -> Any:
            return wreq.WriteShareGroupStateRequest(group_id=key.group_id, topics=(
                wreq.WriteStateData(topic_id=key.topic_id, partitions=(wreq.PartitionData(
                    partition=i32(key.partition), state_epoch=i32(state_epoch),
                    leader_epoch=i32(leader_epoch), start_offset=i64(start_offset),
                    delivery_complete_count=i32(-1),
                    state_batches=tuple(wreq.StateBatch(
                        first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                        delivery_state=i8(int(b.state)),
                        delivery_count=i16(b.delivery_count)) for b in batches)),)),))

        return await self._call(key, local, entity, _error_only)

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Answer:
        def local() -> Answer:
            return self.store.initialize(key, state_epoch, start_offset)

        def entity() -> Any:
            return ireq.InitializeShareGroupStateRequest(group_id=key.group_id, topics=(
                ireq.InitializeStateData(topic_id=key.topic_id, partitions=(
                    ireq.PartitionData(partition=i32(key.partition),
                                       state_epoch=i32(state_epoch),
                                       start_offset=i64(start_offset)),)),))

        return await self._call(key, local, entity, _error_only)

    async def delete(self, key: ShareKey) -> Answer:
        def local() -> Answer:
            return self.store.delete(key)

        def entity() -> Any:
            return dreq.DeleteShareGroupStateRequest(group_id=key.group_id, topics=(
                dreq.DeleteStateData(topic_id=key.topic_id, partitions=(
                    dreq.PartitionData(partition=i32(key.partition)),)),))

        return await self._call(key, local, entity, _error_only)

    async def summary(self, key: ShareKey, leader_epoch: int = -1,
                      timeout_s: float | None = None) -> Answer:
        def local() -> Answer:
            return self.store.summary(key, leader_epoch)

        def entity() -> Any:
            return sreq.ReadShareGroupStateSummaryRequest(group_id=key.group_id, topics=(
                sreq.ReadStateSummaryData(topic_id=key.topic_id, partitions=(
                    sreq.PartitionData(partition=i32(key.partition),
                                       leader_epoch=i32(leader_epoch)),)),))

        def parse(r: Any) -> Answer:
            p = _only(r)
            if p.error_code != E.none:
                return Answer(ErrorCode(p.error_code), p.error_message)
            return Answer(state_epoch=int(p.state_epoch), leader_epoch=int(p.leader_epoch),
                          start_offset=int(p.start_offset),
                          delivery_complete_count=int(p.delivery_complete_count))

        return await self._call(key, local, entity, parse, timeout_s)

    # ------------------------------------------------------------------ routing

    async def _call(self, key: ShareKey, local: Callable[[], Answer],
                    entity: Callable[[], Any], parse: Callable[[Any], Answer],
                    timeout_s: float | None = None) -> Answer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.timeout_s if timeout_s is None else timeout_s)
        attempt = 0
        while True:
            answer = await self._once(key, local, entity, parse)
            if answer.error not in RETRIABLE or loop.time() >= deadline:
                return answer
            await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
            attempt += 1

    async def _once(self, key: ShareKey, local: Callable[[], Answer],
                    entity: Callable[[], Any], parse: Callable[[Any], Answer]) -> Answer:
        if not self.store.num_partitions:
            return Answer(E.coordinator_not_available)
        leader = self.leader_of(self.store.state_partition(key))
        if leader is None or leader < 0:
            return Answer(E.coordinator_not_available)
        if leader == self.node_id:
            return local()
        if self.channels is None:
            # a single node has no peers: a leader elsewhere is metadata not yet applied
            return Answer(E.coordinator_not_available)
        self.remote_calls += 1
        try:
            response = await self.channels.request(leader, entity(), REQUEST_TIMEOUT_S)
            return parse(response)
        except (ChannelError, OSError) as exc:
            log.debug("share state request to node %d failed: %s", leader, exc)
            return Answer(E.coordinator_not_available, str(exc))
        except ValueError as exc:  # a malformed answer (a bad state batch, not one result)
            return Answer(E.unknown_server_error, f"bad answer from node {leader}: {exc}")


def _error_only(response: Any) -> Answer:
    p = _only(response)
    return Answer(ErrorCode(p.error_code), p.error_message)
