"""Issue 16, point 3: the node-to-node APIs check what Kafka's KafkaApis/ControllerApis check
(ClusterAction on the cluster; DescribeQuorum Describe, UnregisterBroker Alter), through the
real request path without sockets (support.Broker, with StandardAuthorizer). So do the
security admin APIs: DescribeAcls and DescribeUserScramCredentials need Describe on the
cluster, CreateAcls, DeleteAcls and AlterUserScramCredentials Alter, DescribeClientQuotas
DescribeConfigs and AlterClientQuotas AlterConfigs.

For each API: a principal without the ACL gets Kafka's refusal and the node's state (the
metadata log, the KRaft quorum, the topic's log) is as before; a super user and a principal
with the ACL ALLOWed are not refused for authorization (they may fail for other reasons: the
requests name another cluster id, an unknown broker); ALLOW and DENY together is refused."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from odradek.broker.apis import CONTROLLER_HANDLERS, Dispatcher, advertised_apis
from odradek.broker.envelope import encode_principal
from odradek.broker.server import Connection, Server
from odradek.metadata.raft.kraft import KRaftQuorum
from odradek.metadata.raft.wire import METADATA_TOPIC, METADATA_TOPIC_ID
from odradek.protocol.apis import ApiKey, response_header_version
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import encode_request_header, parse_request_header
from odradek.protocol.messages import decode_response
from odradek.security.principal import KafkaPrincipal, Session
from tests.unit.broker.support import PEER, Broker, _await, _bytes

E = ErrorCode
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CA, DESCRIBE, ALTER = 9, 8, 7  # AclOperation codes on the wire (Kafka's)
DESCRIBE_CONFIGS, ALTER_CONFIGS = 10, 11
ALLOW, DENY = 3, 2
NO_DIR = uuid.UUID(int=0)


class Node:
    """support.Broker with its controller listener (CONTROLLER_HANDLERS over a real
    single-voter KRaftQuorum) and one connection per principal."""

    def __init__(self, b: Broker, quorum: KRaftQuorum) -> None:
        self.b, self.quorum = b, quorum
        b.ctx.quorum = quorum
        b.ctx.advertised_apis = advertised_apis()
        self.client = b.dispatch
        self.controller = _controller_dispatcher(b, advertised_apis(CONTROLLER_HANDLERS))
        self._correlation = 1000

    def conn(self, principal: str) -> Connection:
        conn = Connection(Server(self.b.dispatch, 100 << 20))
        conn.peer = PEER
        conn.session = Session(principal=KafkaPrincipal.parse(principal),
                               client_address=PEER.split(":")[0])
        return conn

    def send(self, listener: str, principal: str, api_key: int, version: int,
             values: dict[str, Any]) -> Any:
        self._correlation += 1
        frame = memoryview(encode_request_header(api_key, version, self._correlation, "t")
                           + self.b.request(api_key, version, values))
        dispatch = self.controller if listener == "controller" else self.client
        result = dispatch(self.conn(principal), frame, parse_request_header(frame))
        if not isinstance(result, tuple):
            result = asyncio.run(_await(result))
        hv, parts = result
        assert hv == response_header_version(api_key, version)
        return decode_response(api_key, version, b"".join(_bytes(p) for p in parts))

    def state(self) -> tuple[Any, ...]:
        d = self.quorum.describe()
        part = self.b.rm.get("t", 0)
        assert part is not None
        # the controller's metadata log (registrations, ISR, producer ids, topics), the KRaft
        # quorum's leader, epoch and log, and the topic's log (markers)
        return (self.b.quorum.end_offset, d.leader_id, d.leader_epoch, d.high_watermark,
                self.quorum.raft_log.end_offset(), part.log_end_offset,
                sorted(self.b.controller.image.topics_by_name),
                # what the security admin APIs would change
                sorted(map(str, self.b.ctx.image.acls.values())),
                sorted(map(repr, self.b.ctx.image.client_quotas.items())),
                sorted(self.b.ctx.image.scram_credentials))


def _controller_dispatcher(b: Broker, apis: dict[int, tuple[int, int]]) -> Dispatcher:
    # the controller listener's table over the same context: a Dispatcher reads the
    # advertised versions from ctx when it is built, so swap them in for its construction
    saved = b.ctx.advertised_apis
    b.ctx.advertised_apis = apis
    try:
        return Dispatcher(b.ctx, CONTROLLER_HANDLERS)
    finally:
        b.ctx.advertised_apis = saved


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    path = tmp_path_factory.mktemp("ca")
    b = Broker(path, **{"authorizer.class.name": AUTHORIZER,
                        "super.users": "User:ANONYMOUS;User:admin"})
    quorum = KRaftQuorum.open(path / "raft", 1, cluster_id="cid")
    b.create("t")
    acls = []
    for principal, perms in (("User:node", (ALLOW,)), ("User:both", (ALLOW, DENY))):
        for op in (CA, DESCRIBE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS):
            for perm in perms:
                acls.append({"resource_type": 4, "resource_name": "kafka-cluster",
                             "resource_pattern_type": 3, "principal": principal, "host": "*",
                             "operation": op, "permission_type": perm})
    r = b.call(ApiKey.CREATE_ACLS, 3, {"creations": acls})
    assert all(x.error_code == E.none for x in r.results), r
    n = Node(b, quorum)
    yield n
    quorum.close()
    b.close()


@dataclass(frozen=True)
class Api:
    name: str
    listener: str
    key: int
    version: int
    values: Callable[[Node], dict[str, Any]]
    refusal: Callable[[Any], list[int]]  # the codes of the answer where Kafka puts the refusal
    refused: int = E.cluster_authorization_failed


def _top(r: Any) -> list[int]:
    return [int(r.error_code)]


def _fetch_parts(r: Any) -> list[int]:
    return [int(r.error_code)] + [int(p.error_code) for t in r.responses for p in t.partitions]


def _epoch_parts(r: Any) -> list[int]:
    return [int(p.error_code) for t in r.topics for p in t.partitions]


def _each(field: str) -> Callable[[Any], list[int]]:
    return lambda r: [int(x.error_code) for x in getattr(r, field)]


def _acl_filter(prefix: str = "") -> dict[str, Any]:
    # matches only ACLs of a principal nobody has: an allowed call changes nothing else
    return {f"resource_type{prefix}": 2, f"resource_name{prefix}": "zz",
            "pattern_type_filter": 3, "principal_filter": "User:zed", "host_filter": "*",
            "operation": 3, "permission_type": 3}


def _marker_parts(r: Any) -> list[int]:
    return [int(p.error_code) for m in r.markers for t in m.topics for p in t.partitions]


def _envelope_inner(n: Node) -> bytes:
    # an inner CreateTopics that would change the image: a refused envelope must not run it
    body = n.b.request(ApiKey.CREATE_TOPICS, 7, {"topics": [{
        "name": "enveloped", "num_partitions": 1, "replication_factor": 1,
        "assignments": [], "configs": []}], "timeout": 30000, "validate_only": True})
    return encode_request_header(ApiKey.CREATE_TOPICS, 7, 1, "inner") + body


def _topic_id(n: Node) -> uuid.UUID:
    part = n.b.rm.get("t", 0)
    assert part is not None
    return uuid.UUID(str(part.topic_id))


OTHER = "other-cluster"  # every raft request names another cluster: never reaches the quorum
APIS = [
    Api("Vote", "controller", ApiKey.VOTE, 2, lambda n: {
        "cluster_id": OTHER, "voter_id": 1, "topics": [{"topic_name": METADATA_TOPIC,
        "partitions": [{"partition_index": 0, "replica_epoch": 99, "replica_id": 2,
                        "replica_directory_id": NO_DIR, "voter_directory_id": NO_DIR,
                        "last_offset_epoch": 99, "last_offset": 99,
                        "pre_vote": False}]}]}, _top),
    Api("BeginQuorumEpoch", "controller", ApiKey.BEGIN_QUORUM_EPOCH, 1, lambda n: {
        "cluster_id": OTHER, "voter_id": 1, "topics": [{"topic_name": METADATA_TOPIC,
        "partitions": [{"partition_index": 0, "leader_id": 2, "leader_epoch": 99,
                        "voter_directory_id": NO_DIR}]}],
        "leader_endpoints": []}, _top),
    Api("EndQuorumEpoch", "controller", ApiKey.END_QUORUM_EPOCH, 1, lambda n: {
        "cluster_id": OTHER, "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
            "partition_index": 0, "leader_id": 1, "leader_epoch": 99,
            "preferred_candidates": []}]}], "leader_endpoints": []}, _top),
    Api("FetchSnapshot", "controller", ApiKey.FETCH_SNAPSHOT, 1, lambda n: {
        "cluster_id": OTHER, "replica_id": 2, "max_bytes": 1 << 20, "topics": [{
            "name": METADATA_TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": 0,
                "snapshot_id": {"end_offset": 1, "epoch": 0}, "position": 0,
                "replica_directory_id": NO_DIR}]}]}, _top),
    Api("metadata Fetch", "controller", ApiKey.FETCH, 17, lambda n: {
        "cluster_id": OTHER, "replica_state": {"replica_id": 2, "replica_epoch": -1},
        "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{
            "topic_id": METADATA_TOPIC_ID, "partitions": [{
                "partition": 0, "current_leader_epoch": 99, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20, "replica_directory_id": NO_DIR}]}],
        "forgotten_topics_data": [], "rack_id": ""}, _fetch_parts),
    # Kafka answers a refused DescribeQuorum at the top level, with no topics
    Api("DescribeQuorum", "controller", ApiKey.DESCRIBE_QUORUM, 2, lambda n: {
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]},
        _top),
    Api("BrokerRegistration", "controller", ApiKey.BROKER_REGISTRATION, 4, lambda n: {
        "broker_id": 7, "cluster_id": OTHER, "incarnation_id": uuid.uuid4(),
        "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9099,
                       "security_protocol": 0}],
        "features": [], "rack": None, "is_migrating_zk_broker": False, "log_dirs": [],
        "previous_broker_epoch": -1}, _top),
    Api("BrokerHeartbeat", "controller", ApiKey.BROKER_HEARTBEAT, 1, lambda n: {
        "broker_id": 7, "broker_epoch": 12345, "current_metadata_offset": 0,
        "want_fence": False, "want_shut_down": True, "offline_log_dirs": []}, _top),
    Api("AlterPartition", "controller", ApiKey.ALTER_PARTITION, 3, lambda n: {
        "broker_id": 7, "broker_epoch": 12345, "topics": [{
            "topic_id": _topic_id(n), "partitions": [{
                "partition_index": 0, "leader_epoch": 0, "new_isr_with_epochs": [],
                "leader_recovery_state": 0, "partition_epoch": 0}]}]}, _top),
    Api("AllocateProducerIds", "controller", ApiKey.ALLOCATE_PRODUCER_IDS, 0, lambda n: {
        "broker_id": 7, "broker_epoch": 12345}, _top),
    Api("UnregisterBroker", "controller", ApiKey.UNREGISTER_BROKER, 0, lambda n: {
        "broker_id": 7}, _top),
    Api("Envelope", "controller", ApiKey.ENVELOPE, 0, lambda n: {
        "request_data": _envelope_inner(n),
        "request_principal": encode_principal(KafkaPrincipal("User", "admin")),
        "client_host_address": bytes([10, 1, 2, 3])}, _top),
    Api("WriteTxnMarkers", "client", ApiKey.WRITE_TXN_MARKERS, 1, lambda n: {
        "markers": [{"producer_id": 4242, "producer_epoch": 0, "transaction_result": False,
                     "topics": [{"name": "t", "partition_indexes": [0]}],
                     "coordinator_epoch": 0}]}, _marker_parts),
    # a follower's Fetch and OffsetForLeaderEpoch: Kafka answers the partitions
    # TOPIC_AUTHORIZATION_FAILED (OffsetForLeaderEpoch falls back to Describe on the topic)
    Api("follower Fetch", "client", ApiKey.FETCH, 17, lambda n: {
        "cluster_id": None, "replica_state": {"replica_id": 2, "replica_epoch": -1},
        "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{
            "topic_id": _topic_id(n), "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20, "replica_directory_id": NO_DIR}]}],
        "forgotten_topics_data": [], "rack_id": ""}, _fetch_parts,
        E.topic_authorization_failed),
    Api("OffsetForLeaderEpoch", "client", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, lambda n: {
        "replica_id": 2, "topics": [{"topic": "t", "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        _epoch_parts, E.topic_authorization_failed),
    # the security admin APIs (KafkaApis / ControllerApis): librdkafka drops DescribeAcls'
    # top-level error, so this is where its refusal is shown
    Api("DescribeAcls", "client", ApiKey.DESCRIBE_ACLS, 1, lambda n: _acl_filter("_filter"),
        _top),
    Api("CreateAcls", "client", ApiKey.CREATE_ACLS, 3, lambda n: {"creations": [{
        "resource_type": 2, "resource_name": "zz", "resource_pattern_type": 3,
        "principal": "User:zed", "host": "*", "operation": 3, "permission_type": 3}]},
        _each("results")),
    Api("DeleteAcls", "client", ApiKey.DELETE_ACLS, 3, lambda n: {"filters": [
        _acl_filter("_filter")]}, _each("filter_results")),
    Api("DescribeClientQuotas", "client", ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, lambda n: {
        "components": [], "strict": False}, _top),
    Api("AlterClientQuotas", "client", ApiKey.ALTER_CLIENT_QUOTAS, 1, lambda n: {
        "entries": [{"entity": [{"entity_type": "user", "entity_name": "zed"}],
                     "ops": [{"key": "producer_byte_rate", "value": 1024.0,
                              "remove": False}]}], "validate_only": True},
        _each("entries")),
    Api("DescribeUserScramCredentials", "client", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
        lambda n: {"users": None}, _top),
    Api("AlterUserScramCredentials", "client", ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
        lambda n: {"deletions": [{"name": "zed", "mechanism": 1}], "upsertions": []},
        _each("results")),
]
IDS = [a.name for a in APIS]


@pytest.mark.parametrize("api", APIS, ids=IDS)
@pytest.mark.parametrize("principal", ["User:nobody", "User:both"])
def test_refused_without_the_acl_and_nothing_changes(node: Node, api: Api,
                                                     principal: str) -> None:
    before = node.state()
    r = node.send(api.listener, principal, api.key, api.version, api.values(node))
    assert api.refused in api.refusal(r), r
    assert node.state() == before


@pytest.mark.parametrize("api", APIS, ids=IDS)
@pytest.mark.parametrize("principal", ["User:admin", "User:node"])
def test_allowed_with_the_acl_or_as_super_user(node: Node, api: Api, principal: str) -> None:
    r = node.send(api.listener, principal, api.key, api.version, api.values(node))
    codes = api.refusal(r)
    assert E.cluster_authorization_failed not in codes, r
    assert E.topic_authorization_failed not in codes, r


def test_describe_topic_partitions_needs_describe_on_the_topic(node: Node) -> None:
    """Kafka's DescribeTopicPartitionsRequestHandler: a topic the principal may not describe
    is left out of an all-topics answer and refused when named, existing or not; the super
    user sees it."""
    def ask(principal: str, names: list[str]) -> dict[str, int]:
        r = node.send("client", principal, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
            "topics": [{"name": n} for n in names], "response_partition_limit": 2000,
            "cursor": None})
        return {t.name: int(t.error_code) for t in r.topics}

    assert "t" not in ask("User:nobody", [])
    assert ask("User:nobody", ["t", "no-such"]) == {
        "t": E.topic_authorization_failed, "no-such": E.topic_authorization_failed}
    assert ask("User:admin", [])["t"] == E.none
    assert ask("User:admin", ["t", "no-such"]) == {
        "t": E.none, "no-such": E.unknown_topic_or_partition}
