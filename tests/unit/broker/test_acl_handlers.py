"""CreateAcls/DescribeAcls/DeleteAcls and Alter/DescribeClientQuotas through the real request
path (support.Broker): fuzzed bindings, filters and quota entries only ever get Kafka's
answers; authorized-operations fields with and without an authorizer; host matching on the
client's address."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.metadata.acls import SUPPORTED_OPERATIONS, ResourceType
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.authorizer import supported_operations_bitfield
from tests.unit.broker.support import Broker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
I8 = st.integers(-128, 127)
NAMES = st.sampled_from(["t", "*", "kafka-cluster", "", "g", "x" * 10])
PRINCIPALS = st.sampled_from(["User:a", "User:*", "a", ":", "User:", "Group:g"])
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    # the test client is a super user; its peer address is 10.1.2.3
    b = Broker(tmp_path_factory.mktemp("acl"), **{
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    b.create("t")
    yield b
    b.close()


@FUZZ
@given(rt=I8, pt=I8, op=I8, perm=I8, name=NAMES, principal=PRINCIPALS,
       host=st.sampled_from(["*", "", "10.1.2.3"]))
def test_fuzzed_bindings_get_kafka_answers(secured: Broker, rt: int, pt: int, op: int,
                                           perm: int, name: str, principal: str,
                                           host: str) -> None:
    r = secured.call(ApiKey.CREATE_ACLS, 3, {"creations": [{
        "resource_type": rt, "resource_name": name, "resource_pattern_type": pt,
        "principal": principal, "host": host, "operation": op, "permission_type": perm}]})
    assert r.results[0].error_code in (ErrorCode.none, ErrorCode.invalid_request)
    flt = {"resource_type_filter": rt, "resource_name_filter": name,
           "pattern_type_filter": pt, "principal_filter": principal, "host_filter": host,
           "operation": op, "permission_type": perm}
    d = secured.call(ApiKey.DESCRIBE_ACLS, 3, flt)
    assert d.error_code in (ErrorCode.none, ErrorCode.invalid_request)
    if r.results[0].error_code == ErrorCode.none and d.error_code == ErrorCode.none:
        assert any(a.principal == principal for res in d.resources for a in res.acls)
    x = secured.call(ApiKey.DELETE_ACLS, 3, {"filters": [flt]})
    assert x.filter_results[0].error_code in (ErrorCode.none, ErrorCode.invalid_request)


@FUZZ
@given(types=st.lists(st.sampled_from(["user", "client-id", "ip", "bogus"]), max_size=3),
       name=st.none() | st.sampled_from(["a", ""]),
       key=st.sampled_from(["producer_byte_rate", "request_percentage", "bogus"]),
       value=st.floats(allow_nan=True, allow_infinity=True), remove=st.booleans())
def test_fuzzed_quota_entries_get_kafka_answers(secured: Broker, types: list[str],
                                                name: str | None, key: str, value: float,
                                                remove: bool) -> None:
    entity = [{"entity_type": t, "entity_name": name} for t in types]
    r = secured.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{
        "entity": entity, "ops": [{"key": key, "value": value, "remove": remove}]}],
        "validate_only": True})
    assert r.entries[0].error_code in (ErrorCode.none, ErrorCode.invalid_request)
    d = secured.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
        {"entity_type": t, "match_type": 0, "match": name} for t in types], "strict": False})
    assert d.error_code in (ErrorCode.none, ErrorCode.invalid_request)


def _metadata_ops(b: Broker) -> tuple[int, int]:
    r = b.call(ApiKey.METADATA, 10, {"topics": [{"name": "t", "topic_id": None}],
                                     "allow_auto_topic_creation": False,
                                     "include_cluster_authorized_operations": True,
                                     "include_topic_authorized_operations": True})
    return int(r.cluster_authorized_operations), int(r.topics[0].topic_authorized_operations)


def test_authorized_operations_without_an_authorizer(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    try:
        b.create("t")
        assert _metadata_ops(b) == (supported_operations_bitfield(ResourceType.CLUSTER),
                                    supported_operations_bitfield(ResourceType.TOPIC))
        c = b.call(ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True,
                                                "endpoint_type": 1})
        assert c.cluster_authorized_operations == supported_operations_bitfield(
            ResourceType.CLUSTER)
        a = b.call(ApiKey.CREATE_ACLS, 3, {"creations": []})
        assert a.results == ()
        d = b.call(ApiKey.DESCRIBE_ACLS, 3, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1,
            "permission_type": 1})
        assert d.error_code == ErrorCode.security_disabled
    finally:
        b.close()


def test_authorized_operations_and_host_matching(tmp_path: Path) -> None:
    b = Broker(tmp_path, **{"authorizer.class.name": AUTHORIZER,
                            "super.users": "User:nobody",
                            "allow.everyone.if.no.acl.found": "true"})
    # the server's acceptor gives each Connection its peer's address; this one has no socket
    b.conn.session.client_address = "10.1.2.3"
    try:
        b.create("t")  # no ACL anywhere yet: allowed to everyone
        b.call(ApiKey.CREATE_ACLS, 3, {"creations": [
            {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
             "principal": "User:ANONYMOUS", "host": "10.1.2.3", "operation": 3,
             "permission_type": 3},
            {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
             "principal": "User:ANONYMOUS", "host": "10.9.9.9", "operation": 4,
             "permission_type": 3}]})
        cluster_ops, topic_ops = _metadata_ops(b)
        # READ from our address (and the DESCRIBE it implies); the WRITE is for another host
        assert topic_ops == (1 << 3) | (1 << 8)
        # the cluster has no ACL: allow.everyone.if.no.acl.found grants all it supports
        assert cluster_ops == supported_operations_bitfield(ResourceType.CLUSTER)
        assert len(SUPPORTED_OPERATIONS[ResourceType.CLUSTER]) == bin(cluster_ops).count("1")
        # DeleteRecords needs Delete, which no ACL of the topic grants: TOPIC_AUTHORIZATION_FAILED
        r = b.call(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "offset": 0}]}], "timeout": 1000})
        assert r.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    finally:
        b.close()
