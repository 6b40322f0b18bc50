"""AssignReplicasToDirs (73) and BrokerHeartbeat's OfflineLogDirs on the wire (KIP-858):
requests encoded as a broker sends them, through the controller listener's handlers, into
a controller over the in-memory quorum, responses decoded with kio."""

from __future__ import annotations

import uuid

from odradek.metadata.controller_requests import CreatableTopic
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.unit.broker.test_controller_apis import Node
from tests.unit.metadata.cluster_support import CLUSTER_ID

E = ErrorCode
A, B, C = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def register(node: Node, broker_id: int, dirs: list[uuid.UUID]) -> int:
    r = node.call(ApiKey.BROKER_REGISTRATION, 4, {
        "broker_id": broker_id, "cluster_id": CLUSTER_ID, "incarnation_id": uuid.uuid4(),
        "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092 + broker_id,
                       "security_protocol": 0}],
        "features": [{"name": "metadata.version", "min_supported_version": 1,
                      "max_supported_version": 21},
                     {"name": "transaction.version", "min_supported_version": 0,
                      "max_supported_version": 2}],
        "rack": None, "is_migrating_zk_broker": False, "log_dirs": dirs,
        "previous_broker_epoch": -1})
    assert r.error_code == E.none
    return int(r.broker_epoch)


def heartbeat(node: Node, broker_id: int, epoch: int, offline: list[uuid.UUID]) -> object:
    return node.call(ApiKey.BROKER_HEARTBEAT, 1, {
        "broker_id": broker_id, "broker_epoch": epoch,
        "current_metadata_offset": node.cluster.publisher.offset, "want_fence": False,
        "want_shut_down": False, "offline_log_dirs": offline})


def assign(node: Node, broker_id: int, epoch: int, directory: uuid.UUID,
           parts: list[tuple[uuid.UUID, int]]) -> object:
    return node.call(ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0, {
        "broker_id": broker_id, "broker_epoch": epoch, "directories": [{
            "id_": directory, "topics": [
                {"topic_id": t, "partitions": [{"partition_index": p}]} for t, p in parts]}]})


def test_assignments_and_offline_directories_over_the_wire() -> None:
    node = Node()
    epochs = {1: register(node, 1, [A, B]), 2: register(node, 2, [C]),
              3: register(node, 3, [uuid.uuid4()])}
    for b, e in epochs.items():
        assert not heartbeat(node, b, e, []).is_fenced  # type: ignore[attr-defined]
    [created, other] = node.cluster.controller.create_topics([
        CreatableTopic("t", assignments={0: [1, 2, 3]}),
        CreatableTopic("u", assignments={0: [2, 3]})])
    tid = created.topic_id
    unknown = uuid.uuid4()
    r = assign(node, 1, epochs[1], A, [(tid, 0), (other.topic_id, 0), (unknown, 0)])
    assert r.error_code == E.none  # type: ignore[attr-defined]
    [d] = r.directories  # type: ignore[attr-defined]
    assert d.id_ == A
    codes = {(t.topic_id, p.partition_index): p.error_code for t in d.topics
             for p in t.partitions}
    assert codes == {(tid, 0): E.none, (other.topic_id, 0): E.not_leader_or_follower,
                     (unknown, 0): E.unknown_topic_id}
    part = node.cluster.image.partition("t", 0)
    assert part.directories[0] == A and part.leader == 1
    # a stale epoch: the whole request refused
    stale = assign(node, 1, epochs[1] - 1, A, [(tid, 0)])
    assert stale.error_code == E.stale_broker_epoch  # type: ignore[attr-defined]
    # the heartbeat names A offline: leadership moves, broker 1 stays unfenced
    h = heartbeat(node, 1, epochs[1], [A])
    assert h.error_code == E.none and not h.is_fenced  # type: ignore[attr-defined]
    part = node.cluster.image.partition("t", 0)
    assert part.leader == 2 and 1 not in part.isr
    assert node.cluster.image.brokers[1].log_dirs == (B,)
