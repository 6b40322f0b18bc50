"""Read one partition from offset 0 up to an end offset with confluent-kafka, as stored."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from odradek.client import consumer_settings

Rec = tuple[int, bytes | None, bytes | None]


def read_partition(bootstrap: str, topic: str, end: int, *, partition: int = 0,
                   group: str = "partition-reader", timeout: float = 60.0) -> list[Rec]:
    """(offset, key, value) of every record below `end`; stops early once the position passes
    `end` (compaction leaves gaps, so the last offset may never be delivered)."""
    c = Consumer(consumer_settings(bootstrap, group_id=group, enable_auto_commit=False,
                                   auto_offset_reset="earliest"))
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is None:
                if c.position([TopicPartition(topic, partition)])[0].offset >= end:
                    break
                continue
            assert m.error() is None, m.error()
            out.append((m.offset(), m.key(), m.value()))
            if m.offset() >= end - 1:
                break
    finally:
        c.close()
    return out
