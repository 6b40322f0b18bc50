"""A controller over the in-memory quorum, with brokers that register and heartbeat."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.controller import Controller
from odradek.metadata.controller_requests import (
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
)
from odradek.metadata.publisher import MetadataPublisher
from odradek.protocol.errors import ErrorCode
from tests.unit.metadata.fake_quorum import FakeQuorum

CLUSTER_ID = "test-cluster-id-000000"
FEATURES = [("metadata.version", 1, 21), ("transaction.version", 0, 2)]


@dataclass
class Clock:
    now: int = 1_000_000

    def __call__(self) -> int:
        return self.now


@dataclass
class Cluster:
    quorum: FakeQuorum
    publisher: MetadataPublisher
    controller: Controller
    clock: Clock
    epochs: dict[int, int] = field(default_factory=dict)
    incarnations: dict[int, uuid.UUID] = field(default_factory=dict)

    @property
    def image(self):
        return self.publisher.image

    def register(self, broker_id: int, rack: str | None = None,
                 incarnation: uuid.UUID | None = None, cluster_id: str | None = CLUSTER_ID,
                 features: list[tuple[str, int, int]] | None = None,
                 previous_epoch: int = -1):
        incarnation = incarnation or self.incarnations.get(broker_id) or uuid.uuid4()
        reply = self.controller.register_broker(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=cluster_id, incarnation_id=incarnation,
            listeners=[("PLAINTEXT", "localhost", 9000 + broker_id, 0)],
            features=FEATURES if features is None else features, rack=rack,
            previous_broker_epoch=previous_epoch))
        if reply.error_code == ErrorCode.none:
            self.epochs[broker_id] = reply.broker_epoch
            self.incarnations[broker_id] = incarnation
        return reply

    def heartbeat(self, broker_id: int, offset: int | None = None, *,
                  want_fence: bool = False, want_shut_down: bool = False,
                  epoch: int | None = None) -> BrokerHeartbeatReply:
        return self.controller.broker_heartbeat(BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=self.epochs[broker_id] if epoch is None else epoch,
            current_metadata_offset=self.publisher.offset if offset is None else offset,
            want_fence=want_fence, want_shut_down=want_shut_down))

    def start_brokers(self, *ids: int, racks: dict[int, str] | None = None) -> None:
        for b in ids:
            assert self.register(b, (racks or {}).get(b)).error_code == ErrorCode.none
        for b in ids:
            assert not self.heartbeat(b).is_fenced

    def create(self, name: str, partitions: int = 1, rf: int = 3,
               assignments: dict[int, list[int]] | None = None):
        if assignments is not None:
            partitions = rf = -1
        [result] = self.controller.create_topics([CreatableTopic(
            name, num_partitions=partitions, replication_factor=rf, assignments=assignments)])
        assert result.error_code == ErrorCode.none, result
        return self.image.topics_by_name[name]

    def partition(self, name: str, index: int = 0):
        return self.image.partition(name, index)


def make_cluster(props: dict[str, str] | None = None, node_id: int = 100) -> Cluster:
    quorum = FakeQuorum(node_id)
    publisher = MetadataPublisher(CLUSTER_ID)
    publisher.attach(quorum)
    clock = Clock()
    config = BrokerConfig.from_properties({"node.id": str(node_id), **(props or {})})
    controller = Controller(quorum, publisher, config, clock=clock)
    controller.bootstrap()
    return Cluster(quorum, publisher, controller, clock)
