"""Starting the node's coordinators on one runtime: create `__consumer_offsets` and
`__transaction_state` if needed, replay the partitions this node leads, finish half-ended
transactions, start the timers. The node calls `start_coordinators` before it listens and
`Coordinators.stop` when it shuts down."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from odradek.coordinator.runtime import (
    CoordinatorRuntime,
    CreateTopics,
    ensure_internal_topic,
    internal_topic_spec,
)
from odradek.coordinator.share.coordinator import ShareCoordinator, create_state_topic
from odradek.coordinator.share.persister import SharePersister
from odradek.coordinator.share.state_log import TOPIC as SHARE_STATE_TOPIC
from odradek.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from odradek.coordinator.transaction.producer_ids import BLOCK_SIZE, ProducerIdManager
from odradek.coordinator.transaction.state_log import TOPIC as TXN_TOPIC
from odradek.metadata.records import RESOURCE_GROUP

log = logging.getLogger(__name__)

TXN_SEGMENT_BYTES = 104857600
PRODUCER_EXPIRY_JOB = "producer-id-expiry"


@dataclass
class Coordinators:
    runtime: CoordinatorRuntime
    group: GroupCoordinator
    transaction: TransactionCoordinator
    share: ShareCoordinator

    async def stop(self) -> None:
        """Stop every timer; waiting JoinGroup/SyncGroup requests get NOT_COORDINATOR."""
        await self.group.stop()
        await self.transaction.stop()
        await self.runtime.stop()


async def start_coordinators(config: Any, controller: Any, replica_manager: Any, node_id: int,
                             create_topics: CreateTopics, live_brokers: int,
                             marker_channels: Any = None) -> Coordinators:
    """`create_topics(specs)` creates topics through the controller and lets the partitions
    follow (the node's admin path); `live_brokers` caps the internal topics' replication
    factor (Kafka refuses to create them with fewer live brokers than their factor, default
    3, which would leave a single node with no coordinator). `marker_channels` (a cluster's
    inter-broker Channels) carry WriteTxnMarkers to the leaders on other nodes."""
    runtime = CoordinatorRuntime(replica_manager)
    group = await _start_group(runtime, config, controller, create_topics, live_brokers)
    txn = await _start_transaction(runtime, config, controller, replica_manager, node_id,
                                   group, create_topics, live_brokers, marker_channels)
    share = _start_share(runtime, config, controller, create_topics, live_brokers,
                         group.store.num_partitions, node_id, marker_channels)
    if SHARE_STATE_TOPIC in controller.image.topics_by_name:
        # a node that served share groups: their state, then their membership (the
        # share-group records of __consumer_offsets, which the group coordinator skips)
        n = len(controller.image.topics_by_name[SHARE_STATE_TOPIC].partitions)
        count = await asyncio.to_thread(share.load_existing, n)
        members = await asyncio.to_thread(share.load_membership)
        log.info("share coordinator loaded %d records of %s and %d share-group records of "
                 "%s (%d groups)", count, SHARE_STATE_TOPIC, members, ot.TOPIC,
                 len(share.groups))
        share.start()
    return Coordinators(runtime, group, txn, share)


def _start_share(runtime: CoordinatorRuntime, config: Any, controller: Any,
                 create_topics: CreateTopics, live_brokers: int,
                 offsets_partitions: int, node_id: int, channels: Any) -> ShareCoordinator:
    """The share coordinator (KIP-932); `__share_group_state` is created when the first
    share group appears (ShareCoordinator.ensure_ready). Its persister reaches the share
    coordinators on other nodes over `channels` (the inter-broker ones the transaction
    markers use; None on a single node)."""
    def lookup(name: str) -> tuple[uuid.UUID, int] | None:
        t = controller.image.topics_by_name.get(name)
        return None if t is None else (t.topic_id, len(t.partitions))

    def name_of(topic_id: uuid.UUID) -> str | None:
        t = controller.image.topics_by_id.get(topic_id)
        return None if t is None else t.name

    def state_leader(partition: int) -> int | None:
        t = controller.image.topics_by_name.get(SHARE_STATE_TOPIC)
        p = None if t is None else t.partitions.get(partition)
        return None if p is None else int(p.leader)

    share = ShareCoordinator(
        runtime, config, lookup, name_of,
        lambda group_id: controller.image.configs.get((RESOURCE_GROUP, group_id), {}),
        lambda: create_state_topic(runtime, config, lambda: controller.image, create_topics,
                                   lambda: live_brokers), offsets_partitions)
    share.persister = SharePersister(share.store, node_id, state_leader, channels)
    share.follow_membership()
    return share


async def _start_group(runtime: CoordinatorRuntime, config: Any, controller: Any,
                       create_topics: CreateTopics, live_brokers: int) -> GroupCoordinator:
    gconf = GroupConfig.from_broker_config(config)
    spec = internal_topic_spec(
        ot.TOPIC, gconf.num_partitions, config.get_int("offsets.topic.replication.factor"),
        live_brokers, {"compression.type": "producer",
                       "segment.bytes": str(config.get_int("offsets.topic.segment.bytes"))})
    gconf.num_partitions = await ensure_internal_topic(lambda: controller.image, create_topics,
                                                       spec)

    def lookup(name: str) -> tuple[uuid.UUID, int] | None:
        t = controller.image.topics_by_name.get(name)
        return None if t is None else (t.topic_id, len(t.partitions))

    def name_of(topic_id: uuid.UUID) -> str | None:
        t = controller.image.topics_by_id.get(topic_id)
        return None if t is None else t.name

    coord = GroupCoordinator(runtime.rm, gconf, lookup, name_of,
                             lambda: list(controller.image.topics_by_name), runtime)
    coord.group_overrides = lambda group_id: controller.image.configs.get(
        (RESOURCE_GROUP, group_id), {})
    began = time.monotonic()
    count = await asyncio.to_thread(coord.load)
    log.info("group coordinator loaded %d records of %s (%d groups) in %.2f s", count, ot.TOPIC,
             len(coord.groups), time.monotonic() - began)
    coord.start()
    return coord


async def _start_transaction(runtime: CoordinatorRuntime, config: Any, controller: Any,
                             rm: Any, node_id: int, group: GroupCoordinator,
                             create_topics: CreateTopics, live_brokers: int,
                             marker_channels: Any = None) -> TransactionCoordinator:
    tconf = TxnConfig.from_broker_config(config)
    segment = config.values.get("transaction.state.log.segment.bytes") or TXN_SEGMENT_BYTES
    spec = internal_topic_spec(
        TXN_TOPIC, tconf.num_partitions,
        config.get_int("transaction.state.log.replication.factor"), live_brokers,
        {"segment.bytes": str(segment)})
    tconf.num_partitions = await ensure_internal_topic(lambda: controller.image, create_topics,
                                                       spec)

    def partition_exists(name: str, p: int) -> bool:
        t = controller.image.topics_by_name.get(name)
        return t is not None and 0 <= p < len(t.partitions)

    def allocate() -> tuple[int, int]:
        return controller.allocate_producer_ids(node_id, -1, BLOCK_SIZE)  # type: ignore[no-any-return]

    def leader_of(tp: tuple[str, int]) -> int | None:
        # the partition's leader in the metadata image (-1: none now), None once it is gone
        t = controller.image.topics_by_name.get(tp[0])
        p = None if t is None else t.partitions.get(tp[1])
        return None if p is None else int(p.leader)

    coord = TransactionCoordinator(rm, tconf, ProducerIdManager(allocate), group,
                                   partition_exists, runtime, leader_of, marker_channels)
    count = await asyncio.to_thread(coord.load)
    pending = coord.load_offsets()
    if pending:
        log.info("%d transactional offsets of %s wait for their transaction's marker", pending,
                 ot.TOPIC)
    coord.recover()
    log.info("transaction coordinator loaded %d records of %s (%d transactional ids)", count,
             TXN_TOPIC, len(coord.txns))
    # the replica manager's producer state asks the coordinator for transactional epochs,
    # and expires idle producer ids on the runtime's scheduler (Kafka's LogManager task)
    rm.producer_epoch_of = coord.epoch_of
    rm.set_producer_id_expiration(tconf.producer_id_expiration_ms)

    def expire_producers() -> None:
        gone = rm.remove_expired_producers()
        if gone:
            log.info("%d idle producer ids expired (producer.id.expiration.ms)", gone)

    runtime.scheduler.every(PRODUCER_EXPIRY_JOB,
                            max(0.05, tconf.producer_id_expiration_check_ms / 1000),
                            expire_producers)
    coord.start()
    return coord
