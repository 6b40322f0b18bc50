"""Issue 16 end to end: ACLs against SCRAM users (the `sasl` half's authentication, this
half's authorization). An admin on the PLAINTEXT listener (User:ANONYMOUS, a super user
here) makes the users with AlterUserScramCredentials and the ACLs; alice, over
SASL_PLAINTEXT with SCRAM-SHA-256, may write one topic and not another, with confluent-kafka
and kafka-python alike; bob, with no ACL, may write neither."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError

from tests.support.broker import BrokerProcess, free_port

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _sasl(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


def _produce(bootstrap: str, user: str, topic: str) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, **_sasl(user)})
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 1
    return errors[0]


def test_scram_users_and_acls(tmp_path: Path) -> None:
    sasl_port = free_port()
    node = BrokerProcess(tmp_path / "data")
    node.settings.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    node.start(timeout=180)
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("s-ok", "s-no")]).values():
            f.result(120)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        for f in admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(u, info, f"{u}-secret".encode())
                for u in ("alice", "bob")]).values():
            f.result(30)
        for f in admin.create_acls([AclBinding(
                ResourceType.TOPIC, "s-ok", ResourcePatternType.LITERAL, "User:alice", "*",
                AclOperation.WRITE, AclPermissionType.ALLOW)]).values():
            f.result(30)

        secured = f"127.0.0.1:{sasl_port}"
        assert _produce(secured, "alice", "s-ok") is None
        err = _produce(secured, "alice", "s-no")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        err = _produce(secured, "bob", "s-ok")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        kp = KafkaProducer(bootstrap_servers=secured, security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                           sasl_plain_password="alice-secret", retries=0, max_block_ms=20000)
        try:
            kp.send("s-ok", b"k").get(30)
            with pytest.raises(TopicAuthorizationFailedError):
                kp.send("s-no", b"k").get(30)
        finally:
            kp.close(5)
        # the clients ask Metadata first: the denial logged is Describe (Write implies it)
        assert "Principal = User:alice is Denied operation = DESCRIBE" in node.log()
        assert "Principal = User:bob is Denied operation = DESCRIBE" in node.log()
    finally:
        node.stop()
