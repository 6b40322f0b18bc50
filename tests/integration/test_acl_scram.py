"""Issue 16 end to end: ACLs against SCRAM users (the `sasl` half's authentication, this
half's authorization). An admin on the PLAINTEXT listener (User:ANONYMOUS, a super user
here) makes the users with AlterUserScramCredentials and the ACLs; alice, over
SASL_PLAINTEXT with SCRAM-SHA-256, may write one topic and not another, with confluent-kafka
and kafka-python alike; bob, with no ACL, may write neither. The security admin commands
(`odradek acl|quota|user`) over SASL as alice: refused with CLUSTER_AUTHORIZATION_FAILED until
she is granted the cluster rights Kafka asks for, never an empty listing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NamedTuple

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


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    """The node and its SASL_PLAINTEXT address; alice and bob are SCRAM users, alice may
    write s-ok."""
    sasl_port = free_port()
    node = BrokerProcess(tmp_path_factory.mktemp("aclscram") / "data")
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
        yield node, f"127.0.0.1:{sasl_port}"
    finally:
        node.stop()


def test_scram_users_and_acls(node: tuple[BrokerProcess, str]) -> None:
    broker, secured = node
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
    assert "Principal = User:alice is Denied operation = DESCRIBE" in broker.log()
    assert "Principal = User:bob is Denied operation = DESCRIBE" in broker.log()


class _Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def _as_alice(*args: str, bootstrap: str) -> _Ran:
    """The `odradek` command in this process (typer's runner: no interpreter start per call)."""
    from typer.testing import CliRunner

    from odradek.cli.main import app

    x = [arg for k, v in _sasl("alice").items() for arg in ("-X", f"{k}={v}")]
    got = CliRunner().invoke(app, [*args, "-b", bootstrap, *x])
    if got.exception is not None and not isinstance(got.exception, SystemExit):
        raise got.exception
    return _Ran(got.exit_code, got.stdout, got.stderr)


def test_security_admin_commands_need_cluster_rights(node: tuple[BrokerProcess, str]) -> None:
    """Kafka's checks: DescribeAcls and DescribeUserScramCredentials need Describe on the
    cluster, DescribeClientQuotas DescribeConfigs, CreateAcls Alter, AlterClientQuotas
    AlterConfigs. `odradek acl list` shows the refusal (librdkafka would show no ACLs)."""
    broker, secured = node
    denied = "CLUSTER_AUTHORIZATION_FAILED"
    for args in (("acl", "list"), ("quota", "describe"), ("user", "list"),
                 ("acl", "create", "--allow-principal", "User:alice", "--operation", "Read",
                  "--topic", "s-no"),
                 ("quota", "set", "--user", "alice", "--add", "producer_byte_rate=1048576")):
        out = _as_alice(*args, bootstrap=secured)
        assert out.returncode == 1 and denied in out.stderr, (args, out.stdout, out.stderr)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_acls([AclBinding(
            ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice",
            "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)]).values():
        f.result(30)
    # the grants reach the SASL listener's authorizer through the metadata log: wait for them
    deadline = time.monotonic() + 60
    while (listed := _as_alice("acl", "list", "--topic", "s-ok", bootstrap=secured)).returncode:
        if time.monotonic() > deadline:
            pytest.fail(f"alice's Describe on the cluster never took effect: {listed.stderr}")
        time.sleep(0.5)
    assert "User:alice" in listed.stdout and "WRITE" in listed.stdout, listed.stdout
    quotas = _as_alice("quota", "describe", bootstrap=secured)
    assert quotas.returncode == 0, quotas.stderr
    users = _as_alice("user", "list", bootstrap=secured)
    assert users.returncode == 0 and "alice" in users.stdout, users.stderr
    # still no Alter: creating an ACL stays refused
    made = _as_alice("acl", "create", "--allow-principal", "User:alice", "--operation", "Read",
                     "--topic", "s-no", bootstrap=secured)
    assert made.returncode == 1 and denied in made.stderr, made.stderr
