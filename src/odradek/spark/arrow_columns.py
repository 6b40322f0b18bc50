"""Decoded columns (odradek.client.columnar) into an Arrow batch of the source schema.

Keys and values become Arrow binary-view arrays pointing into the fetched buffer (16 bytes
per record built with numpy), then one C cast copies their bytes into the plain binary
columns Spark expects. No Python object is made per record unless headers are asked for.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyarrow as pa

from odradek.client.columnar import Columns

_INLINE = 12  # a binary view holds up to 12 bytes itself, longer ones point into a buffer


@cache
def arrow_schema(include_headers: bool) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    from odradek.spark.schema import source_schema
    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


def binary_column(buf: bytes, pos: np.ndarray, length: np.ndarray) -> pa.Array:
    """Arrow binary from (position, length) pairs into `buf`; length -1 is null."""
    n = len(pos)
    valid = length >= 0
    if not valid.any():
        return pa.nulls(n, pa.binary())
    size = np.where(valid, length, 0)
    if n and int((pos + size).max()) > len(buf):
        raise ValueError("a key or value runs past the fetched buffer")
    views = np.zeros((n, 4), np.uint32)
    views[:, 0] = size
    # A view is (length, 12 inline bytes) up to 12 bytes, else (length, 4-byte prefix,
    # buffer 0, offset). Words are read unaligned at any byte through a strided view;
    # the few values too close to the buffer's end for a 12-byte read go byte by byte.
    room = len(buf) - 12
    near_end = pos > room
    words = np.ndarray((max(room + 9, 0),), "<u4", buf, 0, (1,)) if room >= 0 else None
    safe = np.flatnonzero(~near_end)
    if words is not None and len(safe):
        at, sz = pos[safe], size[safe]
        for k in range(3):
            keep = np.clip(sz - 4 * k, 0, 4).astype(np.uint64)
            mask = ((np.uint64(1) << (keep * np.uint64(8))) - np.uint64(1)).astype(np.uint32)
            views[safe, 1 + k] = words[at + 4 * k] & mask
    for i in np.flatnonzero(near_end).tolist():
        head = buf[int(pos[i]):int(pos[i]) + min(int(size[i]), 12)].ljust(12, b"\0")
        views[i, 1:] = np.frombuffer(head, "<u4")
    long = size > _INLINE
    views[long, 2] = 0  # buffer index
    views[long, 3] = pos[long]
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    out = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views),
                                                      pa.py_buffer(buf)])
    return out.cast(pa.binary())


def to_record_batch(cols: Columns, topic: str, partition: int,
                    include_headers: bool) -> pa.RecordBatch:
    n = len(cols)
    schema = arrow_schema(include_headers)
    name = topic.encode()
    topic_col = pa.Array.from_buffers(pa.string(), n, [
        None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(name)),
        pa.py_buffer(name * n)])
    columns = [
        binary_column(cols.buffer, cols.key_pos, cols.key_len),
        binary_column(cols.buffer, cols.value_pos, cols.value_len),
        topic_col,
        pa.array(np.full(n, partition, np.int32)),
        pa.array(cols.offsets),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n,
                              [None, pa.py_buffer(cols.timestamps * 1000)]),
        # Spark: 0 CreateTime, 1 LogAppendTime.
        pa.array(cols.log_append.astype(np.int32)),
    ]
    if include_headers:
        rows = cols.headers or [[] for _ in range(n)]
        columns.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in rows],
                                schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
