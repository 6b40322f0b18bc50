"""Task side of the source, native path: Fetch requests over a socket, record batches
decoded straight into Arrow columns (no client object per record).

Used when the client settings need only a plaintext connection (odradek.client.fetcher.
supports); otherwise consume.py reads through confluent-kafka. Same contract as
consume.read_range: exactly the offsets of the range that hold data records, committed ones
only under read_committed, data loss failing or skipped by failOnDataLoss.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa

from odradek.client.columnar import columns, select
from odradek.client.fetcher import PartitionFetcher
from odradek.spark.arrow_columns import to_record_batch
from odradek.spark.data_loss import resume_after_loss
from odradek.spark.planner import Planner, TopicAuthorizationError, isolation
from odradek.spark.ranges import OffsetRange

LOG = logging.getLogger("odradek.spark")
OFFSET_OUT_OF_RANGE = 1
TOPIC_AUTHORIZATION_FAILED = 29
# Kafka's retriable partition errors while leadership moves or a topic is being created.
_RETRY = {3, 5, 6, 9, 56, 74, 75, 78}
# Per fetch: big enough that per-request costs vanish, small enough to overlap the broker's
# work with ours and keep Arrow batches moderate.
PARTITION_MAX_BYTES = 8 << 20


def read_range_native(r: OffsetRange) -> Iterator[pa.RecordBatch]:
    if r.size <= 0:
        return
    committed = isolation(r.client) != "read_uncommitted"
    fetcher = PartitionFetcher(r.client, r.topic, r.partition, read_committed=committed,
                               partition_max_bytes=PARTITION_MAX_BYTES)
    try:
        yield from _read(fetcher, r, committed)
    finally:
        fetcher.close()


def _read(fetcher: PartitionFetcher, r: OffsetRange, committed: bool) -> Iterator[pa.RecordBatch]:
    where = f"{r.topic}-{r.partition}"
    pos = r.start
    deadline = time.monotonic() + r.poll_timeout_ms / 1000
    backoff = 0.05
    fetcher.send(pos)
    while pos < r.end:
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {r.poll_timeout_ms} ms reading {where} at offset "
                               f"{pos} (range ends at {r.end}); see kafkaConsumer.pollTimeoutMs")
        got = fetcher.receive()
        if got.error_code == OFFSET_OUT_OF_RANGE:
            pos = _data_loss(r, pos)
            if pos < r.end:
                fetcher.send(pos)
            continue
        if got.error_code in _RETRY:
            LOG.info("fetching %s: error %d, retrying", where, got.error_code)
            fetcher.reset()
            time.sleep(backoff)
            backoff = min(1.0, backoff * 2)
            fetcher.send(pos)
            continue
        if got.error_code == TOPIC_AUTHORIZATION_FAILED:  # Describe without Read
            raise TopicAuthorizationError([r.topic])
        if got.error_code:
            raise RuntimeError(f"fetching {where} at offset {pos} failed with Kafka error "
                               f"code {got.error_code}")
        sel = select(got.records, start=pos, end=r.end, read_committed=committed,
                     aborted=got.aborted)
        moved = sel.next_offset > pos
        pos = sel.next_offset
        if pos < r.end:
            # The broker reads the next chunk while this one is decoded and handed to Spark.
            fetcher.send(pos)
        if moved:
            deadline = time.monotonic() + r.poll_timeout_ms / 1000
            backoff = 0.05
            cols = columns(sel, headers=r.include_headers)
            if cols is not None:
                yield to_record_batch(cols, r.topic, r.partition, r.include_headers)


def _data_loss(r: OffsetRange, pos: int) -> int:
    """The records at `pos` are gone: fail, or the offset to go on from."""
    tp = (r.topic, r.partition)
    planner = Planner(r.client)
    return resume_after_loss(r, pos, planner.earliest([tp])[tp], planner.latest([tp])[tp])
