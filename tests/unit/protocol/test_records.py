"""Record batches: building, validation, decoding, compression, oracles."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from odradek.protocol.errors import (
    CorruptRecord,
    ErrorCode,
    InvalidRecord,
    KafkaError,
    ProtocolError,
)
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    BatchHeader,
    Compression,
    ControlRecordType,
    Record,
    batch_crc_ok,
    build_batch,
    build_control_batch,
    compress,
    decode_control_record,
    decode_records,
    decompress,
    encode_batch_prefix,
    iter_batches,
    patch_base_offset_and_epoch,
    validate_batches,
)

_headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
)
_records = st.lists(
    st.builds(
        Record,
        offset=st.just(-1),
        timestamp=st.integers(0, 2**45),
        key=st.one_of(st.none(), st.binary(max_size=32)),
        value=st.one_of(st.none(), st.binary(max_size=300)),
        headers=_headers,
    ),
    min_size=1,
    max_size=20,
)


def _plain(records: list[Record]) -> list[tuple]:
    return [(r.key, r.value, list(r.headers), r.timestamp) for r in records]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=_records, codec=st.sampled_from(list(Compression)), base=st.integers(0, 2**40))
def test_build_decode_round_trip_and_kafka_python_oracle(
    records: list[Record], codec: Compression, base: int
) -> None:
    batch = build_batch(records, base_offset=base, compression=codec, producer_id=7,
                        producer_epoch=1, base_sequence=0)
    (header,) = validate_batches(batch, from_client=False)
    assert header.compression == codec
    assert header.records_count == len(records)
    assert header.last_offset == base + len(records) - 1
    assert header.size == len(batch)
    decoded = decode_records(header, memoryview(batch))
    assert _plain(decoded) == _plain(records)
    assert [r.offset for r in decoded] == list(range(base, base + len(records)))
    # kafka-python as an independent decoder of what we build
    oracle = DefaultRecordBatch(batch)
    assert oracle.validate_crc()
    assert oracle.compression_type == codec
    got = [(r.offset, r.key, r.value, r.timestamp, [tuple(h) for h in r.headers]) for r in oracle]
    assert got == [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in decoded]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_decode_batches_built_by_kafka_python(codec: int) -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i in range(30):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * i,
                       headers=[("h", b"x")])
    batch = bytes(builder.build())
    (header,) = validate_batches(batch)
    records = decode_records(header, batch)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (i, b"k%d" % i, b"v" * i, 1_700_000_000_000 + i) for i in range(30)
    ]
    assert all(r.headers == [("h", b"x")] for r in records)


def test_crc_rejects_any_flipped_byte_in_checked_range() -> None:
    batch = bytearray(build_batch([Record(-1, 1000, b"k", b"value", [("a", b"b")])]))
    for i in range(ATTRIBUTES_OFFSET, len(batch)):
        corrupt = bytearray(batch)
        corrupt[i] ^= 0x01
        assert not batch_crc_ok(corrupt)
        with pytest.raises(KafkaError) as err:
            validate_batches(corrupt, from_client=False)
        assert err.value.code in (ErrorCode.corrupt_message, ErrorCode.invalid_record,
                                  ErrorCode.unsupported_compression_type)
    # Flipping the CRC field itself
    corrupt = bytearray(batch)
    corrupt[18] ^= 0xFF
    with pytest.raises(CorruptRecord):
        validate_batches(corrupt, from_client=False)


def test_patching_prefix_keeps_crc_valid() -> None:
    batch = build_batch([Record(-1, 5, None, b"x")] * 3)
    prefix = patch_base_offset_and_epoch(memoryview(batch)[:16], 12345, 7)
    assert prefix == encode_batch_prefix(12345, len(batch) - 12, 7)
    patched = prefix + batch[16:]
    (h,) = validate_batches(patched)
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (12345, 7, 12347)
    assert batch_crc_ok(patched)


@pytest.mark.parametrize("magic", [0, 1])
def test_old_magic_is_invalid_record(magic: int) -> None:
    batch = bytearray(build_batch([Record(-1, 5, None, b"x")]))
    batch[16] = magic
    with pytest.raises(InvalidRecord) as err:
        validate_batches(batch)
    assert err.value.code == ErrorCode.invalid_record
    with pytest.raises(InvalidRecord):
        list(iter_batches(batch))


def test_empty_and_truncated() -> None:
    with pytest.raises(InvalidRecord):
        validate_batches(b"")
    batch = build_batch([Record(-1, 5, None, b"x")])
    for cut in (1, 12, 17, 60, len(batch) - 1):
        with pytest.raises(CorruptRecord):
            validate_batches(batch[:cut])
    # a batch length below the header size
    bad = bytearray(batch)
    struct.pack_into(">i", bad, 8, 10)
    with pytest.raises(CorruptRecord):
        validate_batches(bad)


def test_client_checks() -> None:
    ok = build_batch([Record(-1, 5, None, b"x")] * 2)
    control = build_control_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0)
    with pytest.raises(InvalidRecord, match="control"):
        validate_batches(control)
    validate_batches(control, from_client=False)
    no_seq = build_batch([Record(-1, 5, None, b"x")], producer_id=9, producer_epoch=0)
    with pytest.raises(InvalidRecord, match="sequence"):
        validate_batches(no_seq)
    with pytest.raises(InvalidRecord, match="exactly one"):
        validate_batches(ok + ok, single_batch=True)
    assert len(validate_batches(ok + ok)) == 2
    zstd = build_batch([Record(-1, 5, None, b"x")], compression=Compression.ZSTD)
    with pytest.raises(KafkaError) as err:
        validate_batches(zstd, allow_zstd=False)
    assert err.value.code == ErrorCode.unsupported_compression_type
    validate_batches(zstd)
    # count disagreeing with last_offset_delta: patch count and fix the CRC
    from crc32c import crc32c

    bad = bytearray(ok)
    struct.pack_into(">i", bad, 57, 3)
    struct.pack_into(">I", bad, 17, crc32c(bytes(bad[21:])))
    with pytest.raises(InvalidRecord, match="inconsistent"):
        validate_batches(bad)


def test_iter_batches_partial_tail() -> None:
    a = build_batch([Record(-1, 1, b"a", b"1")], base_offset=0)
    b = build_batch([Record(-1, 2, b"b", b"2")] * 2, base_offset=1)
    stream = a + b + b[:30]
    got = [(h.base_offset, len(v)) for h, v in iter_batches(stream)]
    assert got == [(0, len(a)), (1, len(b))]
    with pytest.raises(CorruptRecord):
        list(iter_batches(stream, strict=True))
    assert [h.base_offset for h, _ in iter_batches(a + b + b[:70])] == [0, 1]


def test_control_batch() -> None:
    batch = build_control_batch(ControlRecordType.ABORT, producer_id=42, producer_epoch=3,
                                coordinator_epoch=11, base_offset=100, timestamp=77)
    (h,) = validate_batches(batch, from_client=False)
    assert h.is_control and h.is_transactional and h.producer_id == 42
    (rec,) = decode_records(h, batch)
    assert rec.key == b"\x00\x00\x00\x00" and rec.value == b"\x00\x00\x00\x00\x00\x0b"
    ctrl = decode_control_record(rec)
    assert (ctrl.version, ctrl.type, ctrl.coordinator_epoch) == (0, ControlRecordType.ABORT, 11)
    oracle = DefaultRecordBatch(batch)
    assert oracle.is_control_batch and oracle.is_transactional
    (orec,) = list(oracle)
    assert orec.type == 0 and orec.offset == 100


def test_log_append_time() -> None:
    batch = build_batch([Record(-1, 5, None, b"x")] * 2, timestamp_type=1, log_append_time_ms=999)
    (h,) = validate_batches(batch)
    assert h.timestamp_type == 1 and h.max_timestamp == 999
    assert [r.timestamp for r in decode_records(h, batch)] == [999, 999]


def test_snappy_raw_and_xerial() -> None:
    import snappy

    data = b"hello world " * 10000
    assert decompress(Compression.SNAPPY, snappy.compress(data)) == data
    ours = compress(Compression.SNAPPY, data)
    assert ours.startswith(b"\x82SNAPPY\x00")
    # kafka-python's xerial decoder reads what we write
    from kafka.codec import snappy_decode

    assert snappy_decode(ours) == data


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompress_garbage_is_corrupt(codec: int) -> None:
    with pytest.raises(CorruptRecord):
        decompress(codec, b"definitely not compressed data")


def test_zstd_streaming_frame_without_content_size() -> None:
    import zstandard

    data = b"abc" * 5000
    cobj = zstandard.ZstdCompressor().compressobj()
    frame = cobj.compress(data) + cobj.flush()
    assert decompress(Compression.ZSTD, frame) == data


def test_lz4_frame_from_lz4_package() -> None:
    import lz4.frame

    data = b"xyz" * 5000
    assert decompress(Compression.LZ4, lz4.frame.compress(data)) == data
    assert lz4.frame.decompress(compress(Compression.LZ4, data)) == data


def test_header_properties() -> None:
    batch = build_batch([Record(-1, 5, None, b"x")] * 4, base_offset=10, compression=Compression.GZIP,
                        transactional=True, producer_id=5, producer_epoch=2, base_sequence=2**31 - 2)
    h = BatchHeader.parse(batch)
    assert h.compression == Compression.GZIP and h.is_transactional and not h.is_control
    assert h.last_offset == 13 and h.next_offset == 14 and h.last_sequence == 1
    with pytest.raises(CorruptRecord):
        BatchHeader.parse(batch[:BATCH_HEADER_SIZE - 1])


# --------------------------------------------------------------------------- fuzz


@settings(max_examples=300, deadline=None)
@given(junk=st.binary(max_size=300))
def test_fuzz_random_bytes(junk: bytes) -> None:
    for fn in (lambda: validate_batches(junk), lambda: list(iter_batches(junk, strict=True)),
               lambda: [decode_records(h, v) for h, v in iter_batches(junk)]):
        try:
            fn()
        except (ProtocolError, KafkaError):
            pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=_records, codec=st.sampled_from(list(Compression)), data=st.data())
def test_fuzz_mutated_batches(records: list[Record], codec: Compression, data: st.DataObject) -> None:
    batch = bytearray(build_batch(records, compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(batch) - 1))
        batch[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del batch[data.draw(st.integers(0, len(batch))):]
    try:
        validate_batches(batch, from_client=False)
    except (ProtocolError, KafkaError):
        pass
    # decoding without the CRC gate must also fail cleanly
    try:
        for h, v in iter_batches(batch):
            decode_records(h, v)
    except (ProtocolError, KafkaError):
        pass


@pytest.mark.parametrize("codec", list(Compression))
def test_aiokafka_decodes_our_batches(codec: Compression) -> None:
    from aiokafka.record.memory_records import MemoryRecords

    records = [Record(-1, 1_700_000_000_000 + i, b"k%d" % i, b"v" * (i * 50), [("h", b"x")])
               for i in range(40)]
    batch = build_batch(records, base_offset=5, compression=codec)
    oracle = MemoryRecords(batch).next_batch()
    assert oracle.validate_crc()
    got = [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in oracle]
    assert got == [(5 + i, r.key, r.value, r.timestamp, [("h", b"x")]) for i, r in enumerate(records)]
