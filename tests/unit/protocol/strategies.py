"""Hypothesis strategies: random but valid kio entities of any schema, and their bytes."""

from __future__ import annotations

import datetime
import io
import uuid
from dataclasses import MISSING, fields
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_uuids = st.uuids().filter(lambda u: u.int != 0)


def _primitive(kafka_type: str, nullable: bool) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        base = st.integers(lo, hi)
    elif kafka_type == "float64":
        base = st.floats(allow_nan=False)
    elif kafka_type == "bool":
        base = st.booleans()
    elif kafka_type == "error_code":
        base = st.sampled_from(list(ErrorCode))
    elif kafka_type == "uuid":
        base = _uuids
    elif kafka_type == "string":
        base = _text
    elif kafka_type in ("bytes", "records"):
        base = st.binary(max_size=20)
    elif kafka_type == "timedelta_i32":
        base = st.integers(0, 2**31 - 1).map(lambda ms: datetime.timedelta(milliseconds=ms))
    elif kafka_type == "timedelta_i64":
        base = st.integers(0, 2**40).map(lambda ms: datetime.timedelta(milliseconds=ms))
    elif kafka_type == "datetime_i64":
        base = st.integers(0, 2**41).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
        )
    else:  # pragma: no cover
        raise NotImplementedError(kafka_type)
    return st.one_of(st.none(), base) if nullable else base


def _field(field: Any, is_tag: bool) -> st.SearchStrategy[Any]:
    cls = classify_field(field)
    optional = False if is_tag else is_optional(field)
    if isinstance(cls, PrimitiveField):
        return _primitive(get_schema_field_type(field), optional)
    if isinstance(cls, PrimitiveTupleField):
        arr = st.lists(_primitive(get_schema_field_type(field), False), max_size=3).map(tuple)
        return st.one_of(st.none(), arr) if optional else arr
    if isinstance(cls, EntityField):
        inner = entities(cls.type_)
        return st.one_of(st.none(), inner) if optional else inner
    if isinstance(cls, EntityTupleField):
        arr = st.lists(entities(cls.type_), max_size=2).map(tuple)
        return st.one_of(st.none(), arr) if optional else arr
    raise NotImplementedError(cls)  # pragma: no cover


_CACHE: dict[type, st.SearchStrategy[Any]] = {}


def entities(cls: type) -> st.SearchStrategy[Any]:
    """Random valid instances of a kio entity class."""
    if cls in _CACHE:
        return _CACHE[cls]
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields(cls):
        tag = get_field_tag(f)
        strat = _field(f, tag is not None)
        if tag is not None and f.default is not MISSING:
            strat = st.one_of(st.just(f.default), strat)
        kwargs[f.name] = strat
    strategy = st.deferred(lambda: st.builds(cls, **kwargs))
    _CACHE[cls] = strategy
    return strategy


def encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def zero_uuid() -> uuid.UUID:
    return uuid.UUID(int=0)
