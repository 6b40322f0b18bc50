"""The source and sink options, checked once on the driver so a bad one fails at query start.

Names and meanings follow Spark's Kafka connector (`format("kafka")`): a query moved from
`format("kafka")` to `format("odradek")` keeps its options.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Spark refuses these consumer/producer settings because the connector owns them; so do we.
FORBIDDEN_KAFKA_KEYS: dict[str, str] = {
    "group.id": "offsets are tracked in Spark's checkpoint, never in a consumer group",
    "auto.offset.reset": "use startingOffsets to say where a query begins",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "key.serializer": "keys are written as given (binary or string)",
    "value.serializer": "values are written as given (binary or string)",
    "enable.auto.commit": "offsets are never committed to a group",
    "interceptor.classes": "interceptors are not supported",
}

# How tasks read: our own Fetch client decoding batches into Arrow columns ("native", used
# when it honours every client setting: plaintext, TLS, SASL PLAIN/SCRAM), or confluent-kafka
# ("librdkafka").
FETCH_PATHS = ("native", "librdkafka")
STRATEGIES = ("assign", "subscribe", "subscribepattern")
EARLIEST, LATEST = -2, -1


class OptionError(ValueError):
    """A malformed or conflicting option; the message names it."""


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def client_settings(options: Mapping[str, str]) -> dict[str, str]:
    """`kafka.*` options with the prefix dropped, the forbidden ones refused."""
    out: dict[str, str] = {}
    for key, value in lower_keys(options).items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in FORBIDDEN_KAFKA_KEYS:
            raise OptionError(f"Kafka option 'kafka.{name}' is not supported: "
                              f"{FORBIDDEN_KAFKA_KEYS[name]}")
        out[name] = value
    if not out.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    # Spark's Kafka source takes the Java client's security settings (sasl.jaas.config,
    # ssl.truststore.location, ...): translated for librdkafka and the native fetcher, or
    # refused by name when they cannot be honoured (a JKS store)
    from odradek.client.security_settings import for_librdkafka

    try:
        return {k: str(v) for k, v in for_librdkafka(out).items()}
    except ValueError as exc:
        raise OptionError(f"Kafka option kafka.{exc}") from None


@dataclass(frozen=True)
class Subscription:
    """Which partitions a query reads: `assign`, `subscribe` or `subscribePattern`."""

    kind: str  # one of STRATEGIES
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribepattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    opts = lower_keys(options)
    given = [name for name in STRATEGIES if name in opts]
    if len(given) != 1:
        named = ", ".join(f"'{n}'" for n in ("assign", "subscribe", "subscribePattern"))
        found = f" (got {', '.join(repr(g) for g in given)})" if given else ""
        raise OptionError(f"exactly one of the options {named} must be specified{found}")
    kind = given[0]
    raw = opts[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic: give a comma-separated list")
        return Subscription(kind, topics=topics)
    if kind == "subscribepattern":
        if not raw:
            raise OptionError("option 'subscribePattern' is empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
        return Subscription(kind, pattern=raw)
    parsed = _json_object("assign", raw)
    assigned: list[tuple[str, int]] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and p >= 0 for p in parts):
            raise OptionError(f"option 'assign' must look like {{\"topicA\":[0,1]}}, got {raw!r}")
        assigned.extend((topic, p) for p in parts)
    if not assigned:
        raise OptionError("option 'assign' names no partition")
    return Subscription(kind, assigned=tuple(sorted(set(assigned))))


def _json_object(option: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise OptionError(f"option '{option}' must be a JSON object, got {raw!r}")
    return value


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends.

    kind: "earliest" | "latest" | "offsets" (per partition, -2/-1 allowed) |
    "timestamps" (per partition) | "timestamp" (one for every partition).
    """

    kind: str
    option: str
    per_partition: tuple[tuple[str, int, int], ...] = ()
    timestamp: int = 0

    def as_map(self) -> dict[tuple[str, int], int]:
        return {(t, p): v for t, p, v in self.per_partition}


def _per_partition(option: str, raw: str, allow: tuple[int, ...] | None) -> tuple[tuple[str, int, int], ...]:
    parsed = _json_object(option, raw)
    out: list[tuple[str, int, int]] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option '{option}' must look like {{\"topicA\":{{\"0\":23}}}}, got {raw!r}")
        for part, value in parts.items():
            try:
                p = int(part)
            except ValueError:
                raise OptionError(f"option '{option}': partition {part!r} of {topic!r} is not a number") from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise OptionError(f"option '{option}': value for {topic}-{p} is not an integer")
            if value < 0 and (allow is None or value not in allow):
                raise OptionError(f"option '{option}': {value} for {topic}-{p} is not allowed"
                                  + (f" (special values: {', '.join(map(str, allow))})" if allow else ""))
            out.append((topic, p, value))
    return tuple(out)


def _timestamp(option: str, raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option '{option}' must be a timestamp in milliseconds, got {raw!r}") from None
    if value < 0:
        raise OptionError(f"option '{option}' must not be negative, got {value}")
    return value


def parse_starting(options: Mapping[str, str], default: str) -> OffsetSpec:
    """startingTimestamp wins over startingOffsetsByTimestamp over startingOffsets (Spark's order)."""
    opts = lower_keys(options)
    if "startingtimestamp" in opts:
        return OffsetSpec("timestamp", "startingTimestamp", timestamp=_timestamp("startingTimestamp", opts["startingtimestamp"]))
    if "startingoffsetsbytimestamp" in opts:
        return OffsetSpec("timestamps", "startingOffsetsByTimestamp",
                          _per_partition("startingOffsetsByTimestamp", opts["startingoffsetsbytimestamp"], None))
    return _offsets("startingOffsets", opts.get("startingoffsets", default), (EARLIEST, LATEST))


def parse_ending(options: Mapping[str, str]) -> OffsetSpec:
    opts = lower_keys(options)
    if "endingtimestamp" in opts:
        return OffsetSpec("timestamp", "endingTimestamp", timestamp=_timestamp("endingTimestamp", opts["endingtimestamp"]))
    if "endingoffsetsbytimestamp" in opts:
        return OffsetSpec("timestamps", "endingOffsetsByTimestamp",
                          _per_partition("endingOffsetsByTimestamp", opts["endingoffsetsbytimestamp"], None))
    spec = _offsets("endingOffsets", opts.get("endingoffsets", "latest"), (LATEST,))
    if spec.kind == "earliest":
        raise OptionError("option 'endingOffsets' cannot be 'earliest' for a batch query")
    return spec


def _offsets(option: str, raw: str, allow: tuple[int, ...]) -> OffsetSpec:
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower(), option)
    if text.startswith("{"):
        return OffsetSpec("offsets", option, _per_partition(option, text, allow))
    raise OptionError(f"option '{option}' must be 'earliest', 'latest' or a JSON object such as "
                      f"{{\"topicA\":{{\"0\":23,\"1\":-2}}}}, got {raw!r}")


def flag(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"option '{name}' must be true or false, got {raw!r}")


def _positive(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, got {value}")
    return value


DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
# Spark reads durations with JavaUtils.timeStringAsMs: a number and a unit, ms when none.
_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
             "d": 86_400_000}


def _duration_ms(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    found = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", raw.lower())
    if not found or (found.group(2) or "ms") not in _UNITS_MS:
        raise OptionError(f"option '{name}' must be a duration such as '15m', '30s' or '500ms', "
                          f"got {raw!r}")
    return int(int(found.group(1)) * _UNITS_MS[found.group(2) or "ms"])


@dataclass(frozen=True)
class SourceOptions:
    client: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    extra: dict[str, str] = field(default_factory=dict)
    fetch_path: str = "native"
    # A micro-batch waits for this many new offsets, or until max_trigger_delay_ms passed.
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000


def parse_source(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = lower_keys(options)
    client = client_settings(opts)
    subscription = parse_subscription(opts)
    starting = parse_starting(opts, "latest" if streaming else "earliest")
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if name.lower() in opts:
                raise OptionError(f"option '{name}' is not valid in a streaming query")
        ending = None
    else:
        ending = parse_ending(opts)
        if starting.kind == "latest":
            raise OptionError("option 'startingOffsets' cannot be 'latest' for a batch query")
        if starting.kind == "offsets" and any(v == LATEST for _, _, v in starting.per_partition):
            raise OptionError("option 'startingOffsets' cannot use -1 (latest) for a batch query")
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:
                raise OptionError(f"option '{name}' is only valid in a streaming query")
    poll = _positive(opts, "kafkaConsumer.pollTimeoutMs") or 120_000
    fetch_path = opts.get("fetchpath", "native").strip().lower()
    if fetch_path not in FETCH_PATHS:
        raise OptionError(f"option 'fetchPath' must be one of {', '.join(FETCH_PATHS)}, "
                          f"got {fetch_path!r}")
    return SourceOptions(
        client=client,
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive(opts, "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_positive(opts, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS),
        min_partitions=_positive(opts, "minPartitions"),
        fail_on_data_loss=flag(opts, "failOnDataLoss", True),
        include_headers=flag(opts, "includeHeaders", False),
        poll_timeout_ms=poll,
        fetch_path=fetch_path,
    )


DELIVERY = ("at-least-once", "exactly-once")


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None
    delivery: str


def parse_sink(options: Mapping[str, str], *, exactly_once_available: bool) -> SinkOptions:
    opts = lower_keys(options)
    client = client_settings(opts)
    delivery = opts.get("deliveryguarantee", "at-least-once").strip().lower()
    if delivery not in DELIVERY:
        raise OptionError(f"option 'deliveryGuarantee' must be one of {', '.join(DELIVERY)}, got {delivery!r}")
    if delivery == "exactly-once" and not exactly_once_available:
        raise OptionError("option 'deliveryGuarantee'='exactly-once' is not available yet: "
                          "the sink writes at-least-once only")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' is empty")
    if delivery == "exactly-once" and not topic:
        # The batch marker is committed against partition 0 of this topic.
        raise OptionError("option 'deliveryGuarantee'='exactly-once' needs option 'topic'")
    return SinkOptions(client=client, topic=topic.strip() if topic else None, delivery=delivery)
