"""Issue 17: broker-side schema ID validation (confluent.value.schema.validation and .key.):
records whose id is not registered under the topic's subject are refused with INVALID_RECORD
naming them; good ones, tombstones and other topics pass; a registry that cannot be reached
fails the produce retriably and appends nothing."""

from __future__ import annotations

import json
import struct
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, free_port

CT = "application/vnd.schemaregistry.v1+json"


def _register(url: str, subject: str, schema: dict[str, Any]) -> int:
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    req = urllib.request.Request(f"{url}/subjects/{subject}/versions", data=body, method="POST",
                                 headers={"Content-Type": CT})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(json.loads(resp.read())["id"])


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        f.result(30)


def _produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]],
             ) -> list[KafkaError | None]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 30_000, "retries": 0,
                  "batch.num.messages": 1000})
    results: dict[int, KafkaError | None] = {}
    for i, (key, value) in enumerate(items):
        p.produce(topic, partition=0, key=key, value=value,
                  on_delivery=lambda e, m, i=i: results.__setitem__(i, e))
    assert p.flush(60) == 0
    return [results[i] for i in range(len(items))]


def _end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        c.close()


def _wire(schema_id: int, payload: bytes = b"\x02a") -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    url = f"http://127.0.0.1:{free_port()}"
    n = BrokerProcess(tmp_path_factory.mktemp("sv") / "data",
                      settings={"schema.registry.listeners": url})
    n.start(timeout=120)
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/subjects", timeout=5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"the registry at {url} never answered:\n{n.log()}")
            time.sleep(0.2)
    yield n, url
    n.stop()


@pytest.mark.timeout(180)
def test_values_must_carry_an_id_of_their_subject(node: tuple[BrokerProcess, str]) -> None:
    broker, url = node
    topic = "orders"
    _create(broker.bootstrap, topic, {"confluent.value.schema.validation": "true"})
    good = _register(url, f"{topic}-value", {"type": "string"})
    foreign = _register(url, "elsewhere-value", {"type": "int"})
    items: list[tuple[bytes | None, bytes | None]] = [
        (b"k0", _wire(good)),        # registered under orders-value
        (b"k1", b"plain bytes"),     # not the wire format
        (b"k2", _wire(foreign)),     # an id of another subject
        (b"k3", None),               # a tombstone passes
        (None, _wire(good)),         # a null key passes (keys are not validated here)
        (b"k5", _wire(999_999)),     # no such id
    ]
    errors = _produce(broker.bootstrap, topic, items)
    bad = {i for i, e in enumerate(errors) if e is not None and e.code() == KafkaError.INVALID_RECORD}
    assert bad == {1, 2, 5}
    # the batch is refused whole (Kafka's rule for record errors): nothing was appended
    assert _end_offset(broker.bootstrap, topic) == 0

    # the good records alone are taken
    ok = _produce(broker.bootstrap, topic, [items[0], items[3], items[4]])
    assert all(e is None for e in ok), ok
    assert _end_offset(broker.bootstrap, topic) == 3

    # a topic without the config takes anything, as before
    _create(broker.bootstrap, "free", {})
    assert _produce(broker.bootstrap, "free", [(b"k", b"plain")])[0] is None


@pytest.mark.timeout(180)
def test_key_validation_and_a_schema_registered_after_a_refusal(
        node: tuple[BrokerProcess, str]) -> None:
    broker, url = node
    topic = "keyed"
    _create(broker.bootstrap, topic, {"confluent.key.schema.validation": "true"})
    later = _register(url, "later-value", {"type": "long"})
    errors = _produce(broker.bootstrap, topic, [(_wire(later), b"v")])
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    # once the id is registered under keyed-key, the same record is taken (a refused id is
    # cached only briefly)
    assert _register(url, f"{topic}-key", {"type": "long"}) == later
    deadline = time.monotonic() + 30
    while True:
        errors = _produce(broker.bootstrap, topic, [(_wire(later), b"v")])
        if errors[0] is None:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"a newly registered key schema is still refused: {errors}")
        time.sleep(0.5)


@pytest.mark.timeout(180)
def test_unknown_strategies_are_refused_and_a_dead_registry_appends_nothing(
        tmp_path: Path) -> None:
    from confluent_kafka.admin import ConfigResource
    dead = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(tmp_path / "d", settings={"confluent.schema.registry.url": dead})
    broker.start(timeout=120)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "guarded"
        _create(broker.bootstrap, topic, {"confluent.value.schema.validation": "true"})
        bad = ConfigResource("topic", topic, set_config={
            "confluent.value.subject.name.strategy":
                "io.confluent.kafka.serializers.subject.RecordNameStrategy"})
        with pytest.raises(Exception, match="TopicNameStrategy"):
            admin.alter_configs([bad])[bad].result(30)
        errors = _produce(broker.bootstrap, topic, [(b"k", _wire(1))])
        assert errors[0] is not None
        assert errors[0].code() == KafkaError.REQUEST_TIMED_OUT
        assert _end_offset(broker.bootstrap, topic) == 0
        assert "schema validation" in broker.log()
    finally:
        broker.stop()
