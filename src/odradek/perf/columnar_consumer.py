"""The consumer perf tool on odradek's own columnar Fetch client instead of confluent-kafka.

`odradek bench consume --client columnar`: one PartitionFetcher (one connection, one Fetch in
flight) per partition, each response decoded into numpy columns by odradek.client.columnar,
so no Python object is made per record. The next fetch of a partition is sent before its
records are decoded, and the partitions take turns, so the node serves some while we decode
others. Responses are not copied: each stays in its fetcher's receive buffer
(`receive(copy=False)`, `select(borrow=True)`) until that fetcher's next receive, which comes
after the round's decode. (`merged`, one pass over all partitions' responses joined, is kept
for callers that want one set of columns.)

Counting is honest: a record counts only once its batch passed the CRC check and the record
itself was decoded into the columns (offsets, key and value positions and lengths; for runs
of equal-sized records too, whose every record's bytes are checked against the run's
layout, see columnar._same_layout); bytes are
key plus value lengths from those columns (null counts 0), as kafka-consumer-perf-test counts
them. Each partition is read from its log start to the high watermark it had when the run
began. Needs numpy (the `spark` extra); PLAINTEXT, SSL or SASL PLAIN/SCRAM listeners. Under
`isolation.level=read_committed` with a transaction still open at that watermark, the run
ends short of it, after `timeout_s` without a record.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping
from typing import Any

from odradek.client.config import resolve_bootstrap
from odradek.perf.confluent import consumer_config, partitions_of
from odradek.perf.results import ConsumeRun

_WARM = ("kio.schema.fetch.v11.request", "kio.schema.fetch.v11.response",
         "kio.schema.metadata.v8.request", "kio.schema.metadata.v8.response",
         "odradek.protocol.messages", "numpy")
# librdkafka names for the knobs the fetcher has, so -X works for both clients.
_MAX_BYTES = ("fetch.max.bytes", 64 << 20)
# Big responses: more batches per decode pass, walked side by side (measured: 32 MiB beat
# 1 and 4 MiB in client CPU per record).
_PARTITION_MAX_BYTES = ("max.partition.fetch.bytes", 32 << 20)
_MAX_WAIT_MS = ("fetch.wait.max.ms", 100)


def watermarks(bootstrap: str | None, topic: str,
               extra: Mapping[str, str] | None = None) -> dict[int, tuple[int, int]]:
    """(log start, high watermark) of every partition, asked through confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer(consumer_config(bootstrap, dict(extra or {})))
    try:
        return {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                for p in partitions_of(probe, topic)}
    finally:
        probe.close()


def _int(client: Mapping[str, str], setting: tuple[str, int]) -> int:
    return int(client.get(setting[0], setting[1]))


def consume_columnar(bootstrap: str | None, topic: str, partitions: list[int] | None,
                     num_records: int, timeout_s: float, extra: Mapping[str, str] | None,
                     ready: Any = None, go: Any = None,
                     marks: Mapping[int, tuple[int, int]] | None = None) -> ConsumeRun:
    """Read `partitions` (default all) from their log start until `num_records` records,
    their high watermarks at the start, or timeout_s without a record."""
    # Imported before the clock starts: kio and numpy take a while to import.
    for name in _WARM:
        importlib.import_module(name)
    from odradek.client.columnar import columns, select
    from odradek.client.fetcher import PartitionFetcher, supports

    client = {"bootstrap.servers": resolve_bootstrap(bootstrap), **dict(extra or {})}
    if not supports(client):
        raise RuntimeError("the columnar consumer speaks PLAINTEXT, SSL and SASL PLAIN/SCRAM "
                           "with PEM files only (client/secure_socket.py)")
    read_committed = client.get("isolation.level", "read_uncommitted") == "read_committed"
    if marks is None:
        marks = watermarks(bootstrap, topic, extra)
    if partitions is not None:
        marks = {p: marks[p] for p in partitions}
    ends = {p: hi for p, (_, hi) in marks.items()}
    offsets = {p: lo for p, (lo, _) in marks.items()}
    fetchers = {p: PartitionFetcher(client, topic, p, read_committed=read_committed,
                                    max_bytes=_int(client, _MAX_BYTES),
                                    partition_max_bytes=_int(client, _PARTITION_MAX_BYTES),
                                    max_wait_ms=_int(client, _MAX_WAIT_MS))
                for p in marks if ends[p] > offsets[p]}
    if ready is not None:
        ready.set()
        go.wait()
    count = nbytes = errors = 0
    first_error: str | None = None
    start = last = time.time()
    cpu0 = time.process_time()
    try:
        live = list(fetchers)
        for p in live:
            fetchers[p].send(offsets[p])
        while live and count < num_records:
            # One response from every live partition and the next fetches sent before any
            # is decoded, so the node serves them while we decode.
            sels: list[Any] = []
            for p in list(live):
                # No copy of the records: they stay in the fetcher's buffer, which only
                # its next receive overwrites, after this round's decode below.
                got = fetchers[p].receive(copy=False)
                if got.error_code:
                    errors += 1
                    first_error = first_error or f"{topic}-{p}: Kafka error {got.error_code}"
                    live.remove(p)
                    continue
                sel = select(got.records, start=offsets[p], end=ends[p],
                             read_committed=read_committed, aborted=got.aborted, borrow=True)
                if sel.segments:
                    sels.append(sel)
                offsets[p] = sel.next_offset
                if offsets[p] < ends[p]:
                    fetchers[p].send(offsets[p])
                else:
                    live.remove(p)
            # Each response decoded alone: equal-sized records are read a whole run at a
            # time (columnar._same_layout), so joining the responses into one buffer for one
            # pass (`merged`) would only add a copy.
            for sel in sels:
                cols = columns(sel)  # only records in the selection's [start, end)
                if cols is None or count >= num_records:
                    continue
                take = min(len(cols), num_records - count)
                nbytes += int(cols.key_len[:take].clip(0).sum()
                              + cols.value_len[:take].clip(0).sum())
                count += take
                last = time.time()
            if time.time() - last > timeout_s:
                break
        cpu = time.process_time() - cpu0
    finally:
        for f in fetchers.values():
            f.close()
    return ConsumeRun(count, nbytes, start, last, errors, first_error, cpu_seconds=cpu)



def merged(sels: list[Any]) -> tuple[Any, Any, Any]:
    """Several partitions' selections as one over one joined buffer, so `columns` decodes
    them in one pass; with it, per record, the start and end offset of its own partition's
    selection (the merged selection itself keeps every record)."""
    import numpy as np

    from odradek.client.columnar import Selection

    segments = []
    shift = 0
    for sel in sels:
        segments += [seg._replace(base=seg.base + shift) for seg in sel.segments]
        shift += len(sel.buffer)
    counts = [sum(seg.header.records_count for seg in sel.segments) for sel in sels]
    lo = np.repeat(np.array([sel.start for sel in sels], np.int64), counts)
    hi = np.repeat(np.array([sel.end for sel in sels], np.int64), counts)
    buffer = sels[0].buffer if len(sels) == 1 else b"".join(bytes(sel.buffer) for sel in sels)
    return Selection(buffer, segments, -1, -(1 << 62), 1 << 62), lo, hi
