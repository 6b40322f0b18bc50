"""A real coordinator over real logs in a temp dir: controller, replica manager, topics."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from odradek.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from odradek.coordinator.offsets_topic import TOPIC
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.log_config import log_config
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.controller_requests import CreatableTopic
from odradek.metadata.quorum import MetadataQuorum
from odradek.replication.manager import ReplicaManager
from odradek.storage.log_manager import LogManager

OFFSETS_PARTITIONS = 5
# a replica that never fetches: the partition's high watermark moves only when a test says
SILENT_FOLLOWER = 99


def with_silent_follower(node: Any, topic: str, partition: int) -> Any:
    """Give a partition the node leads a second replica in its ISR that does not fetch."""
    part = node.rm.get(topic, partition)
    part.make_leader(part.leader_epoch + 1, part.partition_epoch + 1,
                     [node.rm.node_id, SILENT_FOLLOWER], [node.rm.node_id, SILENT_FOLLOWER],
                     int(time.time() * 1000))
    assert not part.solo
    return part


def follower_catches_up(part: Any) -> None:
    """The silent follower fetches to the log end: the high watermark follows."""
    assert part.update_follower_fetch(SILENT_FOLLOWER, part.log_end_offset,
                                      int(time.time() * 1000)) is None
    assert part.high_watermark == part.log_end_offset


class Node:
    """Just enough of a node for the coordinator: metadata, logs, partitions."""

    def __init__(self, path: Path, topics: dict[str, int] | None = None, **config: Any) -> None:
        self.path = path
        self.quorum = MetadataQuorum.open(path, node_id=1)
        broker = BrokerConfig.from_properties({})
        self.controller = Controller(self.quorum, load_image(self.quorum, "cid"), broker)
        self.controller.bootstrap()
        self.controller.register_broker()
        specs = [CreatableTopic(name, n, 1) for name, n in (topics or {}).items()]
        if TOPIC not in self.controller.image.topics_by_name:
            specs.append(CreatableTopic(TOPIC, OFFSETS_PARTITIONS, 1,
                                        configs={"cleanup.policy": "compact"}))
        self.controller.create_topics(specs, False)
        self.log_manager = LogManager(path, log_config({}, broker))
        self.rm = ReplicaManager(self.log_manager, 1, path,
                                 lambda t: log_config(self.controller.image.topic_configs(t), broker))
        self.rm.load(self.controller.image)
        defaults: dict[str, Any] = {"num_partitions": OFFSETS_PARTITIONS,
                                    "initial_rebalance_delay_ms": 50,
                                    "min_session_timeout_ms": 10}
        defaults.update(config)
        self.coordinator = GroupCoordinator(self.rm, GroupConfig(**defaults), self.lookup,
                                            self.name_of,
                                            lambda: list(self.controller.image.topics_by_name))
        self.coordinator.load()

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        t = self.controller.image.topics_by_name.get(name)
        return None if t is None else (t.topic_id, len(t.partitions))

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        t = self.controller.image.topics_by_id.get(topic_id)
        return None if t is None else t.name

    def produce(self, topic: str, partition: int, count: int) -> None:
        from odradek.protocol.records import Record, build_batch

        batch = build_batch([Record(-1, 0, None, b"x") for _ in range(count)])
        result = self.rm.append(topic, partition, memoryview(batch), 1)
        assert result.error == 0

    def close(self) -> None:
        self.log_manager.close()
        self.quorum.close()
