"""Confluent's wire format, shared by the Avro, JSON Schema and Protobuf converters: a record
is magic byte 0, the writer's schema id as 4 big-endian bytes, then the converter's body. And
the cache each converter keeps of what a registry call gave it (an id for a schema written,
a reader for an id read), so a schema costs one registry call per converter.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from odradek.connect.data import DataError

MAGIC = 0
_HEADER = struct.Struct(">bI")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def split_wire(raw: bytes) -> tuple[int, bytes]:
    """(schema id, body) of a framed record; Confluent's error for anything else."""
    if len(raw) < _HEADER.size or raw[0] != MAGIC:
        raise DataError("Unknown magic byte!")
    return int(_HEADER.unpack_from(raw)[1]), bytes(raw[_HEADER.size:])


def frame(schema_id: int, body: bytes) -> bytes:
    return _HEADER.pack(MAGIC, schema_id) + body


class Cache(Generic[K, V]):
    """A dict under a lock: converters run in Spark's threads at once. `make` runs outside
    the lock (it calls the registry); two threads making one key at once keep the first."""

    def __init__(self) -> None:
        self._items: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        with self._lock:
            if key in self._items:
                return self._items[key]
        made = make()
        with self._lock:
            return self._items.setdefault(key, made)
