"""Helpers shared by the coordinators' internal topics (`__consumer_offsets`,
`__transaction_state`): how they are created on a node with fewer brokers than their
default replication factor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from odradek.metadata.controller import CreatableTopic
from odradek.protocol.records import BatchHeader, iter_batches


def internal_topic_spec(name: str, partitions: int, wanted_rf: int, live_brokers: int,
                        configs: dict[str, str]) -> CreatableTopic:
    """A compacted internal topic with replication factor min(wanted, live brokers): Kafka
    refuses to create it with fewer live brokers than its factor (default 3), which on a
    single node would leave no coordinator at all."""
    rf = min(wanted_rf, max(1, live_brokers))
    return CreatableTopic(name, partitions, rf,
                          configs={"cleanup.policy": "compact", **configs})


REPLAY_CHUNK_BYTES = 4 * 1024 * 1024


def committed_batches(part: Any) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a hosted partition from its log start to its high watermark, control
    batches included: what a coordinator replays at start. Blocking (reads the files)."""
    the_log = part.log
    offset, end = the_log.log_start_offset, part.high_watermark
    while offset < end:
        result = the_log.read(offset, REPLAY_CHUNK_BYTES, end)
        if result.region is None:
            return
        data = the_log.read_bytes(result.region)
        moved = False
        for header, view in iter_batches(data):
            if header.last_offset < offset:
                continue
            moved = True
            offset = header.last_offset + 1
            yield header, view
        if not moved:
            return
