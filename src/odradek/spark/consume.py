"""Task side of the source: read one offset range with confluent-kafka, yield Arrow batches.

Runs in a Spark Python worker. The consumer is assigned the exact start offset and never
joins or commits to a group: Spark's checkpoint owns the offsets.
"""

from __future__ import annotations

import logging
import time
import uuid
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from functools import cache

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from odradek.client.consumer_settings import consumer_settings
from odradek.client.fetcher import supports
from odradek.spark.data_loss import resume_after_loss
from odradek.spark.planner import TopicAuthorizationError
from odradek.spark.ranges import OffsetRange
from odradek.spark.schema import source_schema

LOG = logging.getLogger("odradek.spark")
BATCH_ROWS = 50_000
_LOSS_CODES = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}


def consumer_conf(client: Mapping[str, str]) -> dict[str, object]:
    # The shipped fetch settings (client.consumer_settings, the one place for them), then the
    # task's own: librdkafka wants a group id even for assign() (a fresh one per task joins
    # nothing), and short fetch waits keep its fetcher ahead of a task reading a range known
    # to exist. The user's kafka.* options come next and win.
    conf = consumer_settings(client.get("bootstrap.servers"), client,
                             group_id=f"odradek-spark-{uuid.uuid4().hex[:12]}",
                             isolation_level="read_committed", fetch_wait_max_ms=10)
    conf.update({
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # An out-of-range start is data loss; "error" makes librdkafka say so instead of moving.
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "logger": LOG,
    })
    return conf


@cache
def _arrow_schema(include_headers: bool) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


def to_batch(msgs: list[Message], topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    n = len(msgs)
    # (type, ms) pairs into one int64 matrix: a C loop instead of two Python ones.
    stamps = np.array([m.timestamp() for m in msgs], dtype=np.int64).reshape(n, 2)
    first, last = msgs[0].offset(), msgs[-1].offset()
    # Offsets rise strictly, so first..last with n records has no gap (a compacted log has).
    offsets = (np.arange(first, first + n, dtype=np.int64) if last - first + 1 == n
               else np.array([m.offset() for m in msgs], dtype=np.int64))
    columns = [
        pa.array([m.key() for m in msgs], pa.binary()),
        pa.array([m.value() for m in msgs], pa.binary()),
        pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), [topic]).cast(pa.string()),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(offsets),
        pa.array(stamps[:, 1] * 1000).cast(pa.timestamp("us", tz="UTC")),
        # confluent-kafka: 0 not available, 1 create time, 2 log append time; Spark: -1, 0, 1.
        pa.array((stamps[:, 0] - 1).astype(np.int32)),
    ]
    schema = _arrow_schema(include_headers)
    if include_headers:
        columns.append(pa.array(
            [[{"key": k, "value": v} for k, v in (m.headers() or ())] for m in msgs],
            schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(r: OffsetRange) -> Iterator[pa.RecordBatch]:
    if r.size <= 0:
        return
    if r.fetch_path == "native" and supports(r.client):
        from odradek.spark.fetch_read import read_range_native
        yield from read_range_native(r)
        return
    consumer = Consumer(consumer_conf(r.client))
    try:
        yield from _read(consumer, r)
    finally:
        consumer.close()


def _read(consumer: Consumer, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    where = f"{r.topic}-{r.partition}"
    consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
    pos = r.start
    deadline = time.monotonic() + r.poll_timeout_ms / 1000
    while pos < r.end:
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {r.poll_timeout_ms} ms reading {where} at offset "
                               f"{pos} (range ends at {r.end}); see kafkaConsumer.pollTimeoutMs")
        msgs = consumer.consume(num_messages=min(BATCH_ROWS, r.end - pos), timeout=0.5)
        if not msgs:
            continue
        good = msgs
        if any(m.error() is not None for m in msgs):
            good = []
            for m in msgs:
                err = m.error()
                if err is None:
                    good.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:
                    # The end of what is readable (past control and aborted records too).
                    if m.offset() >= r.end:
                        pos = r.end
                elif err.code() in _LOSS_CODES:
                    pos = _data_loss(consumer, r, pos)
                    good = []
                    break
                elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    # not fatal to librdkafka, which would retry until the poll timeout
                    raise TopicAuthorizationError([r.topic])
                elif not err.retriable() and err.fatal():
                    raise RuntimeError(f"reading {where}: {err.str()}")
        if good:
            deadline = time.monotonic() + r.poll_timeout_ms / 1000
            last = good[-1].offset()
            if last >= r.end:
                offsets = [m.offset() for m in good]
                good = good[:bisect_left(offsets, r.end)]
            if good:
                yield to_batch(good, r.topic, r.partition, r.include_headers)
            pos = max(pos, last + 1)


def _data_loss(consumer: Consumer, r: OffsetRange, pos: int) -> int:
    """The records at `pos` are gone: fail, or the offset to go on from (assigned)."""
    low, high = consumer.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=30)
    pos = resume_after_loss(r, pos, low, high)
    if pos < r.end:
        consumer.assign([TopicPartition(r.topic, r.partition, pos)])
    return pos
