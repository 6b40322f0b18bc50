"""Configs of one group (resource type GROUP, 32): Kafka 4.2's GroupConfig, and the
group-coordinator broker configs that give their defaults and bounds.

A group config overrides, for one group, what the broker's `group.consumer.*`,
`group.share.*` and `group.streams.*` configs give every group: `consumer.session.timeout.ms`
defaults to `group.consumer.session.timeout.ms` and must lie within
`group.consumer.min.session.timeout.ms` and `group.consumer.max.session.timeout.ms`. The
overrides are ConfigRecords of the metadata log, as Kafka keeps them; a group need not exist
to have them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from odradek.metadata.config.config_def import (
    INT_MAX,
    ConfigDef,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    Validator,
    at_least,
    between,
    check_value,
    one_of,
    to_config_string,
)
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "GROUP_CONFIGS",
    "GROUP_COORDINATOR_BROKER_DEFS",
    "describe_group_configs",
    "effective_group_config",
    "group_config_defaults",
    "validate_group_configs",
    "validate_group_name",
]

I = ConfigType.INT  # noqa: E741
S = ConfigType.STRING
LST = ConfigType.LIST

_SHARE_ONLY = " Applies to share groups (KIP-932)."
_STREAMS_ONLY = " Stored now; odradek applies it once it serves streams groups (KIP-1071)."


def _d(name: str, ctype: ConfigType, default: Any, validator: Validator | None,
       doc: str) -> ConfigDef:
    return ConfigDef(name, ctype, default, validator, doc)


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def _migration_policy(name: str, value: Any) -> None:
    # Kafka's CaseInsensitiveValidString
    if value is not None and str(value).lower() not in MIGRATION_POLICIES:
        raise ConfigError(f"Invalid value {value} for configuration {name}: String must be one "
                          f"of (case insensitive): {', '.join(p.upper() for p in MIGRATION_POLICIES)}")


# The broker side (GroupCoordinatorConfig, ShareGroupConfig): defaults and bounds for every
# group. Read-only, as in Kafka.
GROUP_COORDINATOR_BROKER_DEFS = [
    _d("group.consumer.session.timeout.ms", I, 45_000, at_least(1),
       "The timeout to detect client failures when using the consumer group protocol."),
    _d("group.consumer.min.session.timeout.ms", I, 45_000, at_least(1),
       "The minimum allowed session timeout for registered consumers."),
    _d("group.consumer.max.session.timeout.ms", I, 60_000, at_least(1),
       "The maximum allowed session timeout for registered consumers."),
    _d("group.consumer.heartbeat.interval.ms", I, 5_000, at_least(1),
       "The heartbeat interval given to the members of a consumer group."),
    _d("group.consumer.min.heartbeat.interval.ms", I, 5_000, at_least(1),
       "The minimum heartbeat interval for registered consumers."),
    _d("group.consumer.max.heartbeat.interval.ms", I, 15_000, at_least(1),
       "The maximum heartbeat interval for registered consumers."),
    _d("group.consumer.assignors", LST, ["uniform", "range"], None,
       "The server-side assignors as a list of names (uniform, range; Kafka's class names "
       "are accepted too). The first one is the default."),
    _d("group.max.size", I, INT_MAX, at_least(1),
       "The maximum number of consumers that a single classic group can accommodate: a "
       "JoinGroup past it gets GROUP_MAX_SIZE_REACHED; a consumer group does not become "
       "classic (downgrade) while it has more members."),
    _d("group.consumer.max.size", I, INT_MAX, at_least(1),
       "The maximum number of members of a consumer group (KIP-848), of either protocol: "
       "one more gets GROUP_MAX_SIZE_REACHED, and a larger classic group is not upgraded."),
    _d("group.consumer.migration.policy", S, "bidirectional", _migration_policy,
       "Converting a non-empty classic group whose members use the consumer embedded "
       "protocol to a consumer group (KIP-848) when a member of the consumer protocol joins, "
       "and back when the last one leaves: bidirectional (both), upgrade, downgrade, or "
       "disabled (neither). Empty groups convert either way whatever this says."),
    _d("group.share.session.timeout.ms", I, 45_000, at_least(1),
       "The timeout to detect client failures when using the share group protocol."
       + _SHARE_ONLY),
    _d("group.share.min.session.timeout.ms", I, 45_000, at_least(1),
       "The minimum allowed session timeout for share group members." + _SHARE_ONLY),
    _d("group.share.max.session.timeout.ms", I, 60_000, at_least(1),
       "The maximum allowed session timeout for share group members." + _SHARE_ONLY),
    _d("group.share.heartbeat.interval.ms", I, 5_000, at_least(1),
       "The heartbeat interval given to the members of a share group." + _SHARE_ONLY),
    _d("group.share.min.heartbeat.interval.ms", I, 5_000, at_least(1),
       "The minimum heartbeat interval for share group members." + _SHARE_ONLY),
    _d("group.share.max.heartbeat.interval.ms", I, 15_000, at_least(1),
       "The maximum heartbeat interval for share group members." + _SHARE_ONLY),
    _d("group.share.record.lock.duration.ms", I, 30_000, between(1_000, 3_600_000),
       "The record acquisition lock duration in milliseconds for share groups." + _SHARE_ONLY),
    _d("group.share.max.size", I, 200, between(1, 1000),
       "The maximum number of members that a single share group can accommodate."
       + _SHARE_ONLY),
    _d("group.share.max.share.sessions", I, 2000, at_least(1),
       "The maximum number of share sessions per broker." + _SHARE_ONLY),
    _d("group.share.delivery.count.limit", I, 5, between(2, 10),
       "The maximum number of delivery attempts for a record delivered to a share group."
       + _SHARE_ONLY),
    _d("group.share.partition.max.record.locks", I, 2000, between(100, 10_000),
       "Share-group record lock limit per share-partition." + _SHARE_ONLY),
    _d("group.share.min.record.lock.duration.ms", I, 15_000, between(1_000, 30_000),
       "The record acquisition lock minimum duration in milliseconds for share groups."
       + _SHARE_ONLY),
    _d("group.share.max.record.lock.duration.ms", I, 60_000, between(30_000, 3_600_000),
       "The record acquisition lock maximum duration in milliseconds for share groups."
       + _SHARE_ONLY),
    _d("group.streams.session.timeout.ms", I, 45_000, at_least(1),
       "The timeout to detect client failures when using the streams group protocol."
       + _STREAMS_ONLY),
    _d("group.streams.min.session.timeout.ms", I, 45_000, at_least(1),
       "The minimum allowed session timeout for streams group members." + _STREAMS_ONLY),
    _d("group.streams.max.session.timeout.ms", I, 60_000, at_least(1),
       "The maximum allowed session timeout for streams group members." + _STREAMS_ONLY),
    _d("group.streams.heartbeat.interval.ms", I, 5_000, at_least(1),
       "The heartbeat interval given to the members of a streams group." + _STREAMS_ONLY),
    _d("group.streams.min.heartbeat.interval.ms", I, 5_000, at_least(1),
       "The minimum heartbeat interval for streams group members." + _STREAMS_ONLY),
    _d("group.streams.max.heartbeat.interval.ms", I, 15_000, at_least(1),
       "The maximum heartbeat interval for streams group members." + _STREAMS_ONLY),
    _d("group.streams.num.standby.replicas", I, 0, at_least(0),
       "The number of standby replicas for each task." + _STREAMS_ONLY),
    _d("group.streams.max.standby.replicas", I, 2, at_least(0),
       "The maximum allowed value for the group-level number of standby replicas."
       + _STREAMS_ONLY),
    _d("group.streams.initial.rebalance.delay.ms", I, 3_000, at_least(0),
       "The amount of time the group coordinator will wait for more streams clients to join "
       "a new group before performing the first rebalance." + _STREAMS_ONLY),
]

_ISO_DURATION = re.compile(
    r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE)


def _auto_offset_reset(name: str, value: Any) -> None:
    # latest, earliest or by_duration:<ISO 8601 duration, not negative> (Kafka's
    # ShareGroupAutoOffsetResetStrategy)
    text = (value or "").strip().lower()
    if text in ("latest", "earliest"):
        return
    if text.startswith("by_duration:"):
        spec = text[len("by_duration:"):]
        if spec.startswith("-"):
            raise ConfigError(f"Invalid value {value} for configuration {name}: "
                              "Negative duration is not supported.")
        match = _ISO_DURATION.fullmatch(spec)
        if match and spec.upper() not in ("P", "PT") and any(match.groups()):
            return
        raise ConfigError(f"Invalid value {value} for configuration {name}: "
                          "Unable to parse duration string.")
    raise ConfigError(f"Invalid value {value} for configuration {name}: "
                      "String must be one of: latest, earliest, by_duration:PnDTnHnMn.nS")


# (group config, the broker config giving its default), in Kafka 4.2's GroupConfig
_GROUP_DEFS: list[tuple[ConfigDef, str | None]] = [
    (_d("consumer.heartbeat.interval.ms", I, 5_000, at_least(1),
        "The heartbeat interval given to the members of a consumer group."),
     "group.consumer.heartbeat.interval.ms"),
    (_d("consumer.session.timeout.ms", I, 45_000, at_least(1),
        "The timeout to detect client failures when using the consumer group protocol."),
     "group.consumer.session.timeout.ms"),
    (_d("share.auto.offset.reset", S, "latest", _auto_offset_reset,
        "The strategy to initialize the share-partition start offset: latest, earliest or "
        "by_duration:<ISO 8601 duration>." + _SHARE_ONLY), None),
    (_d("share.heartbeat.interval.ms", I, 5_000, at_least(1),
        "The heartbeat interval given to the members of a share group." + _SHARE_ONLY),
     "group.share.heartbeat.interval.ms"),
    (_d("share.isolation.level", S, "read_uncommitted",
        one_of("read_committed", "read_uncommitted"),
        "Controls how to read records written transactionally: read_committed delivers only "
        "committed transactional records, read_uncommitted all of them." + _SHARE_ONLY),
     None),
    (_d("share.record.lock.duration.ms", I, 30_000, at_least(1_000),
        "The record acquisition lock duration in milliseconds for share groups."
        + _SHARE_ONLY), "group.share.record.lock.duration.ms"),
    (_d("share.session.timeout.ms", I, 45_000, at_least(1),
        "The timeout to detect client failures when using the share group protocol."
        + _SHARE_ONLY), "group.share.session.timeout.ms"),
    (_d("streams.heartbeat.interval.ms", I, 5_000, at_least(1),
        "The heartbeat interval given to the members of a streams group." + _STREAMS_ONLY),
     "group.streams.heartbeat.interval.ms"),
    (_d("streams.initial.rebalance.delay.ms", I, 3_000, at_least(0),
        "The amount of time the group coordinator will wait for more streams clients to join "
        "a new group before performing the first rebalance." + _STREAMS_ONLY),
     "group.streams.initial.rebalance.delay.ms"),
    (_d("streams.num.standby.replicas", I, 0, at_least(0),
        "The number of standby replicas for each task." + _STREAMS_ONLY),
     "group.streams.num.standby.replicas"),
    (_d("streams.session.timeout.ms", I, 45_000, at_least(1),
        "The timeout to detect client failures when using the streams group protocol."
        + _STREAMS_ONLY), "group.streams.session.timeout.ms"),
]
GROUP_CONFIGS: dict[str, ConfigDef] = {d.name: d for d, _ in _GROUP_DEFS}
_BROKER_DEFAULT: dict[str, str | None] = {d.name: b for d, b in _GROUP_DEFS}

# (group config, broker minimum, broker maximum): Kafka's GroupConfig.validateValues
_BOUNDS = [
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms"),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
     "group.consumer.max.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
     "group.share.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms",
     "group.share.max.session.timeout.ms"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms"),
    ("streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms",
     "group.streams.max.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "group.streams.min.session.timeout.ms",
     "group.streams.max.session.timeout.ms"),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
]
# (session timeout, heartbeat interval): the first must exceed the second
_SESSION_OVER_HEARTBEAT = [
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
]

BrokerGet = Callable[[str], Any]


def validate_group_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty.")


def validate_group_configs(overrides: Mapping[str, str | None], broker: BrokerGet) -> None:
    """Check a group's overrides as they will be (None: the override goes): known names,
    typed values within their own range and within the broker's group.*.min/max bounds, and
    each session timeout above its heartbeat interval. `broker` gives broker config values."""
    values: dict[str, Any] = {name: d.default for name, d in GROUP_CONFIGS.items()}
    for name, raw in overrides.items():
        defn = GROUP_CONFIGS.get(name)
        if defn is None:
            raise ConfigError(f"Unknown group config name: {name}")
        if raw is not None:
            values[name] = check_value(defn, name, raw)
    for name, low, high in _BOUNDS:
        value = values[name]
        if low is not None and value < int(broker(low)):
            raise ConfigError(f"{name} must be greater than or equal to {low}")
        if value > int(broker(high)):
            raise ConfigError(f"{name} must be less than or equal to {high}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise ConfigError(f"{session} must be greater than {heartbeat}")


def group_config_defaults(broker: BrokerGet) -> dict[str, Any]:
    """Each group config's value for a group without overrides: the broker's group.* value
    where Kafka takes it from there, else GroupConfig's own default."""
    out: dict[str, Any] = {}
    for name, defn in GROUP_CONFIGS.items():
        source = _BROKER_DEFAULT[name]
        value = broker(source) if source is not None else None
        out[name] = defn.default if value is None else value
    return out


def effective_group_config(overrides: Mapping[str, str], broker: BrokerGet) -> dict[str, Any]:
    """One group's typed config: its overrides over the defaults."""
    out = group_config_defaults(broker)
    for name, raw in overrides.items():
        defn = GROUP_CONFIGS.get(name)
        if defn is not None:
            out[name] = check_value(defn, name, raw)
    return out


def describe_group_configs(overrides: Mapping[str, str], broker: BrokerGet,
                           include_synonyms: bool = False, include_documentation: bool = False,
                           names: list[str] | None = None) -> list[ConfigEntry]:
    """DescribeConfigs entries of a group, in name order (or for `names`, unknown ones
    skipped): an override is GROUP_CONFIG, the rest DEFAULT_CONFIG, as Kafka reports them."""
    defaults = group_config_defaults(broker)
    wanted = sorted(GROUP_CONFIGS) if names is None else [n for n in names if n in GROUP_CONFIGS]
    entries = []
    for name in wanted:
        defn = GROUP_CONFIGS[name]
        default = to_config_string(defaults[name])
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            value, source = overrides[name], ConfigSource.GROUP_CONFIG
            if include_synonyms:
                synonyms.append(ConfigSynonym(name, value, source))
        else:
            value, source = default, ConfigSource.DEFAULT_CONFIG
        if include_synonyms:
            synonyms.append(ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG))
        entries.append(ConfigEntry(name, value, False, source, False, synonyms, defn.type,
                                   defn.doc if include_documentation else None))
    return entries

