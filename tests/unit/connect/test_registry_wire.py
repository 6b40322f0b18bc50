"""Issue 19: Confluent's wire framing shared by the Avro, JSON Schema and Protobuf converters
(magic byte 0, a 4-byte schema id, the body), and the lock-guarded cache of registry answers."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect.data import DataError
from odradek.connect.registry_wire import Cache, frame, split_wire


@given(st.integers(0, 2**32 - 1), st.binary(max_size=40))
def test_frame_and_split_round_trip(schema_id: int, body: bytes) -> None:
    raw = frame(schema_id, body)
    assert raw[0] == 0 and len(raw) == 5 + len(body)
    assert split_wire(raw) == (schema_id, body)


@given(st.binary(max_size=12))
def test_split_wire_reads_or_refuses_any_bytes(raw: bytes) -> None:
    try:
        schema_id, body = split_wire(raw)
    except DataError as exc:
        assert str(exc) == "Unknown magic byte!"
        assert len(raw) < 5 or raw[0] != 0
        return
    assert raw == frame(schema_id, body)


def test_cache_makes_each_key_once_and_keeps_the_first() -> None:
    cache: Cache[int, object] = Cache()
    made: list[int] = []
    barrier = threading.Barrier(4)

    def make() -> object:
        made.append(1)
        return object()

    got: list[object] = []

    def use() -> None:
        barrier.wait()
        got.append(cache.get(7, make))

    threads = [threading.Thread(target=use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(g) for g in got}) == 1  # all see one value, whoever made it first
    assert cache.get(7, make) is got[0]
    with pytest.raises(DataError):
        cache.get(8, lambda: (_ for _ in ()).throw(DataError("registry down")))
    assert cache.get(8, lambda: "later") == "later"  # a failure is not cached
