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
    return _consume(conf, topic, len(values))


def _consume(conf: dict, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(300):  # up to 300 rounds (of up to 0.5 s): a deadline, not a timing
            if len(got) >= count:
                break
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
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
    got: list[bytes] = []
    for m in consumer:  # ends at N records, or after 15 s without one
        got.append(m.value)
        if len(got) == N:
            break
    consumer.close()
    assert got == [b"kp-%d" % i for i in range(N)]


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


# --- odradek's native fetcher (the Spark source's fast path) over TLS and SASL -------------


def _native_fetch(settings: dict, topic: str, want: int) -> bytes:
    from odradek.client.fetcher import PartitionFetcher, supports

    assert supports(settings)
    fetcher = PartitionFetcher(settings, topic, 0, read_committed=False)
    try:
        fetcher.send(0)
        got = fetcher.receive()
        assert got.error_code == 0
        return bytes(got.records)
    finally:
        fetcher.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_native_fetcher_over_sasl_ssl(secured: SecuredNode, mechanism: str) -> None:
    topic = f"native-{mechanism.lower()}"
    conf = secured.sasl_ssl(mechanism)
    producer = Producer({**conf, "partitioner": "murmur2"})
    for i in range(N):
        producer.produce(topic, b"native-value-%03d" % i, partition=0)
    assert producer.flush(30) == 0
    records = _native_fetch(conf, topic, N)
    for i in range(N):
        assert b"native-value-%03d" % i in records


def test_native_fetcher_over_mtls(secured: SecuredNode) -> None:
    producer = Producer(secured.mtls())
    producer.produce("native-mtls", b"over-mtls", partition=0)
    assert producer.flush(30) == 0
    assert b"over-mtls" in _native_fetch(secured.mtls(), "native-mtls", 1)


def test_native_fetcher_refused_credentials_fail_fast(secured: SecuredNode) -> None:
    from odradek.client.fetcher import PartitionFetcher, supports
    from odradek.client.secure_socket import AuthenticationFailed

    conf = secured.sasl_ssl("SCRAM-SHA-512", "admin", "wrong")
    fetcher = PartitionFetcher(conf, "native-mtls", 0, read_committed=False)
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        fetcher.send(0)
    # settings it cannot honour send the caller to confluent-kafka instead
    assert not supports({**conf, "sasl.mechanism": "OAUTHBEARER"})
    assert not supports({**conf, "ssl.keystore.location": "/x.p12"})


@pytest.mark.parametrize("which", ["SCRAM-SHA-256", "PLAIN", "mtls"])
def test_columnar_producer_over_tls(secured: SecuredNode, which: str) -> None:
    """The columnar producer (idempotent, acks=all) over SASL_SSL and mTLS: every record
    it was answered for is read back by confluent-kafka."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from odradek.client.batch_builder import build_columnar_batch, fixed_column
    from odradek.client.connection import fetch_supports
    from odradek.client.producer_columnar import ColumnarProducer, settings_from

    conf = secured.mtls() if which == "mtls" else secured.sasl_ssl(which)
    topic = f"columnar-{which.lower()}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    assert fetch_supports(conf)
    extra = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    settings = settings_from("all", {**extra, "enable.idempotence": "true"})
    values = [b"columnar-%02d" % i for i in range(6)]
    with ColumnarProducer(conf["bootstrap.servers"], topic, settings) as producer:
        producer.send([(i % 2, build_columnar_batch(fixed_column(v, 50), base_timestamp=0))
                       for i, v in enumerate(values)])
        producer.flush()
        assert (producer.acked_records, producer.failed_records) == (300, 0), \
            producer.first_error
    got = _consume(conf, topic, 300)
    assert sorted(set(got)) == values and len(got) == 300
    # settings it cannot honour are refused by name, not dropped
    with pytest.raises(ValueError, match="confluent-kafka"):
        settings_from("1", {**extra, "ssl.keystore.location": "/x.p12"})
