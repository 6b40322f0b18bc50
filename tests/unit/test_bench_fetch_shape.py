"""bench.fetch_shape's reading of a Fetch response's records: batch boundaries, record counts,
attributes, a partial trailing batch, and the first record's layout (sans I/O: batches built
by tests/support/wire, independent of odradek's encoder)."""

import struct

from bench.fetch_shape import batches, first_record

from tests.support.wire import Rec, build_batch_v2


def _batch(n: int, base: int, headers: int = 0) -> bytes:
    return build_batch_v2([Rec(None, b"v" * 100, [("h", b"x")] * headers, 1000 + i)
                           for i in range(n)], base_offset=base)


def test_batches_counts_records_and_marks_a_cut_trailing_batch() -> None:
    a, b, c = _batch(3, 0), _batch(5, 3), _batch(4, 8)
    got = batches(a + b + c[:40])
    assert [(x.base_offset, x.records, x.size, x.partial) for x in got] == [
        (0, 3, len(a), False), (3, 5, len(b), False), (8, -1, len(c), True)]
    assert got[0].describe() == f"@0 3 records {len(a):,} B (none, create-time)"
    assert batches(b"") == []
    # fewer than the 12 bytes of offset and length left: still reported, as a fragment
    assert [(x.size, x.partial) for x in batches(a + b"\0" * 5)][-1] == (5, True)


def test_attributes_are_named() -> None:
    a = bytearray(_batch(1, 0))
    struct.pack_into(">h", a, 21, 3 | 8 | 16)  # lz4, log-append time, transactional
    assert batches(bytes(a))[0].describe().endswith("(lz4, log-append-time, transactional)")


def test_first_record_reads_key_value_and_headers() -> None:
    assert first_record(_batch(2, 7, headers=2)) == (
        "first record: attributes 0, timestamp delta 0, offset delta 0, key -1 B, "
        "value 100 B, 2 headers")
