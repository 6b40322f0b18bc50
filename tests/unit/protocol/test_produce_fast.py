"""The produce fast paths answer exactly as the generic ones: the v0-v8 request decoder against
the Reader-based one, and validate_produce_batch against records.validate_batches, on valid,
truncated, corrupted and arbitrary input (same result, or the same error and message)."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import KafkaError, ProtocolError
from odradek.protocol.primitives import Writer
from odradek.protocol.produce import (
    _decode_generic,
    _decode_legacy_fast,
    decode_produce_request,
    validate_produce_batch,
)
from odradek.protocol.records import (
    Compression,
    Record,
    build_batch,
    build_control_batch,
    validate_batches,
)

_settings = settings(max_examples=300, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        result = fn(*args, **kwargs)
    except KafkaError as exc:  # CorruptRecord, InvalidRecord, UNSUPPORTED_COMPRESSION_TYPE
        return ("error", type(exc).__name__, exc.code, str(exc))  # type: ignore[return-value]
    except ProtocolError as exc:
        return ("error", type(exc).__name__, str(exc))  # type: ignore[return-value]
    if isinstance(result, list):
        return ("ok", result)
    return ("ok", (result.transactional_id, result.acks, result.timeout_ms,
                   [(t.name, [(i, None if r is None else bytes(r)) for i, r in t.partitions])
                    for t in result.topics]))


# --------------------------------------------------------------------------- request body

_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_records = st.one_of(st.none(), st.binary(max_size=40))


@st.composite
def _bodies(draw: st.DrawFn, version: int) -> bytes:
    w = Writer()
    if version >= 3:
        w.write_nullable_string(draw(st.one_of(st.none(), _names)))
    w.write_int16(draw(st.sampled_from([-1, 0, 1, 2, -32768])))
    w.write_int32(draw(st.integers(-(2**31), 2**31 - 1)))
    topics = draw(st.lists(st.tuples(_names, st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), _records), max_size=4)), max_size=3))
    w.write_int32(len(topics))
    for name, parts in topics:
        w.write_string(name)
        w.write_int32(len(parts))
        for index, records in parts:
            w.write_int32(index)
            w.write_nullable_bytes(records)
    return w.getvalue()


def _mangle(data: st.DataObject, body: bytes) -> bytes:
    """The body as sent, cut short, with bytes overwritten, or with bytes appended."""
    how = data.draw(st.sampled_from(["as is", "cut", "flip", "append", "lengths"]))
    if how == "cut" and body:
        return body[: data.draw(st.integers(0, len(body) - 1))]
    if how == "flip" and body:
        b = bytearray(body)
        for _ in range(data.draw(st.integers(1, 3))):
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.integers(0, 255))
        return bytes(b)
    if how == "append":
        return body + data.draw(st.binary(min_size=1, max_size=8))
    if how == "lengths" and len(body) >= 4:
        # a length or count field turned into -1, a huge value or invalid UTF-8 lead byte
        b = bytearray(body)
        at = data.draw(st.integers(0, len(b) - 2))
        b[at : at + 2] = data.draw(st.sampled_from([b"\xff\xff", b"\x7f\xff", b"\x80\x00",
                                                    b"\x00\x01", b"\xc3\x28"]))
        return bytes(b)
    return body


@_settings
@given(version=st.integers(0, 8), data=st.data())
def test_fast_request_decoder_matches_the_generic_one(version: int, data: st.DataObject) -> None:
    body = _mangle(data, data.draw(_bodies(version)))
    offset = data.draw(st.sampled_from([0, 3]))
    frame = memoryview(b"HDR"[:offset] + body)
    generic = _outcome(_decode_generic, frame, offset, version)
    fast = _decode_legacy_fast(frame, offset, version >= 3)
    if fast is not None:
        # the fast path only answers where the generic one succeeds, with the same request
        assert generic == _outcome(lambda: fast)
    assert _outcome(decode_produce_request, frame, offset, version) == generic


@_settings
@given(version=st.integers(0, 8), raw=st.binary(max_size=64), offset=st.integers(-2, 70))
def test_arbitrary_bytes_decode_alike(version: int, raw: bytes, offset: int) -> None:
    generic = _outcome(_decode_generic, raw, offset, version)
    assert _outcome(decode_produce_request, raw, offset, version) == generic


def test_records_of_the_fast_path_are_views_into_the_frame() -> None:
    w = Writer()
    w.write_nullable_string("txn")
    w.write_int16(1)
    w.write_int32(30000)
    w.write_int32(1)
    w.write_string("t")
    w.write_int32(1)
    w.write_int32(4)
    w.write_nullable_bytes(b"abcdef")
    frame = bytearray(w.getvalue())
    req = decode_produce_request(memoryview(frame), 0, 7)
    ((index, records),) = req.topics[0].partitions
    assert (req.transactional_id, req.acks, req.timeout_ms, index) == ("txn", 1, 30000, 4)
    assert isinstance(records, memoryview)
    frame[-1:] = b"Z"
    assert bytes(records) == b"abcdeZ"  # no copy was taken


# --------------------------------------------------------------------------- batch validation

_rec = st.builds(Record, offset=st.just(-1), timestamp=st.integers(0, 2**40),
                 key=st.one_of(st.none(), st.binary(max_size=8)),
                 value=st.one_of(st.none(), st.binary(max_size=30)), headers=st.just(()))


@st.composite
def _batches(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return build_control_batch(draw(st.sampled_from([0, 1])), 7, 0, 1000)
    pid = draw(st.sampled_from([-1, 7, 2**40]))
    return build_batch(
        draw(st.lists(_rec, min_size=1, max_size=5)),
        compression=draw(st.sampled_from(list(Compression))),
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=draw(st.sampled_from([-1, 0, 5])) if pid >= 0 else -1,
        transactional=pid >= 0 and draw(st.booleans()),
    )


_FIELDS = {  # header field -> (offset, struct format)
    "batch_length": (8, ">i"), "magic": (16, ">b"), "crc": (17, ">I"), "attributes": (21, ">h"),
    "last_offset_delta": (23, ">i"), "producer_id": (43, ">q"), "base_sequence": (53, ">i"),
    "records_count": (57, ">i"),
}


def _mangle_batch(data: st.DataObject, batch: bytes) -> bytes:
    how = data.draw(st.sampled_from(["as is", "as is", "cut", "flip", "append", "field",
                                     "two batches"]))
    if how == "cut":
        return batch[: data.draw(st.integers(0, len(batch) - 1))]
    if how == "flip":
        b = bytearray(batch)
        b[data.draw(st.integers(0, len(b) - 1))] ^= data.draw(st.integers(1, 255))
        return bytes(b)
    if how == "append":
        return batch + data.draw(st.binary(min_size=1, max_size=70))
    if how == "two batches":
        return batch + batch
    if how == "field":
        name = data.draw(st.sampled_from(sorted(_FIELDS)))
        at, fmt = _FIELDS[name]
        size = struct.calcsize(fmt)
        lo, hi = {1: (-128, 127), 2: (-(2**15), 2**15 - 1), 4: (-(2**31), 2**31 - 1),
                  8: (-(2**63), 2**63 - 1)}[size]
        if fmt == ">I":
            lo, hi = 0, 2**32 - 1
        value = data.draw(st.one_of(st.integers(lo, hi), st.sampled_from([0, 1, -1, 5]).filter(
            lambda v: lo <= v <= hi)))
        b = bytearray(batch)
        struct.pack_into(fmt, b, at, value)
        return bytes(b)
    return batch


@_settings
@given(data=st.data(), allow_zstd=st.booleans())
def test_fast_batch_validation_matches_validate_batches(data: st.DataObject,
                                                        allow_zstd: bool) -> None:
    records = memoryview(_mangle_batch(data, data.draw(_batches())))
    expected = _outcome(validate_batches, records, single_batch=True, allow_zstd=allow_zstd)
    assert _outcome(validate_produce_batch, records, allow_zstd) == expected


@_settings
@given(raw=st.binary(max_size=120))
def test_arbitrary_bytes_validate_alike(raw: bytes) -> None:
    expected = _outcome(validate_batches, memoryview(raw), single_batch=True)
    assert _outcome(validate_produce_batch, memoryview(raw)) == expected
