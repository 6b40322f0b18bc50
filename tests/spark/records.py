"""Produce given values and read whole records (with headers) back, for the serde and example tests."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    headers: tuple[tuple[str, bytes], ...] = ()

    def header(self, name: str) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)


def send(bootstrap: str, topic: str,
         items: Iterable[tuple[bytes | None, bytes | None, int | None]]) -> list[Record]:
    """Produce (key, value, partition) items in order; the records as stored."""
    out: list[Record] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})

    def report(err: object, msg: object) -> None:
        assert err is None, err
        out.append(Record(msg.key(), msg.value(), msg.topic(), msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for key, value, partition in items:
        kwargs = {"partition": partition} if partition is not None else {}
        producer.produce(topic, value=value, key=key, on_delivery=report, **kwargs)
    assert producer.flush(30) == 0
    return sorted(out, key=lambda r: (r.partition, r.offset))


def read_records(bootstrap: str, topic: str, partitions: int) -> list[Record]:
    """Every committed record of the topic, headers included."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-serde-check",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done: set[int] = set()
    rows: list[Record] = []
    idle = 0
    while len(done) < partitions and idle < 100:
        msgs = consumer.consume(1000, 0.2)
        idle = 0 if msgs else idle + 1
        for m in msgs:
            if m.error() is None:
                rows.append(Record(m.key(), m.value(), m.topic(), m.partition(), m.offset(),
                                   tuple(m.headers() or ())))
            elif m.error().code() == -191:  # _PARTITION_EOF
                done.add(m.partition())
    consumer.close()
    assert len(done) == partitions, f"did not reach the end of {topic}"
    return rows
