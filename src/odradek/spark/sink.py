"""`format("odradek")` as a sink: rows (value, key, headers, topic, partition) to topics.

At-least-once: each task produces its rows with an idempotent producer and flushes before it
reports success, so a finished task's rows are in the log; a re-executed task writes again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
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
    conf: dict[str, object] = {
        "linger.ms": 5,
        "batch.size": 1_000_000,
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


def _column(batch: pa.RecordBatch, name: str) -> list[object] | None:
    idx = batch.schema.get_field_index(name)
    return None if idx < 0 else batch.column(idx).to_pylist()


def write_rows(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    failures = _Failures()
    conf = producer_conf(opts.client)
    conf.update({"delivery.report.only.error": True, "on_delivery": failures})
    producer = Producer(conf)
    produce, poll = producer.produce, producer.poll
    rows = 0
    for batch in batches:
        n = batch.num_rows
        values = _column(batch, "value")
        keys = _column(batch, "key") or [None] * n
        topics = [opts.topic] * n if opts.topic else _column(batch, "topic")
        parts = _column(batch, "partition")
        headers = _column(batch, "headers")
        assert values is not None and topics is not None
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise ValueError("a row has a null 'topic' and no 'topic' option is set")
            kwargs: dict[str, object] = {}
            if parts is not None and parts[i] is not None:
                kwargs["partition"] = parts[i]
            if headers is not None and headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    produce(topic, values[i], keys[i], **kwargs)
                    break
                except BufferError:
                    poll(0.05)
        rows += n
        poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records were not delivered within 120 s")
    if failures.first is not None:
        raise KafkaException(failures.first)
    return rows


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Written(write_rows(self.opts, iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Written(write_rows(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None
