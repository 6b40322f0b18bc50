"""The hand-written Fetch request decoder against kio's generic one, at every version."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ProtocolError
from odradek.protocol.fetch import decode_fetch_request, decode_fetch_request_kio
from odradek.protocol.messages import request_class
from tests.unit.protocol.strategies import encode, entities

VERSIONS = range(4, 19)


def _both(body: bytes, offset: int, version: int) -> tuple[Any, Any]:
    """(kio's result or its ProtocolError, ours or our ProtocolError)."""
    results: list[Any] = []
    for decoder in (decode_fetch_request_kio, decode_fetch_request):
        try:
            results.append(decoder(body, offset, version))
        except ProtocolError as exc:
            results.append(exc)
    return results[0], results[1]


def _check(kio: Any, ours: Any) -> None:
    if isinstance(kio, ProtocolError):
        # kio refuses a tag its schema does not name; Kafka skips unknown tagged fields, and
        # so do we
        # kio also refuses a null cluster_id tag, which Kafka's schema allows (nullable 12+)
        null_cluster = "UnexpectedNull" in str(kio) and getattr(ours, "cluster_id", 0) is None
        if "Unknown tagged field" not in str(kio) and not null_cluster:
            assert isinstance(ours, ProtocolError)
    else:
        assert ours == kio


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_same_as_kio_for_valid_requests(version: int, data: st.DataObject) -> None:
    body = encode(data.draw(entities(request_class(1, version))))
    prefix = data.draw(st.binary(max_size=3))
    kio, ours = _both(prefix + body, len(prefix), version)
    assert not isinstance(kio, ProtocolError)
    assert ours == kio


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_same_as_kio_for_damaged_requests(version: int, data: st.DataObject) -> None:
    """Cut short, bytes overwritten: both refuse it, or both read the same request."""
    body = bytearray(encode(data.draw(entities(request_class(1, version)))))
    if body and data.draw(st.booleans()):
        del body[data.draw(st.integers(0, len(body) - 1)):]
    for _ in range(data.draw(st.integers(0, 3))):
        if body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    _check(*_both(bytes(body), 0, version))


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), junk=st.binary(max_size=200))
def test_junk_is_refused_alike(version: int, junk: bytes) -> None:
    _check(*_both(junk, 0, version))
