"""Issue 16: real clients over TLS and SASL against one node with every listener kind.

confluent-kafka, kafka-python, aiokafka and kcat produce and consume over SASL_SSL with
SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; confluent-kafka over mTLS (ssl.client.auth=required)
and with OAUTHBEARER tokens the test signs. Refusals are in test_security_refusals.py.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.integration.security_support import MECHANISMS, USERS, SecuredNode, start_secured

N = 20


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    s = start_secured(tmp_path_factory.mktemp("secured"))
    yield s
    assert s.node.stop() == 0, s.node.log()


def _produce_consume(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e))})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0, errors
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(300):
            if len(got) >= len(values):
                break
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_sasl_ssl(secured: SecuredNode, mechanism: str) -> None:
    topic = f"cf-{mechanism.lower()}"
    values = [f"{mechanism}-{i}".encode() for i in range(N)]
    assert _produce_consume(secured.sasl_ssl(mechanism), topic, values) == values


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_sasl_plaintext(secured: SecuredNode, mechanism: str) -> None:
    conf = {**secured.sasl_ssl(mechanism, "alice"),
            "bootstrap.servers": secured.addr("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT"}
    values = [b"sp-%d" % i for i in range(N)]
    assert _produce_consume(conf, f"sp-{mechanism.lower()}", values) == values


def test_confluent_mtls_required(secured: SecuredNode) -> None:
    values = [b"mtls-%d" % i for i in range(N)]
    assert _produce_consume(secured.mtls(), "mtls-topic", values) == values


def test_confluent_oauthbearer(secured: SecuredNode) -> None:
    def token(_config: str) -> tuple[str, float]:
        tok = secured.issuer.token("service-a", 3600)
        import time

        return tok, time.time() + 3600

    conf = {**secured.sasl_ssl("OAUTHBEARER"), "oauth_cb": token}
    conf.pop("sasl.username")
    conf.pop("sasl.password")
    values = [b"oauth-%d" % i for i in range(N)]
    assert _produce_consume(conf, "oauth-topic", values) == values


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_sasl_ssl(secured: SecuredNode, mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    common = dict(bootstrap_servers=secured.addr("SASL_SSL"), security_protocol="SASL_SSL",
                  ssl_cafile=str(secured.ca.ca_pem), sasl_mechanism=mechanism,
                  sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
    topic = f"kp-{mechanism.lower()}"
    producer = KafkaProducer(**common)
    for i in range(N):
        producer.send(topic, b"kp-%d" % i).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             group_id=f"kp-{uuid.uuid4().hex[:6]}", **common)
    got = [m.value for m in consumer]
    consumer.close()
    assert got[:N] == [b"kp-%d" % i for i in range(N)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_sasl_ssl(secured: SecuredNode, mechanism: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = f"aio-{mechanism.lower()}"

    async def run() -> list[bytes]:
        ctx: ssl.SSLContext = create_ssl_context(cafile=str(secured.ca.ca_pem))
        common = dict(bootstrap_servers=secured.addr("SASL_SSL"), security_protocol="SASL_SSL",
                      ssl_context=ctx, sasl_mechanism=mechanism,
                      sasl_plain_username="admin", sasl_plain_password=USERS["admin"])
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            for i in range(N):
                await producer.send_and_wait(topic, b"aio-%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest",
                                    group_id=f"aio-{uuid.uuid4().hex[:6]}", **common)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == N:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"aio-%d" % i for i in range(N)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_sasl_ssl(secured: SecuredNode, mechanism: str, tmp_path: Path) -> None:
    conf = secured.sasl_ssl(mechanism)
    args = ["-b", conf["bootstrap.servers"]]
    for key in ("security.protocol", "ssl.ca.location", "sasl.mechanism", "sasl.username",
                "sasl.password"):
        args += ["-X", f"{key}={conf[key]}"]
    topic = f"kcat-{mechanism.lower()}"
    lines = "\n".join(f"kcat-{i}" for i in range(N)) + "\n"
    subprocess.run(["kcat", *args, "-P", "-t", topic], input=lines, text=True, check=True,
                   timeout=60)
    out = subprocess.run(["kcat", *args, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-c", str(N)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [f"kcat-{i}" for i in range(N)]


def test_passwords_never_stored_or_logged(secured: SecuredNode) -> None:
    # a few authentications first, so the log has had its chances
    assert _produce_consume(secured.sasl_ssl("PLAIN"), "pw-check", [b"x"]) == [b"x"]
    for path in secured.node.data_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for password in USERS.values():
                assert password.encode() not in data, path
    for password in USERS.values():
        assert password not in secured.node.log()
