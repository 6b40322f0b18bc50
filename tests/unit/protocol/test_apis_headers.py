"""Api tables against kio's schemas; request/response headers."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v1.header import RequestHeader as KioHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioHeaderV2
from kio.serial import entity_writer

from odradek.protocol.apis import (
    ApiKey,
    is_flexible,
    request_header_version,
    response_header_version,
)
from odradek.protocol.errors import ProtocolError
from odradek.protocol.headers import (
    HeaderError,
    encode_request_header,
    encode_response_header,
    parse_request_header,
)

ALL_KIO = [(k, v) for k, name in api_key_map.items() for v in sorted(schema_name_map[name])]


def test_every_kio_api_key_is_in_the_enum() -> None:
    for k, name in api_key_map.items():
        assert ApiKey(k).name.lower() == name, (k, name)


@pytest.mark.parametrize(("api_key", "version"), ALL_KIO)
def test_flexible_and_header_versions_match_kafkas_schemas(api_key: int, version: int) -> None:
    req = load_request_schema(api_key, version)
    resp = load_response_schema(api_key, version)
    assert is_flexible(api_key, version) == bool(req.__flexible__)
    assert request_header_version(api_key, version) == req.__header_schema__.__version__
    assert response_header_version(api_key, version) == resp.__header_schema__.__version__


def test_removed_versions_and_apis() -> None:
    # Versions Kafka 4 dropped (not in kio) still parse with the right header.
    assert request_header_version(ApiKey.PRODUCE, 0) == 1
    assert request_header_version(ApiKey.FETCH, 3) == 1
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 3) == 2
    assert request_header_version(ApiKey.LEADER_AND_ISR, 4) == 2
    assert request_header_version(ApiKey.LEADER_AND_ISR, 3) == 1
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0
    assert request_header_version(ApiKey.API_VERSIONS, 99) == 2
    assert request_header_version(1234, 0) == 2  # unknown api: read as flexible


def _kio_header(api_key: int, version: int, corr: int, client_id: str | None) -> bytes:
    buf = io.BytesIO()
    if request_header_version(api_key, version) == 2:
        entity_writer(KioHeaderV2)(buf, KioHeaderV2(request_api_key=api_key, request_api_version=version,
                                                    correlation_id=corr, client_id=client_id))
    else:
        entity_writer(KioHeaderV1)(buf, KioHeaderV1(request_api_key=api_key, request_api_version=version,
                                                    correlation_id=corr, client_id=client_id))
    return buf.getvalue()


@settings(max_examples=200, deadline=None)
@given(api_key=st.integers(0, 92), version=st.integers(0, 20), corr=st.integers(-(2**31), 2**31 - 1),
       client_id=st.one_of(st.none(), st.text(max_size=20)), body=st.binary(max_size=10))
def test_parse_header_matches_kio_encoding(api_key: int, version: int, corr: int,
                                           client_id: str | None, body: bytes) -> None:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
        return
    raw = _kio_header(api_key, version, corr, client_id)
    assert raw == encode_request_header(api_key, version, corr, client_id)
    h = parse_request_header(memoryview(raw + body))
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (api_key, version, corr, client_id)
    assert h.body_offset == len(raw)


def test_header_v0() -> None:
    raw = struct.pack(">hhi", 7, 0, 42) + b"body"
    h = parse_request_header(raw)
    assert (h.api_key, h.correlation_id, h.client_id, h.body_offset, h.header_version) == (7, 42, None, 8, 0)


def test_truncated_header_keeps_what_was_read() -> None:
    with pytest.raises(HeaderError) as err:
        parse_request_header(b"\x00\x03")
    assert err.value.correlation_id is None
    raw = struct.pack(">hhih", 3, 12, 99, 50) + b"short"
    with pytest.raises(HeaderError) as err:
        parse_request_header(raw)
    assert (err.value.api_key, err.value.api_version, err.value.correlation_id) == (3, 12, 99)
    assert isinstance(err.value, ProtocolError)


def test_response_header() -> None:
    assert encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"


@settings(max_examples=300, deadline=None)
@given(junk=st.binary(max_size=40))
def test_fuzz_header(junk: bytes) -> None:
    try:
        parse_request_header(junk)
    except ProtocolError:
        pass
