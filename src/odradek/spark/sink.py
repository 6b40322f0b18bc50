"""`format("odradek")` as a sink: rows (value, key, headers, topic, partition) to topics.

At-least-once (default): each task produces its rows with an idempotent producer and flushes
before it reports success, so a finished task's rows are in the log; a re-executed task writes
them again. Exactly-once (deliveryGuarantee=exactly-once): each task writes in a transaction
that also records the micro-batch id, see write_transactional.

The writers are Arrow writers: Spark hands write() pyarrow RecordBatches (no Row per record),
and odradek.spark.arrow_produce turns their columns into produce() calls.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.client.consumer_settings import consumer_settings
from odradek.spark.arrow_produce import produce_batches
from odradek.spark.options import OptionError, SinkOptions

LOG = logging.getLogger("odradek.spark")


def check_columns(schema: StructType, opts: SinkOptions) -> None:
    """Spark's Kafka sink rules: value required; key binary/string; topic unless the option."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}

    def expect(name: str, allowed: tuple[type[DataType], ...], what: str) -> None:
        if name in fields and not isinstance(fields[name], allowed):
            raise OptionError(f"column '{name}' must be {what}, got {fields[name].simpleString()}")

    if "value" not in fields:
        raise OptionError("required column 'value' not found (string or binary)")
    expect("value", (BinaryType, StringType), "string or binary")
    expect("key", (BinaryType, StringType), "string or binary")
    expect("topic", (StringType,), "string")
    expect("partition", (IntegerType,), "int")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType.fields[0].dataType, StringType)
              and isinstance(h.elementType.fields[1].dataType, (BinaryType, StringType)))
        if not ok:
            raise OptionError("column 'headers' must be array<struct<key:string,value:binary>>")
    if opts.topic is None and "topic" not in fields:
        raise OptionError("no topic to write to: set option 'topic' or give a 'topic' column")


def producer_conf(client: Mapping[str, str]) -> dict[str, object]:
    # Throughput defaults for a bulk writer; any kafka.* option overrides them.
    conf: dict[str, object] = {
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "batch.num.messages": 100_000,
        "compression.type": "none",
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": True,
    }
    conf.update(client)
    conf["logger"] = LOG
    return conf


@dataclass
class Written(WriterCommitMessage):
    rows: int


class _Failures:
    """Delivery reports arrive only for failures (delivery.report.only.error)."""

    def __init__(self) -> None:
        self.first: KafkaError | None = None
        self.count = 0

    def __call__(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.count += 1
            self.first = self.first or err


def write_rows(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """At-least-once: produce, flush, fail the task on any delivery error."""
    failures = _Failures()
    conf = producer_conf(opts.client)
    conf.update({"delivery.report.only.error": True, "on_delivery": failures})
    producer = Producer(conf)
    rows = produce_batches(producer, opts.topic, batches)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records were not delivered within 120 s")
    if failures.first is not None:
        raise KafkaException(failures.first)
    return rows


def write_transactional(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Exactly-once: this task's rows and its batch marker commit in one Kafka transaction.

    The transactional id is the query id plus the Spark partition, so a re-run of the task
    (same micro-batch after a crash, or the next one) fences the previous attempt and aborts
    whatever it left open. The batch id is committed inside the transaction as the offset of
    a marker group, so reading that offset tells whether this batch's rows are already in.
    """
    ctx = TaskContext.get()
    part = ctx.partitionId() if ctx else 0
    query_id = ctx.getLocalProperty("sql.streaming.queryId") if ctx else None
    batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
    tag = query_id or f"batch-{uuid.uuid4().hex}"
    conf = producer_conf(opts.client)
    conf["transactional.id"] = f"odradek-spark-{tag}-{part}"
    # No event per delivered record: a failed one makes commit_transaction fail anyway.
    conf["delivery.report.only.error"] = True
    producer = Producer(conf)
    producer.init_transactions(60)
    marker_group = f"odradek-spark-eos-{tag}-{part}"
    marker = TopicPartition(opts.topic or "", 0)
    done = -1
    consumer = None
    if query_id and batch is not None:
        consumer = Consumer({**consumer_settings(opts.client.get("bootstrap.servers"),
                                                 opts.client, group_id=marker_group,
                                                 isolation_level="read_committed"),
                             "enable.auto.commit": False, "logger": LOG})
        done = consumer.committed([marker], 60)[0].offset
    try:
        if batch is not None and done > int(batch):
            # A previous attempt of this micro-batch committed this partition's rows.
            for _ in batches:
                pass
            LOG.info("batch %s partition %d already written, skipping", batch, part)
            return 0
        producer.begin_transaction()
        try:
            rows = produce_batches(producer, opts.topic, batches)
            if consumer is not None and batch is not None:
                marker.offset = int(batch) + 1
                producer.send_offsets_to_transaction([marker], consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(120)
        except BaseException:
            producer.abort_transaction(60)
            raise
        return rows
    finally:
        if consumer is not None:
            consumer.close()


def _write(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    if opts.delivery == "exactly-once":
        return write_transactional(opts, batches)
    return write_rows(opts, batches)


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Written(_write(self.opts, iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Written(_write(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None
