"""Produce the rows of Arrow record batches (the sink's input) through a confluent-kafka Producer.

The sink's cost is dominated by the per-row produce() call (~1.2 us in librdkafka), so the
Python around it is kept to a tight zip over whole columns: each column is turned into a
Python list once per slice, string columns are first cast to binary (bytes objects are cheaper
to make than str and are what the producer sends anyway), absent or all-null columns cost
nothing per row, and the general path (per-row topic, partition, headers) is taken only when
the batch has such a column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer

# Rows per slice: bounds the Python lists alive at once and how long delivery events wait
# for poll() (Spark's Arrow batches are 10k rows by default, so usually one slice a batch).
SLICE_ROWS = 10_000
# Back-off when librdkafka's queue is full (queue.buffering.max.messages): serve events
# until there is room again.
_FULL_WAIT_S = 0.05

Produce = Callable[..., None]


def _columns(batch: pa.RecordBatch) -> dict[str, pa.Array]:
    # Spark resolves column names case-insensitively, like check_columns does.
    return {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}


def _as_bytes(col: pa.Array) -> list[Any]:
    t = col.type
    if pa.types.is_string(t):
        col = col.cast(pa.binary())
    elif pa.types.is_large_string(t):
        col = col.cast(pa.large_binary())
    elif pa.types.is_string_view(t):
        col = col.cast(pa.binary_view())
    return col.to_pylist()


def _present(col: pa.Array | None) -> bool:
    """A column worth reading row by row: there and not entirely null."""
    return col is not None and col.null_count < len(col)


def _retry(produce: Produce, poll: Callable[[float], int], *args: Any, **kwargs: Any) -> None:
    while True:
        poll(_FULL_WAIT_S)
        try:
            produce(*args, **kwargs)
            return
        except BufferError:
            continue


def _headers(row: list[dict[str, Any]] | None) -> list[tuple[str, Any]] | None:
    if not row:
        return None
    return [(h["key"], h["value"]) for h in row]


def _produce_slice(producer: Producer, topic: str | None, batch: pa.RecordBatch) -> None:
    produce, poll = producer.produce, producer.poll
    cols = _columns(batch)
    values = _as_bytes(cols["value"])
    key_col = cols.get("key")
    keys: Iterable[Any] = _as_bytes(key_col) if key_col is not None and _present(key_col) else ()
    topic_col = None if topic is not None else cols.get("topic")
    part_col = cols.get("partition")
    head_col = cols.get("headers")
    general = topic_col is not None or _present(part_col) or _present(head_col)

    if not general:
        assert topic is not None
        if keys:
            for value, key in zip(values, keys, strict=True):
                try:
                    produce(topic, value, key)
                except BufferError:
                    _retry(produce, poll, topic, value, key)
        else:
            for value in values:
                try:
                    produce(topic, value)
                except BufferError:
                    _retry(produce, poll, topic, value)
        return

    n = batch.num_rows
    if topic_col is not None:
        if topic_col.null_count:
            raise ValueError("a row has a null 'topic' and no 'topic' option is set")
        topics: Iterable[Any] = topic_col.to_pylist()
    else:
        topics = repeat(topic, n)
    # -1 is librdkafka's "unassigned": the partitioner picks, as for a null partition.
    parts: Iterable[Any] = (
        [-1 if p is None else p for p in part_col.to_pylist()] if _present(part_col)
        else repeat(-1, n))
    keys = keys or repeat(None, n)
    heads: Iterable[Any] = (
        head_col.to_pylist() if head_col is not None and _present(head_col) else repeat(None, n))
    for t, value, key, part, head in zip(topics, values, keys, parts, heads, strict=True):
        kwargs = {"headers": _headers(head)} if head else {}
        try:
            produce(t, value, key, part, **kwargs)
        except BufferError:
            _retry(produce, poll, t, value, key, part, **kwargs)


def produce_batches(producer: Producer, topic: str | None,
                    batches: Iterator[pa.RecordBatch]) -> int:
    """Queue every row of `batches` on `producer` (topic option `topic` overrides the column);
    serves delivery events between slices and returns the number of rows. The caller flushes
    (or commits the transaction) and checks delivery errors."""
    poll = producer.poll
    rows = 0
    for batch in batches:
        n = batch.num_rows
        for start in range(0, n, SLICE_ROWS):
            _produce_slice(producer, topic, batch.slice(start, SLICE_ROWS))
            poll(0)
        rows += n
    return rows
