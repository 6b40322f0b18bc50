"""Issue 23: what one Fetch response looks like on the wire, from any Kafka-protocol broker.

    python -m bench.fetch_shape HOST:PORT TOPIC [--partitions 6] [--offsets 0,...]
        [--partition-max-bytes 1048576] [--max-bytes 52428800]

Sends the Fetch a librdkafka consumer sends at the start of a topic (v11, every partition,
session 0 / epoch -1: no KIP-227 session, the shipped fetch sizes) and prints, per partition
in the order the broker answered: the error, the high watermark, aborted_transactions (None or
a list), the records' bytes against the partition limit, and each record batch's base offset,
record count, size, attributes (compression, timestamp type, transactional/control), whether it
starts before the offset asked for (records the client parses and drops) and whether it is cut
short (a partial trailing batch, which the client drops and fetches again); and for the first
record of each partition its attributes, key and value sizes and header count. The C consumer
pair (bench/c_consume_ab.py --shape) calls `shape` on both brokers it filled.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader
from kio.static.primitive import i8, i32, i64
from tests.support import wire

from odradek.client.consumer_settings import SHIPPED
from odradek.protocol.primitives import decode_varint

BATCH_HEADER = 61  # base offset .. record count of a magic-2 batch
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@dataclass(frozen=True)
class Batch:
    base_offset: int
    records: int
    size: int  # bytes on the wire, the offset and length fields included
    attributes: int
    partial: bool  # cut short by the response's limit

    def describe(self) -> str:
        a = self.attributes
        flags = [CODECS.get(a & 7, f"codec {a & 7}"),
                 "log-append-time" if a & 8 else "create-time"]
        flags += [f for bit, f in ((16, "transactional"), (32, "control")) if a & bit]
        return (f"@{self.base_offset} {self.records} records {self.size:,} B "
                f"({', '.join(flags)}){' PARTIAL' if self.partial else ''}")


def first_record(batch: bytes) -> str:
    """The first record of a whole uncompressed batch: attributes, key, value, headers."""
    pos = BATCH_HEADER
    _, pos = decode_varint(batch, pos)  # length
    attrs = batch[pos]
    pos += 1
    ts_delta, pos = decode_varint(batch, pos)
    off_delta, pos = decode_varint(batch, pos)
    klen, pos = decode_varint(batch, pos)
    pos += max(klen, 0)
    vlen, pos = decode_varint(batch, pos)
    pos += max(vlen, 0)
    headers, pos = decode_varint(batch, pos)
    return (f"first record: attributes {attrs}, timestamp delta {ts_delta}, offset delta "
            f"{off_delta}, key {klen} B, value {vlen} B, {headers} headers")


def batches(records: bytes) -> list[Batch]:
    out = []
    pos = 0
    while pos + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        size = 12 + length
        whole = pos + size <= len(records)
        count = attrs = -1
        if pos + BATCH_HEADER <= len(records):
            (attrs,) = struct.unpack_from(">h", records, pos + 21)
            (count,) = struct.unpack_from(">i", records, pos + 57)
        out.append(Batch(base, count, size, attrs, not whole))
        pos += size
    if pos < len(records):
        out.append(Batch(-1, -1, len(records) - pos, 0, True))
    return out


def fetch(endpoint: str, topic: str, partitions: int, offsets: list[int],
          partition_max: int, max_bytes: int) -> Any:
    host, port = endpoint.rsplit(":", 1)
    mod: Any = importlib.import_module("kio.schema.fetch.v11.request")
    parts = tuple(mod.FetchPartition(partition=i32(p), current_leader_epoch=i32(-1),
                                     fetch_offset=i64(offsets[p % len(offsets)]),
                                     log_start_offset=i64(-1),
                                     partition_max_bytes=i32(partition_max))
                  for p in range(partitions))
    req = mod.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=500), min_bytes=i32(1),
        max_bytes=i32(max_bytes), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), rack_id="", forgotten_topics_data=(),
        topics=(mod.FetchTopic(topic=topic, partitions=parts),))
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(wire.frame(wire.request_payload(req, 1, "fetch-shape")))
        buf = b""
        while len(buf) < 4:
            buf += sock.recv(1 << 20)
        (size,) = struct.unpack(">i", buf[:4])
        while len(buf) < 4 + size:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the broker closed the connection")
            buf += chunk
    payload = buf[4:4 + size]
    cls = wire.response_class(req)
    _, used = entity_reader(cls.__header_schema__)(payload, 0)
    body, _ = entity_reader(cls)(payload, used)
    return body, size


def shape(endpoint: str, topic: str, partitions: int = 6, offsets: list[int] | None = None,
          partition_max: int = int(str(SHIPPED["max.partition.fetch.bytes"])),
          max_bytes: int = int(str(SHIPPED["fetch.max.bytes"]))) -> str:
    """One Fetch response from offsets (0 for every partition by default), described."""
    offs = offsets or [0]
    body, size = fetch(endpoint, topic, partitions, offs, partition_max, max_bytes)
    lines = [f"response {size:,} B, session {body.session_id}, error {body.error_code}, "
             f"{sum(len(t.partitions) for t in body.responses)} partitions"]
    for t in body.responses:
        for p in t.partitions:
            recs = bytes(p.records or b"")
            bs = batches(recs)
            asked = offs[p.partition_index % len(offs)]
            before = [b for b in bs if b.base_offset >= 0 and b.base_offset < asked]
            lines.append(
                f"  p{p.partition_index}: error {p.error_code}, hw {p.high_watermark}, aborted "
                f"{None if p.aborted_transactions is None else list(p.aborted_transactions)}, "
                f"{len(recs):,} B of {partition_max:,}, {len(bs)} batches, "
                f"{sum(b.records for b in bs if not b.partial):,} whole records, "
                f"{len(before)} batches starting before offset {asked}")
            lines += [f"    {b.describe()}" for b in bs[:4]]
            if len(bs) > 4:
                lines.append(f"    ... {len(bs) - 4} more")
            if bs and not bs[0].partial and bs[0].attributes & 7 == 0:
                lines.append("    " + first_record(recs[:bs[0].size]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("endpoint")
    ap.add_argument("topic")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--offsets", default="0", help="fetch offsets, one per partition, cycled")
    ap.add_argument("--partition-max-bytes", type=int,
                    default=int(str(SHIPPED["max.partition.fetch.bytes"])))
    ap.add_argument("--max-bytes", type=int, default=int(str(SHIPPED["fetch.max.bytes"])))
    a = ap.parse_args(argv)
    print(shape(a.endpoint, a.topic, a.partitions, [int(x) for x in a.offsets.split(",")],
                a.partition_max_bytes, a.max_bytes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
