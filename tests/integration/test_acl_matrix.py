"""Issue 16's ACL matrix with real clients: topics, groups and transactional ids each with an
ALLOW (literal, prefixed or `*`), a DENY that beats it, and no ACL; idempotent and
transactional producers (confluent-kafka), a consumer group (kafka-python), and the admin
listing (`odradek acl list`).

Every PLAINTEXT client is User:ANONYMOUS until SASL lands: the first run (super user) sets the
ACLs up, the second (no super user) is checked against them."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from tests.integration.cli_support import ok
from tests.support.broker import BrokerProcess

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"


def _acl(b: str, *args: str) -> None:
    ok("acl", "create", "--allow-principal" if "--deny" not in args else "--deny-principal",
       ANON, *[a for a in args if a != "--deny"], bootstrap=b)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess:
    node = BrokerProcess(tmp_path_factory.mktemp("matrix") / "data", settings={
        "authorizer.class.name": AUTHORIZER, "super.users": ANON,
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        "offsets.topic.replication.factor": "1"})
    node.start()
    b = node.bootstrap
    try:
        admin = AdminClient({"bootstrap.servers": b})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in
                                      ("m-lit", "m-pre-a", "m-pre-denied", "m-none")]).values():
            f.result(30)
        _acl(b, "--operation", "Write", "--operation", "Read", "--topic", "m-lit")
        _acl(b, "--operation", "All", "--topic", "m-pre-", "--resource-pattern-type", "prefixed")
        _acl(b, "--deny", "--operation", "Write", "--topic", "m-pre-denied")
        _acl(b, "--operation", "Read", "--group", "mg-", "--resource-pattern-type", "prefixed")
        _acl(b, "--deny", "--operation", "Read", "--group", "mg-denied")
        _acl(b, "--operation", "Write", "--transactional-id", "*")
        _acl(b, "--operation", "Describe", "--cluster")  # for DescribeAcls (acl list)
        _acl(b, "--deny", "--operation", "Write", "--transactional-id", "tx-denied")
        # the coordinators' topics exist before the super user goes
        p = Producer({"bootstrap.servers": b, "transactional.id": "tx-setup"})
        p.init_transactions(30)
        c = KafkaConsumer("m-lit", bootstrap_servers=b, group_id="mg-setup",
                          consumer_timeout_ms=3000)
        list(c)
        c.close()
    finally:
        node.stop()
    node.settings.pop("super.users")
    node.start()
    yield node
    node.stop()


def test_acl_listing(node: BrokerProcess) -> None:
    rows = json.loads(ok("acl", "list", "--format", "json", bootstrap=node.bootstrap))
    got = {(r["resource_type"], r["name"], r["pattern"], r["operation"], r["permission"])
           for r in rows}
    assert ("TOPIC", "m-pre-", "PREFIXED", "ALL", "ALLOW") in got
    assert ("TRANSACTIONAL_ID", "*", "LITERAL", "WRITE", "ALLOW") in got
    assert ("GROUP", "mg-denied", "LITERAL", "READ", "DENY") in got
    one = json.loads(ok("acl", "list", "--topic", "m-pre-denied", "--resource-pattern-type",
                        "match", "--format", "json", bootstrap=node.bootstrap))
    assert {(r["name"], r["permission"]) for r in one} == {("m-pre-", "ALLOW"),
                                                           ("m-pre-denied", "DENY")}


def test_topics_with_kafka_python(node: BrokerProcess) -> None:
    p = KafkaProducer(bootstrap_servers=node.bootstrap, retries=0, max_block_ms=20000)
    try:
        p.send("m-lit", b"v").get(30)  # literal ALLOW
        p.send("m-pre-a", b"v").get(30)  # prefixed ALLOW
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("m-pre-denied", b"v").get(30)  # DENY beats the prefixed ALLOW
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("m-none", b"v").get(30)  # no ACL
    finally:
        p.close(5)


def _consume(bootstrap: str, group: str) -> list[bytes]:
    c = KafkaConsumer("m-pre-a", bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = c.poll(1000)
            if got:
                return [r.value for rs in got.values() for r in rs]
        pytest.fail(f"group {group} read nothing")
    finally:
        c.close()


def test_groups_with_kafka_python(node: BrokerProcess) -> None:
    p = KafkaProducer(bootstrap_servers=node.bootstrap)
    p.send("m-pre-a", b"g").get(30)
    p.close(5)
    assert _consume(node.bootstrap, "mg-ok")  # prefixed ALLOW on the group
    for group in ("mg-denied", "other-group"):  # DENY; no ACL
        with pytest.raises(GroupAuthorizationFailedError):
            _consume(node.bootstrap, group)


def test_idempotent_and_transactional_producers(node: BrokerProcess) -> None:
    b = node.bootstrap
    # idempotence: no IdempotentWrite on the cluster, but Write on some topic (KIP-679)
    idem = Producer({"bootstrap.servers": b, "enable.idempotence": True})
    errors: list[object] = []
    idem.produce("m-lit", b"i", on_delivery=lambda err, msg: errors.append(err))
    idem.flush(30)
    assert errors == [None]
    # Write on the transactional id by `*`; the literal DENY beats it
    tx = Producer({"bootstrap.servers": b, "transactional.id": "tx-ok"})
    tx.init_transactions(30)
    tx.begin_transaction()
    tx.produce("m-pre-a", b"t")
    tx.commit_transaction(30)
    denied = Producer({"bootstrap.servers": b, "transactional.id": "tx-denied"})
    with pytest.raises(KafkaException) as raised:
        denied.init_transactions(30)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # a transaction that writes a topic it may not: the send fails, the transaction aborts
    tx2 = Producer({"bootstrap.servers": b, "transactional.id": "tx-ok-2"})
    tx2.init_transactions(30)
    tx2.begin_transaction()
    failures: list[object] = []
    tx2.produce("m-none", b"t", on_delivery=lambda err, msg: failures.append(err))
    with pytest.raises(KafkaException):
        tx2.commit_transaction(30)
    tx2.abort_transaction(30)
