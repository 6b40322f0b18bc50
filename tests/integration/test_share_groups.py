"""Share groups (issue 20, KIP-932) with the real share consumer (confluent-kafka's
ShareConsumer over librdkafka) against one node: more consumers than partitions each get
records and every record is delivered once accepted; a released record comes back with a
higher delivery count; a record released at the delivery-count limit is archived and never
comes back; what was acknowledged survives a restart of the node."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.support.broker import BrokerProcess

DEADLINE_S = 60


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # the delivery limit at its minimum (2) keeps the archive case short
    b = BrokerProcess(Path(tmp_path_factory.mktemp("share")) / "data",
                      settings={"group.share.delivery.count.limit": "2"})
    b.start(timeout=120)
    try:
        yield b
    finally:
        b.stop()


def _setup(node: BrokerProcess, topic: str, group: str, partitions: int, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest",
        incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result()
    p = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(n):
        p.produce(topic, str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def _consumer(node: BrokerProcess, group: str, topic: str, explicit: bool = False
              ) -> ShareConsumer:
    conf = {"bootstrap.servers": node.bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe([topic])
    return c


def _poll(c: ShareConsumer, timeout: float = 0.5) -> list:
    return [m for m in list(c.poll(timeout) or []) if m.error() is None]


def test_more_consumers_than_partitions_share_every_record(node: BrokerProcess) -> None:
    _setup(node, "sq-many", "sg-many", 2, 0)
    consumers = [_consumer(node, "sg-many", "sq-many") for _ in range(4)]
    seen: dict[int, list[bytes]] = {i: [] for i in range(4)}
    try:
        for c in consumers:  # each joins and opens its share session (a waiting fetch)
            _poll(c, 1.0)
        # one record at a time: each wakes the share fetches waiting then, so the records
        # spread over the members (all four hold both partitions)
        p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
        for i in range(200):
            p.produce("sq-many", str(i).encode(), partition=i % 2)
            p.flush(30)
        deadline = time.monotonic() + DEADLINE_S
        while sum(len(v) for v in seen.values()) < 200:
            if time.monotonic() > deadline:
                pytest.fail(f"got {[len(v) for v in seen.values()]} records per consumer")
            for i, c in enumerate(consumers):
                seen[i].extend(m.value() for m in _poll(c, 0.2))
    finally:
        for c in consumers:
            c.close()
    values = [v for vs in seen.values() for v in vs]
    assert sorted(values) == sorted(str(i).encode() for i in range(200))  # each exactly once
    assert all(seen.values()), "every consumer got records"


def test_release_redelivers_and_the_limit_archives(node: BrokerProcess) -> None:
    _setup(node, "sq-rel", "sg-rel", 1, 3)
    c = _consumer(node, "sg-rel", "sq-rel", explicit=True)
    deliveries: dict[bytes, list[int]] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        # record 0 is accepted; 1 released until the limit (2) archives it; 2 released once
        # and then accepted
        while True:
            if time.monotonic() > deadline:
                pytest.fail(f"deliveries: {deliveries}")
            for m in _poll(c):
                counts = deliveries.setdefault(m.value(), [])
                counts.append(m.delivery_count())
                ack = AcknowledgeType.ACCEPT
                if m.value() == b"1" or (m.value() == b"2" and len(counts) == 1):
                    ack = AcknowledgeType.RELEASE
                c.acknowledge(m, ack)
            c.commit_sync()
            if len(deliveries.get(b"1", [])) >= 2 and len(deliveries.get(b"2", [])) >= 2:
                break
        # nothing more comes: 1 was archived at its second release
        end = time.monotonic() + 3
        while time.monotonic() < end:
            more = _poll(c)
            assert not more, [m.value() for m in more]
    finally:
        c.close()
    assert deliveries[b"0"] == [1]
    assert deliveries[b"1"] == [1, 2]
    assert deliveries[b"2"] == [1, 2]


def test_acknowledged_state_survives_a_restart(node: BrokerProcess) -> None:
    _setup(node, "sq-dur", "sg-dur", 1, 10)
    c = _consumer(node, "sg-dur", "sq-dur", explicit=True)
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 10:
            if time.monotonic() > deadline:
                pytest.fail(f"got {got}")
            for m in _poll(c):
                # the first five are accepted, the rest released for later
                n = int(m.value())
                if n < 5:
                    got.append(m.value())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                else:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync()
            if len(got) == 5:
                break
    finally:
        c.close()
    node.stop()
    node.start(timeout=120)
    c = _consumer(node, "sg-dur", "sq-dur")
    after: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(after) < 5:
            if time.monotonic() > deadline:
                pytest.fail(f"after the restart got {after}")
            after.extend(m.value() for m in _poll(c))
    finally:
        c.close()
    assert sorted(after) == [str(i).encode() for i in range(5, 10)]
