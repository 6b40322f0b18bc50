"""Single Message Transforms, sans I/O, with Kafka's class names and configs.

    transforms=a,b
    transforms.a.type=org.apache.kafka.connect.transforms.InsertField$Value
    transforms.a.static.field=src
    transforms.a.predicate=isFoo           (optional; transforms.a.negate=true inverts it)
    predicates=isFoo
    predicates.isFoo.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches
    predicates.isFoo.pattern=foo.*

`Chain.from_config` builds them in order; `Chain.apply` runs a record through them (None:
dropped). `errors` says what validation says of a connector's transform settings (the
fields Kafka names: `transforms.a.type`, `transforms.a.<setting>`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.connect.data import ConnectRecord
from odradek.connect.transforms.base import ConfigError, Transformation, as_list
from odradek.connect.transforms.cast import Cast
from odradek.connect.transforms.fields import (
    ExtractField,
    HoistField,
    InsertField,
    MaskField,
    ReplaceField,
    ValueToKey,
)
from odradek.connect.transforms.routing import (
    Filter,
    HasHeaderKey,
    Predicate,
    RecordIsTombstone,
    RegexRouter,
    TimestampRouter,
    TopicNameMatches,
)
from odradek.connect.transforms.timestamp_converter import TimestampConverter

__all__ = ["PREDICATES", "TRANSFORMS", "Chain", "ConfigError", "errors"]

_PKG = "org.apache.kafka.connect.transforms."
TRANSFORMS: dict[str, tuple[type[Transformation], bool]] = {}
for _cls in (InsertField, ReplaceField, MaskField, ExtractField, HoistField, Cast,
             TimestampConverter):
    TRANSFORMS[f"{_PKG}{_cls.__name__}$Key"] = (_cls, True)
    TRANSFORMS[f"{_PKG}{_cls.__name__}$Value"] = (_cls, False)
for _cls in (ValueToKey, TimestampRouter, RegexRouter, Filter):
    TRANSFORMS[f"{_PKG}{_cls.__name__}"] = (_cls, False)
PREDICATES: dict[str, type[Predicate]] = {
    f"{_PKG}predicates.{c.__name__}": c
    for c in (TopicNameMatches, HasHeaderKey, RecordIsTombstone)}


def _scoped(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


@dataclass
class Step:
    alias: str
    transform: Transformation
    predicate: Predicate | None = None
    negate: bool = False
    type_name: str = ""  # the class name configured (what error reports name)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if self.predicate is not None and self.predicate.test(record) == self.negate:
            return record  # the predicate says this record is not for this transform
        return self.transform.apply(record)


@dataclass
class Chain:
    steps: list[Step] = field(default_factory=list)

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Chain:
        """ConfigError, with the failing setting's name, when a transform cannot be made."""
        predicates: dict[str, Predicate] = {}
        for alias in as_list(config.get("predicates", "")):
            key = f"predicates.{alias}.type"
            name = config.get(key, "").strip()
            if not name:
                raise ConfigError(f'{key}: Missing required configuration "{key}" which has '
                                  "no default value.")
            kind = PREDICATES.get(name)
            if kind is None:
                raise ConfigError(f"{key}: Invalid value {name} for configuration {key}: Class "
                                  f"{name} could not be found.")
            try:
                predicates[alias] = kind(_scoped(config, f"predicates.{alias}."))
            except ConfigError as exc:
                raise ConfigError(f"predicates.{alias}: {exc}") from None
        steps = []
        for alias in as_list(config.get("transforms", "")):
            key = f"transforms.{alias}.type"
            name = config.get(key, "").strip()
            if not name:
                raise ConfigError(f'{key}: Missing required configuration "{key}" which has '
                                  "no default value.")
            found = TRANSFORMS.get(name)
            if found is None:
                raise ConfigError(f"{key}: Invalid value {name} for configuration {key}: Class "
                                  f"{name} could not be found.")
            own = _scoped(config, f"transforms.{alias}.")
            try:
                transform = found[0](own, key=found[1])
            except ConfigError as exc:
                raise ConfigError(f"transforms.{alias}: {exc}") from None
            predicate_name = own.get("predicate", "").strip()
            negate = own.get("negate", "false").strip().lower()
            if negate not in ("true", "false"):
                raise ConfigError(f"transforms.{alias}.negate: Invalid value {negate} for "
                                  f"configuration transforms.{alias}.negate: Expected value "
                                  "to be either true or false")
            if predicate_name and predicate_name not in predicates:
                raise ConfigError(f"transforms.{alias}.predicate: Invalid value "
                                  f"{predicate_name} for configuration transforms.{alias}."
                                  f"predicate: undefined predicate (not in 'predicates')")
            if negate == "true" and not predicate_name:
                raise ConfigError(f"transforms.{alias}.negate: Invalid value true for "
                                  f"configuration transforms.{alias}.negate: negate can only "
                                  "be used with a predicate")
            steps.append(Step(alias, transform, predicates.get(predicate_name),
                              negate == "true", name))
        return cls(steps)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        current: ConnectRecord | None = record
        for step in self.steps:
            assert current is not None
            current = step.apply(current)
            if current is None:
                return None
        return current


def errors(config: Mapping[str, str]) -> dict[str, list[str]]:
    """{setting: [message]} for validation; empty when the chain can be built."""
    try:
        Chain.from_config(config)
    except ConfigError as exc:
        where, _, message = str(exc).partition(": ")
        return {where: [message]}
    return {}
