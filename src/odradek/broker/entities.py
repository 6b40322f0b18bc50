"""Build kio response entities from plain values, whatever the version.

Kafka's message versions add and drop fields; kio has one frozen dataclass per
version. Handlers describe a response once as nested dicts (ints for times,
lists for arrays) and `build` keeps only the fields the version has, turns
nested dicts into that version's nested classes and millisecond ints into the
timedelta/datetime objects kio writes.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Mapping
from typing import Any

from odradek.protocol.errors import ErrorCode

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ONE_MS = datetime.timedelta(milliseconds=1)

# per field: (name, kind, nested class or None); kind is one of
# "plain", "err", "td", "dt", "one" (nested entity), "many" (tuple of entities)
_Plan = list[tuple[str, str, Any]]
_plans: dict[type, _Plan] = {}


def _nested(tp: Any) -> tuple[str, Any]:
    origin = typing.get_origin(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        if args and dataclasses.is_dataclass(args[0]):
            return "many", args[0]
        return "plain", None
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            kind, cls = _nested(arg)
            if cls is not None:
                return kind, cls
        return "plain", None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return "one", tp
    return "plain", None


def _plan(cls: type) -> _Plan:
    plan = _plans.get(cls)
    if plan is None:
        plan = []
        for f in dataclasses.fields(cls):
            ktype = f.metadata.get("kafka_type", "")
            if ktype in ("timedelta_i32", "timedelta_i64"):
                plan.append((f.name, "td", None))
            elif ktype == "datetime_i64":
                plan.append((f.name, "dt", None))
            elif ktype == "error_code":
                plan.append((f.name, "err", None))
            else:
                kind, nested = _nested(f.type)
                plan.append((f.name, kind, nested))
        _plans[cls] = plan
    return plan


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of the kio class `cls` from `values`; unknown keys are dropped."""
    kwargs: dict[str, Any] = {}
    for name, kind, nested in _plan(cls):
        if name not in values:
            continue
        value = values[name]
        if value is None or kind == "plain":
            kwargs[name] = value
        elif kind == "err":
            kwargs[name] = value if isinstance(value, ErrorCode) else ErrorCode(value)
        elif kind == "td":
            kwargs[name] = (value if isinstance(value, datetime.timedelta)
                            else datetime.timedelta(milliseconds=value))
        elif kind == "dt":
            kwargs[name] = (value if isinstance(value, datetime.datetime)
                            else _EPOCH + datetime.timedelta(milliseconds=value))
        elif kind == "one":
            kwargs[name] = value if dataclasses.is_dataclass(value) else build(nested, value)
        else:
            kwargs[name] = tuple(v if dataclasses.is_dataclass(v) else build(nested, v)
                                 for v in value)
    return cls(**kwargs)


def ms(value: datetime.timedelta | int | None) -> int:
    """Milliseconds of a kio timedelta field (ints pass through)."""
    if value is None:
        return 0
    if isinstance(value, datetime.timedelta):
        return value // _ONE_MS
    return int(value)


def nested_class(cls: type, name: str) -> Any:
    """The entity class of field `name`'s elements (None for a field of plain values)."""
    return next((nested for f, _kind, nested in _plan(cls) if f == name), None)


def has_field(cls: type, name: str) -> bool:
    return any(f[0] == name for f in _plan(cls))
