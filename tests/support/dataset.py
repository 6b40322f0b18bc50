"""The records the client tests produce, and the checks they run on what comes back.

Record i is fully determined by i (key, value, headers), so a consumer can check every byte
it gets. The record's number travels in its first header, so values may be empty or null.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections import defaultdict
from dataclasses import dataclass

Headers = list[tuple[str, bytes]]

_BLOB = random.Random(20240601).randbytes(8192)
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def key(i: int) -> bytes | None:
    if i % 97 == 0:
        return None  # some keyless records: partition chosen freely, still reported
    return b"key-%d-\x00\xff" % (i % 4999)


def value(i: int) -> bytes | None:
    if i % 1001 == 0 and key(i) is not None:
        return None  # tombstones
    if i % 89 == 0:
        return b""
    start = (i * 37) % 4096
    return b"v%d|" % i + _BLOB[start:start + (i % 300)]


def headers(i: int) -> Headers:
    hs: Headers = [("seq", b"%d" % i)]
    if i % 3 == 0:
        hs += [("dup", b"a"), ("dup", b"b")]
    if i % 5 == 0:
        hs.append(("empty", b""))
    if i % 7 == 0:
        hs.append(("bin\u00e9", _BLOB[i % 100:i % 100 + 16]))
    return hs


def seq_of(hs: Headers | None) -> int:
    assert hs, "record without headers"
    name, val = hs[0]
    assert name == "seq", hs
    return int(val)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (the Java client's DefaultPartitioner hash), written out independently."""
    m = 0x5BD1E995
    r = 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for k, in struct.iter_unpack("<I", data[:n4 * 4]):
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = data[n4 * 4:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def java_partition(k: bytes, partitions: int) -> int:
    """Partition of a keyed record under the Java/kafka-python/aiokafka default partitioner."""
    return (murmur2(k) & 0x7FFFFFFF) % partitions


def librdkafka_partition(k: bytes, partitions: int) -> int:
    """librdkafka's default `consistent_random` partitioner for a non-empty key: crc32 mod n."""
    return zlib.crc32(k) % partitions


@dataclass
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers


def normalize_headers(hs: object) -> Headers:
    if not hs:
        return []
    return [(str(k), bytes(v) if v is not None else None) for k, v in hs]  # type: ignore[attr-defined, misc]


def check_round_trip(n: int, partitions: int, delivered: dict[int, tuple[int, int]],
                     consumed: list[Consumed], partitioner: object) -> None:
    """Every record produced came back once, byte-exact, on the partition and offset the client
    was told at delivery, in per-partition order with contiguous offsets from 0, and every keyed
    record sits where `partitioner(key, partitions)` puts it."""
    assert len(delivered) == n, f"{n - len(delivered)} records have no delivery report"
    seen: dict[int, Consumed] = {}
    by_partition: dict[int, list[Consumed]] = defaultdict(list)
    for c in consumed:
        s = seq_of(c.headers)
        assert s not in seen, f"record {s} consumed twice: {seen[s]} and {c}"
        seen[s] = c
        by_partition[c.partition].append(c)
    missing = set(range(n)) - set(seen)
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:10]}"
    assert len(seen) == n
    for s, c in seen.items():
        assert c.key == key(s), f"record {s}: key {c.key!r} != {key(s)!r}"
        assert c.value == value(s), f"record {s}: value differs ({c.value!r:.80} != {value(s)!r:.80})"
        assert c.headers == headers(s), f"record {s}: headers {c.headers} != {headers(s)}"
        assert (c.partition, c.offset) == delivered[s], (
            f"record {s}: consumed at {(c.partition, c.offset)}, delivery said {delivered[s]}")
        k = key(s)
        if k:
            want = partitioner(k, partitions)  # type: ignore[operator]
            assert c.partition == want, f"record {s} with key {k!r}: partition {c.partition} != {want}"
    assert set(by_partition) <= set(range(partitions))
    for p, items in by_partition.items():
        offsets = [c.offset for c in items]
        assert offsets == list(range(len(items))), (
            f"partition {p}: offsets not contiguous from 0 in consume order: {offsets[:5]}...")
        seqs = [seq_of(c.headers) for c in items]
        assert seqs == sorted(seqs), f"partition {p}: records not in produce order"
