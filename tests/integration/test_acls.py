"""Issue 16, authorization with real clients: ACLs made with confluent-kafka's AdminClient
(CreateAcls/DescribeAcls/DeleteAcls), kept in the metadata log across a restart, and enforced
on produce, metadata, consume (group and topic), topic creation, configs and ACL admin.

Until SASL lands every PLAINTEXT client is User:ANONYMOUS: a first run with
super.users=User:ANONYMOUS sets topics and ACLs up, the second run (no super user) is checked
against them."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.describe_acls.v2 import request as da2
from kio.static.primitive import i8

from tests.support.broker import BrokerProcess
from tests.support.wire import Conn

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"


def _acl(rtype: ResourceType, name: str, op: AclOperation,
         perm: AclPermissionType = AclPermissionType.ALLOW,
         pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, ANON, "*", op, perm)


ACLS = [
    _acl(ResourceType.TOPIC, "pub-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
    _acl(ResourceType.TOPIC, "pub-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
    _acl(ResourceType.TOPIC, "pub-denied", AclOperation.WRITE, AclPermissionType.DENY),
    _acl(ResourceType.GROUP, "g-ok", AclOperation.READ),
]


def _produce_errors(bootstrap: str, topic: str) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000})
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    return errors


def _first_consumer_event(bootstrap: str, topic: str, group: str) -> object:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None:
                continue
            return msg.error() or msg.value()
        pytest.fail(f"no message nor error from {topic} for group {group}")
    finally:
        c.close()


def test_acls_enforced_after_restart(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data", settings={
        "authorizer.class.name": AUTHORIZER, "super.users": ANON})
    node.start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in
                                      ("pub-a", "pub-denied", "secret")]).values():
            f.result(30)
        for f in admin.create_acls(ACLS).values():
            assert f.result(30) is None
        found = admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY)).result(30)
        assert sorted(map(str, found)) == sorted(map(str, ACLS))
        assert _produce_errors(node.bootstrap, "secret") == [None]  # a super user
    finally:
        node.stop()

    node.settings.pop("super.users")
    node.start()
    try:
        bootstrap = node.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # Metadata: the topics it may describe (Write and Read imply Describe), not `secret`
        names = set(admin.list_topics(timeout=30).topics)
        assert {"pub-a", "pub-denied"} <= names and "secret" not in names
        # Produce: ALLOW by prefix; DENY of the literal beats it
        assert _produce_errors(bootstrap, "pub-a") == [None]
        (err,) = _produce_errors(bootstrap, "pub-denied")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # Consume: Read on the group and on the topic
        assert _first_consumer_event(bootstrap, "pub-a", "g-ok") == b"v"
        err = _first_consumer_event(bootstrap, "pub-a", "g-other")
        assert isinstance(err, KafkaError)
        assert err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        # CreateTopics without Create: TOPIC_AUTHORIZATION_FAILED
        with pytest.raises(KafkaException) as raised:
            admin.create_topics([NewTopic("pub-new", 1, 1)])["pub-new"].result(30)
        assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # DescribeConfigs without DescribeConfigs
        res = ConfigResource(ConfigResource.Type.TOPIC, "pub-a")
        with pytest.raises(KafkaException) as raised:
            admin.describe_configs([res])[res].result(30)
        assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # ACL admin needs Alter/Describe on the cluster
        with pytest.raises(KafkaException) as raised:
            next(iter(admin.create_acls([_acl(ResourceType.TOPIC, "x", AclOperation.READ)])
                 .values())).result(30)
        assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # DescribeAcls needs Describe on the cluster (librdkafka drops that answer's error
        # and returns an empty list, so it is read off the wire here)
        with Conn(node.port) as conn:
            r = conn.request(da2.DescribeAclsRequest(
                resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
                principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1)))
            assert r.error_code == KafkaError.CLUSTER_AUTHORIZATION_FAILED and not r.resources
        # the audit log names the denial as Kafka's authorizer logger does
        assert "Principal = User:ANONYMOUS is Denied operation = WRITE" in node.log()
    finally:
        node.stop()


def test_acl_apis_without_an_authorizer(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as raised:
        next(iter(admin.create_acls([_acl(ResourceType.TOPIC, "t", AclOperation.READ)])
             .values())).result(30)
    assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_delete_acls_and_wildcard(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data", settings={
        "authorizer.class.name": AUTHORIZER, "super.users": "User:nobody",
        "allow.everyone.if.no.acl.found": "true"})
    node.start()
    try:
        bootstrap = node.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = f"t-{uuid.uuid4().hex[:6]}"
        # no ACL anywhere and allow.everyone.if.no.acl.found: everything goes
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        assert _produce_errors(bootstrap, topic) == [None]
        wildcard_deny = _acl(ResourceType.TOPIC, "*", AclOperation.WRITE, AclPermissionType.DENY)
        cluster = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                             ANON, "*", AclOperation.ALTER, AclPermissionType.ALLOW)
        for f in admin.create_acls([wildcard_deny, cluster]).values():
            f.result(30)
        (err,) = _produce_errors(bootstrap, topic)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        deleted = admin.delete_acls([AclBindingFilter(
            ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, None, None,
            AclOperation.ANY, AclPermissionType.ANY)])
        assert [str(b) for f in deleted.values() for b in f.result(30)] == [str(wildcard_deny)]
        assert _produce_errors(bootstrap, topic) == [None]
    finally:
        node.stop()
