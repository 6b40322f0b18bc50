"""Issue 16: a 3-node cluster whose every listener is SASL_SSL: the client and inter-broker
listener (SCRAM-SHA-512, credentials from `storage format --add-scram`) and the controller
listener (PLAIN, the users of its JAAS entry: SCRAM credentials live in the metadata log the
controllers must first agree on), with the StandardAuthorizer and the nodes' principal
User:admin a super user.

One cluster for the module: an RF=3 topic is created, produced to with acks=all and
consumed with confluent-kafka over SASL_SSL while all three nodes are restarted one after
the other (SIGTERM, start again): every acknowledged record is read back. On the same
cluster, a client without ACLs is refused what only the cluster's own nodes may do (its
forwarded CreateTopics is judged as itself, not as the forwarding broker; its
BrokerHeartbeat on the controller listener answers CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.entities import build
from odradek.broker.local_cluster import HOST, LocalCluster
from odradek.network import Channel, ClientSecurity
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class
from tests.support.broker import ODRADEK
from tests.support.tls_certs import CertAuthority
from tests.system.cluster_support import FAST, Cluster, wait_until

TOPIC = "secured-rf3"
PARTITIONS = 3
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')


class Secured:
    def __init__(self, cluster: Cluster, ca: CertAuthority) -> None:
        self.cluster = cluster
        self.ca = ca

    def client(self, user: str = "admin", **more: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.cluster.bootstrap_of(),
                "security.protocol": "SASL_SSL", "ssl.ca.location": str(self.ca.ca_pem),
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
                "sasl.password": USERS[user], **more}

    def metadata(self, topic: str | None = None) -> Any:
        # polled while nodes restart: their refused connections are expected, not logged
        return AdminClient(self.client(log_level=0)).list_topics(topic, timeout=30)

    def create(self, topic: str, user: str = "admin", partitions: int = 1, rf: int = 1,
               **configs: str) -> None:
        admin = AdminClient(self.client(user))  # kept until the answer is in
        admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(60)

    def wait_brokers(self, want: set[int], what: str) -> None:
        wait_until(lambda: set(self.metadata().brokers) >= want, what, 180, self.cluster)

    def wait_isr(self, size: int) -> None:
        def full() -> bool:
            parts = self.metadata(TOPIC).topics[TOPIC].partitions
            return len(parts) == PARTITIONS and all(
                len(p.isrs) >= size and p.leader >= 0 for p in parts.values())

        wait_until(full, f"every partition of {TOPIC} with an ISR of {size}", 180,
                   self.cluster)


def settings(ca: CertAuthority) -> dict[str, str]:
    server = ca.issue("localhost", server=True)
    return {
        **FAST,
        "listener.security.protocol.map": "BROKER:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "BROKER",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.bundle),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_pem),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.broker.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        # KIP-368 on the inter-node listeners: the nodes' sessions end after 10 s, so their
        # channels must renew them (at 7 s) while the test runs
        "listener.name.broker.connections.max.reauth.ms": "10000",
        "listener.name.controller.connections.max.reauth.ms": "10000",
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("sasl-ssl-cluster")
    ca = CertAuthority(root / "ca")
    local = LocalCluster.plan(root / "c", 3, settings=settings(ca))
    for node in local.nodes.values():  # every listener named and secured, none PLAINTEXT
        node.spec.settings["listeners"] = (f"BROKER://{HOST}:{node.spec.port},"
                                           f"CONTROLLER://{HOST}:{node.spec.controller_port}")
    local.save()
    scram = [arg for user, pw in USERS.items()
             for arg in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={pw}]")]
    for node in local.nodes.values():  # kafka-storage.sh format, with the first users
        node.write_config()
        done = subprocess.run([*ODRADEK, "storage", "format", "-t", local.cluster_id,
                               "--config", str(node.config_path), "--data-dir",
                               str(node.data_dir), *scram],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    cluster = Cluster(local)
    local.start()
    try:
        sec = Secured(cluster, ca)
        sec.wait_brokers({1, 2, 3}, "3 brokers in the metadata over SASL_SSL")
        yield sec
    finally:
        local.stop(timeout=60)
        local.kill_all()


@pytest.mark.timeout(900)
def test_rolling_restart_keeps_every_acked_record(secured: Secured) -> None:
    cluster = secured.cluster
    secured.create(TOPIC, partitions=PARTITIONS, rf=3, **{"min.insync.replicas": "2"})
    secured.wait_isr(3)
    producer = Producer(secured.client(**{"acks": "all", "enable.idempotence": True,
                                          "linger.ms": 5, "message.timeout.ms": 300000}))
    acked: set[int] = set()
    failed: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is None:
            acked.add(int(msg.value()))
        else:
            failed.append(str(err))

    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(TOPIC, str(i).encode(), on_delivery=report)
                i += 1
            except BufferError:
                pass
            producer.poll(0.005)  # a steady trickle: the restarts happen under writes

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    try:
        wait_until(lambda: len(acked) >= 200, "200 acks before the restarts", 120, cluster)
        for node_id in (1, 2, 3):
            before = len(acked)
            cluster.sigterm(node_id)  # a controlled shutdown: leadership moves away first
            cluster.restart(node_id)
            secured.wait_brokers({1, 2, 3}, f"node {node_id} back after its restart")
            secured.wait_isr(3)
            wait_until(lambda b=before: len(acked) > b + 100,
                       f"acks keep coming after node {node_id}'s restart", 180, cluster)
    finally:
        stop.set()
        writer.join(30)
    assert producer.flush(120) == 0
    assert not failed, failed[:5]

    consumer = Consumer(secured.client(**{"group.id": "secured-check",
                                          "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False}))
    consumer.subscribe([TOPIC])
    seen: set[int] = set()

    def all_read() -> bool:
        for m in consumer.consume(500, 1.0):
            if m.error() is None:
                seen.add(int(m.value()))
        return acked <= seen

    try:
        wait_until(all_read, f"every one of {len(acked)} acked records read back", 180,
                   cluster)
    finally:
        consumer.close()
    # no node's channel outlived its SASL session (the server would have closed it)
    expired = [n.node_id for n in cluster.nodes.values() if "SASL session expired" in n.log()]
    assert not expired, cluster.logs()


@pytest.mark.timeout(300)
def test_a_client_is_judged_as_itself(secured: Secured) -> None:
    # the broker forwards alice's CreateTopics to the controller in an Envelope: judged as
    # User:alice (no ACL), not as the forwarding broker's User:admin (a super user)
    with pytest.raises(KafkaException) as denied:
        secured.create("alice-topic", "alice")
    assert denied.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # as admin the same request is forwarded the same way and allowed
    secured.create("admin-topic")

    # what only the cluster's nodes send needs ClusterAction: alice, authenticated with
    # SCRAM on a controller listener over TLS, is refused a broker heartbeat
    node = secured.cluster.node(1)
    ctx = ssl.create_default_context(cafile=str(secured.ca.ca_pem))

    async def heartbeat() -> int:
        ch = Channel(HOST, int(node.spec.controller_port or 0), "alice-tool",
                     security=ClientSecurity("SASL_SSL", ctx, "SCRAM-SHA-512", "alice",
                                             USERS["alice"]))
        try:
            response = await ch.request(build(request_class(63, 1), {
                "broker_id": 2, "broker_epoch": 1, "current_metadata_offset": 0,
                "want_fence": False, "want_shut_down": True}), 30)
            return int(response.error_code)
        finally:
            await ch.close()

    assert asyncio.run(heartbeat()) == ErrorCode.cluster_authorization_failed
    secured.wait_brokers({1, 2, 3}, "every broker still registered")


def test_plaintext_and_wrong_password_refused(secured: Secured, tmp_path: Path) -> None:
    bad = secured.client("alice")
    bad["sasl.password"] = "wrong"
    with pytest.raises(KafkaException):
        AdminClient(bad).list_topics(timeout=3)
    plain = {"bootstrap.servers": secured.cluster.bootstrap_of()}
    with pytest.raises(KafkaException):
        AdminClient(plain).list_topics(timeout=3)
    secured.cluster.check_alive()
