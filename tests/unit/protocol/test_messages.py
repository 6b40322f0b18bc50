"""The generic kio-backed codec: round trips, bounds checks, fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map

from odradek.broker.apis import advertised_apis
from odradek.protocol.errors import ErrorCode, KafkaError, ProtocolError, UnsupportedVersion
from odradek.protocol.messages import (
    decode_request,
    decode_response,
    encode_api_versions_response,
    encode_response,
    request_class,
    response_class,
)
from tests.unit.protocol.strategies import encode, entities

# Every (api key, version) kio knows, requests and responses alike.
ALL_KIO = [(k, v) for k, name in api_key_map.items() for v in sorted(schema_name_map[name])]
ALL_CLASSES = [load_request_schema(k, v) for k, v in ALL_KIO] + [
    load_response_schema(k, v) for k, v in ALL_KIO
]
SERVED = [
    (k, v) for k, (lo, hi) in advertised_apis().items() for v in range(lo, hi + 1) if k != 0
]  # produce has its own hand-written decoder (v0-2 are not in kio)

_settings = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@_settings
@given(data=st.data())
def test_served_requests_round_trip(api_key: int, version: int, data: st.DataObject) -> None:
    cls = request_class(api_key, version)
    entity = data.draw(entities(cls))
    raw = encode(entity)
    assert decode_request(api_key, version, b"\x00\x01\x02" + raw, 3) == entity


@pytest.mark.parametrize(("api_key", "version"), SERVED)
@_settings
@given(data=st.data())
def test_served_responses_round_trip(api_key: int, version: int, data: st.DataObject) -> None:
    cls = response_class(api_key, version)
    entity = data.draw(entities(cls))
    raw = encode_response(entity)
    assert decode_response(api_key, version, raw) == entity


def test_huge_array_count_is_refused_before_kio_allocates() -> None:
    # MetadataRequest v12 whose topics compact array claims 2**32 - 2 entries:
    # handed to kio unchecked this aborts the process (allocation failure).
    body = b"\xff\xff\xff\xff\x0f" + b"\x00" * 8
    with pytest.raises(ProtocolError, match="array count"):
        decode_request(3, 12, body, 0)
    # Legacy int32 count (Metadata v1).
    with pytest.raises(ProtocolError, match="array count"):
        decode_request(3, 1, struct.pack(">i", 2**31 - 1) + b"\x00" * 4, 0)


def test_string_longer_than_frame_is_refused() -> None:
    # CreateTopics v2: topics array of 1, name length 30000 with 3 bytes present.
    body = struct.pack(">ih", 1, 30000) + b"abc"
    with pytest.raises(ProtocolError):
        decode_request(19, 2, body, 0)


def test_unknown_version_and_api_key() -> None:
    with pytest.raises(UnsupportedVersion):
        request_class(3, 99)
    with pytest.raises(UnsupportedVersion):
        decode_request(999, 0, b"", 0)


def test_bad_offset() -> None:
    with pytest.raises(ProtocolError):
        decode_request(3, 1, b"\x00\x00\x00\x00", 10)


@settings(max_examples=300, deadline=None)
@given(cls=st.sampled_from(ALL_CLASSES), junk=st.binary(max_size=200))
def test_random_bytes_only_raise_protocol_error(cls: type, junk: bytes) -> None:
    try:
        if cls.__name__.endswith("Request"):
            decode_request(cls.__api_key__, cls.__version__, junk, 0)
        else:
            decode_response(cls.__api_key__, cls.__version__, junk, 0)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), cls=st.sampled_from(ALL_CLASSES))
def test_mutated_frames_only_raise_protocol_error(data: st.DataObject, cls: type) -> None:
    raw = bytearray(encode(data.draw(entities(cls))))
    mutation = data.draw(st.sampled_from(["flip", "truncate", "insert", "big"]))
    if mutation == "flip" and raw:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    elif mutation == "truncate":
        del raw[data.draw(st.integers(0, len(raw))):]
    elif mutation == "insert":
        i = data.draw(st.integers(0, len(raw)))
        raw[i:i] = data.draw(st.binary(min_size=1, max_size=8))
    elif raw:
        # Plant a huge length/count anywhere.
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i : i + 5] = data.draw(st.sampled_from([b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\xff\xff"]))
    try:
        if cls.__name__.endswith("Request"):
            decode_request(cls.__api_key__, cls.__version__, bytes(raw), 0)
        else:
            decode_response(cls.__api_key__, cls.__version__, bytes(raw), 0)
    except (ProtocolError, KafkaError):
        pass


@pytest.mark.parametrize("version", range(5))
def test_api_versions_response_every_version(version: int) -> None:
    supported = {0: (0, 11), 1: (4, 17), 18: (0, 4)}
    raw = encode_api_versions_response(version, ErrorCode.none, supported, throttle_time_ms=7)
    decoded = decode_response(18, version, raw)
    assert decoded.error_code == ErrorCode.none
    assert [(a.api_key, a.min_version, a.max_version) for a in decoded.api_keys] == [
        (0, 0, 11), (1, 4, 17), (18, 0, 4)
    ]
    if version >= 1:
        assert decoded.throttle_time.total_seconds() == pytest.approx(0.007)


def test_api_versions_unknown_version_answers_v0() -> None:
    raw = encode_api_versions_response(9, ErrorCode.unsupported_version, {18: (0, 4)})
    assert raw == struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, 0, 4)
    decoded = decode_response(18, 0, raw)
    assert decoded.error_code == ErrorCode.unsupported_version
