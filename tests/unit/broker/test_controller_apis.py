"""The controller listener's cluster APIs end to end without sockets: requests encoded as a
broker or admin client sends them, through the handlers, into a controller over the
in-memory quorum, responses decoded with kio."""

from __future__ import annotations

import asyncio
import inspect
import types
import uuid
from typing import Any

import pytest

from odradek.broker.entities import build
from odradek.broker.handlers import api_versions, controller_apis
from odradek.protocol.apis import ApiKey, response_header_version
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import encode_request_header, parse_request_header
from odradek.protocol.messages import decode_response, encode_request, request_class
from tests.unit.metadata.cluster_support import CLUSTER_ID, make_cluster

E = ErrorCode


class Node:
    def __init__(self) -> None:
        self.cluster = make_cluster()
        self.ctx = types.SimpleNamespace(
            controller=self.cluster.controller, advertised_apis={18: (0, 4)})
        self.ctx.image = self.cluster.publisher.image
        self._correlation = 0

    def call(self, api_key: int, version: int, values: dict[str, Any],
             handler: Any = None) -> Any:
        self.ctx.image = self.cluster.publisher.image
        self._correlation += 1
        body = encode_request(build(request_class(api_key, version), values))
        frame = memoryview(encode_request_header(api_key, version, self._correlation, "t")
                           + body)
        header = parse_request_header(frame)
        handler = handler or controller_apis.HANDLERS[ApiKey(api_key)]
        result = handler(self.ctx, header, frame)
        if inspect.isawaitable(result):
            result = asyncio.run(_wait(result))
        header_version, parts = result
        assert header_version == response_header_version(api_key, version)
        return decode_response(api_key, version, b"".join(bytes(p) for p in parts))

    def register(self, broker_id: int, cluster_id: str = CLUSTER_ID,
                 incarnation: uuid.UUID | None = None) -> Any:
        return self.call(ApiKey.BROKER_REGISTRATION, 4, {
            "broker_id": broker_id, "cluster_id": cluster_id,
            "incarnation_id": incarnation or uuid.uuid4(),
            "listeners": [{"name": "PLAINTEXT", "host": "h", "port": 9092 + broker_id,
                           "security_protocol": 0}],
            "features": [{"name": "metadata.version", "min_supported_version": 1,
                          "max_supported_version": 21},
                         {"name": "transaction.version", "min_supported_version": 0,
                          "max_supported_version": 2}],
            "rack": None, "is_migrating_zk_broker": False, "log_dirs": [],
            "previous_broker_epoch": -1})

    def heartbeat(self, broker_id: int, epoch: int, offset: int | None = None,
                  **flags: bool) -> Any:
        return self.call(ApiKey.BROKER_HEARTBEAT, 1, {
            "broker_id": broker_id, "broker_epoch": epoch,
            "current_metadata_offset": self.cluster.publisher.offset if offset is None
            else offset, "want_fence": flags.get("want_fence", False),
            "want_shut_down": flags.get("want_shut_down", False), "offline_log_dirs": []})


async def _wait(result: Any) -> Any:
    return await result


@pytest.fixture
def node() -> Node:
    return Node()


def start(node: Node, *ids: int) -> dict[int, int]:
    epochs = {}
    for b in ids:
        r = node.register(b)
        assert r.error_code == E.none
        epochs[b] = r.broker_epoch
    for b in ids:
        assert not node.heartbeat(b, epochs[b]).is_fenced
    node.cluster.epochs.update(epochs)
    return epochs


def test_registration_and_heartbeat(node: Node) -> None:
    r = node.register(1)
    assert r.error_code == E.none and r.broker_epoch >= 0
    h = node.heartbeat(1, r.broker_epoch, offset=r.broker_epoch - 1)
    assert (h.error_code, h.is_caught_up, h.is_fenced) == (E.none, False, True)
    h = node.heartbeat(1, r.broker_epoch)
    assert (h.is_caught_up, h.is_fenced, h.should_shut_down) == (True, False, False)
    assert node.heartbeat(1, r.broker_epoch - 1).error_code == E.stale_broker_epoch


def test_registration_errors(node: Node) -> None:
    assert node.register(1, cluster_id="other").error_code == E.inconsistent_cluster_id
    start(node, 1)
    assert node.register(1).error_code == E.duplicate_broker_registration


def test_not_controller(node: Node) -> None:
    node.cluster.quorum.set_leader(False)
    assert node.register(1).error_code == E.not_controller
    node.ctx.controller = None
    assert node.register(1).error_code == E.not_controller


def test_alter_partition_v3_and_v2(node: Node) -> None:
    epochs = start(node, 1, 2)
    topic = node.cluster.create("t", assignments={0: [1, 2]})
    r = node.call(ApiKey.ALTER_PARTITION, 3, {
        "broker_id": 1, "broker_epoch": epochs[1], "topics": [{
            "topic_id": topic.topic_id, "partitions": [{
                "partition_index": 0, "leader_epoch": 0, "partition_epoch": 0,
                "leader_recovery_state": 0,
                "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": epochs[1]}]}]}]})
    assert r.error_code == E.none
    [p] = r.topics[0].partitions
    assert (p.error_code, p.leader_id, tuple(p.isr), p.partition_epoch) == (E.none, 1, (1,), 1)
    # a stale partition epoch, v2 (ISR without epochs)
    r = node.call(ApiKey.ALTER_PARTITION, 2, {
        "broker_id": 1, "broker_epoch": epochs[1], "topics": [{
            "topic_id": topic.topic_id, "partitions": [{
                "partition_index": 0, "leader_epoch": 0, "partition_epoch": 0,
                "leader_recovery_state": 0, "new_isr": [1, 2]}]}]})
    assert r.topics[0].partitions[0].error_code == E.invalid_update_version
    r = node.call(ApiKey.ALTER_PARTITION, 3, {
        "broker_id": 1, "broker_epoch": epochs[1] + 100, "topics": []})
    assert r.error_code == E.stale_broker_epoch


def test_elect_leaders(node: Node) -> None:
    start(node, 1, 2)
    node.cluster.create("t", assignments={0: [1, 2]})
    r = node.call(ApiKey.ELECT_LEADERS, 2, {
        "election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 5]}],
        "timeout": 1000})
    assert r.error_code == E.none
    results = {p.partition_id: p.error_code
               for t in r.replica_election_results for p in t.partition_result}
    assert results == {0: E.election_not_needed, 5: E.unknown_topic_or_partition}


def test_reassignments(node: Node) -> None:
    start(node, 1, 2, 3)
    node.cluster.create("t", assignments={0: [1, 2]})
    r = node.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
        "timeout": 1000, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "replicas": [2, 3]},
            {"partition_index": 7, "replicas": [1]}]}]})
    assert r.error_code == E.none
    assert [p.error_code for p in r.responses[0].partitions] == [
        E.none, E.unknown_topic_or_partition]
    r = node.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 1000, "topics": None})
    [t] = r.topics
    [p] = t.partitions
    assert (tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)) == (
        (2, 3, 1), (3,), (1,))
    r = node.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
        "timeout": 1000, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "replicas": None}]}]})
    assert r.responses[0].partitions[0].error_code == E.none
    r = node.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 1000, "topics": None})
    assert r.topics == ()


def test_update_features_and_api_versions(node: Node) -> None:
    start(node, 1)
    r = node.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                           "client_software_version": "1"},
                  handler=api_versions.handle)
    assert {f.name: f.max_version_level for f in r.finalized_features} == {
        "metadata.version": 21, "transaction.version": 2}
    assert {f.name for f in r.supported_features} == {"metadata.version", "transaction.version"}
    assert r.finalized_features_epoch >= 0
    r = node.call(ApiKey.UPDATE_FEATURES, 1, {
        "timeout": 1000, "validate_only": False, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 1, "upgrade_type": 2}]})
    assert r.error_code == E.none and r.results[0].error_code == E.none
    r = node.call(ApiKey.UPDATE_FEATURES, 0, {
        "timeout": 1000, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 0,
             "allow_downgrade": False}]})
    assert r.error_code == E.invalid_update_version
    r = node.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                           "client_software_version": "1"},
                  handler=api_versions.handle)
    assert {f.name: f.max_version_level for f in r.finalized_features}[
        "transaction.version"] == 1


def test_unregister_and_allocate_producer_ids(node: Node) -> None:
    epochs = start(node, 1, 2)
    r = node.call(ApiKey.ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": epochs[1]})
    assert r.error_code == E.none and r.producer_id_len > 0
    r2 = node.call(ApiKey.ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 1, "broker_epoch": epochs[1]})
    assert r2.producer_id_start == r.producer_id_start + r.producer_id_len
    r = node.call(ApiKey.ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 2, "broker_epoch": 0})
    assert r.error_code == E.stale_broker_epoch
    r = node.call(ApiKey.UNREGISTER_BROKER, 0, {"broker_id": 2})
    assert r.error_code == E.none
    r = node.call(ApiKey.UNREGISTER_BROKER, 0, {"broker_id": 2})
    assert r.error_code == E.broker_id_not_registered


def test_versions_are_readable() -> None:
    for decl in controller_apis.VERSIONS:
        for v in range(decl.min_version, decl.max_version + 1):
            request_class(decl.api_key, v)
    assert set(controller_apis.HANDLERS) == {d.api_key for d in controller_apis.VERSIONS}
