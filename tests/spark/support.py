"""Topic set-up and ground truth for the Spark tests: what was produced, read back directly."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

_names = itertools.count()


@dataclass(frozen=True)
class Produced:
    key: bytes | None
    value: bytes
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...] = ()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def create_topic(bootstrap: str, name: str, partitions: int = 3) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(30)
    return name


def produce(bootstrap: str, topic: str, count: int, partitions: int = 3, *, base_ts: int = 1_700_000_000_000,
            start: int = 0, headers: bool = False) -> list[Produced]:
    """Records i = start..start+count-1 on partition i % partitions, timestamp base_ts + 10*i."""
    out: list[Produced] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

    def reporter(hdrs: tuple[tuple[str, bytes], ...]):
        def report(err: object, msg: object) -> None:
            assert err is None, err
            # Delivery reports do not carry headers: keep the ones that were sent.
            out.append(Produced(msg.key(), msg.value(), msg.topic(), msg.partition(),  # type: ignore[attr-defined]
                                msg.offset(), msg.timestamp()[1], hdrs))  # type: ignore[attr-defined]
        return report

    for i in range(start, start + count):
        hdrs = (("n", str(i).encode()), ("h2", b"x")) if headers else ()
        producer.produce(topic, value=f"value-{i}".encode(), key=f"key-{i}".encode(),
                         partition=i % partitions, timestamp=base_ts + 10 * i,
                         headers=list(hdrs) or None, on_delivery=reporter(hdrs))
    assert producer.flush(30) == 0
    return sorted(out, key=lambda r: (r.partition, r.offset))


def read_all(bootstrap: str, topic: str, partitions: int, *, committed: bool = True) -> list[tuple[bytes | None, bytes]]:
    """Every record of the topic as (key, value), read with a plain consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-test-check",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done: set[int] = set()
    rows: list[tuple[bytes | None, bytes]] = []
    idle = 0
    while len(done) < partitions and idle < 100:
        msgs = consumer.consume(1000, 0.2)
        idle = 0 if msgs else idle + 1
        for m in msgs:
            if m.error() is None:
                rows.append((m.key(), m.value()))
            elif m.error().code() == -191:  # _PARTITION_EOF
                done.add(m.partition())
    consumer.close()
    return rows
