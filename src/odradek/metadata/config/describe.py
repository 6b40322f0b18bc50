"""DescribeConfigs: a topic's or a broker's entries with their values, sources and synonyms.

An entry's synonyms list every place its value could come from, most specific first, as
Kafka's configSynonyms does: the topic override, then each broker synonym as set dynamically
for this broker, as the cluster-wide dynamic default, statically, and its Kafka default.
The entry's source is that of the first synonym.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from odradek.metadata.config.broker_configs import (
    BROKER_CONFIGS,
    BROKER_SYNONYM_GROUPS,
    DYNAMIC_BROKER_CONFIGS,
    BrokerConfig,
)
from odradek.metadata.config.config_def import (
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    parse_value,
    to_config_string,
)
from odradek.metadata.config.topic_configs import TOPIC_CONFIGS

__all__ = ["describe_broker_configs", "describe_topic_configs"]


def _broker_synonyms(broker_config: BrokerConfig, names: Iterable[str]) -> list[ConfigSynonym]:
    # Per synonym name, every source that sets it, most specific first (Kafka's configSynonyms).
    out: list[ConfigSynonym] = []
    for name in names:
        defn = BROKER_CONFIGS.get(name)
        sensitive = defn is not None and defn.sensitive
        for source, mapping in (
            (ConfigSource.DYNAMIC_BROKER_CONFIG, broker_config.dynamic),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, broker_config.dynamic_default),
            (ConfigSource.STATIC_BROKER_CONFIG, broker_config.values),
        ):
            if name in mapping:
                out.append(ConfigSynonym(name, None if sensitive else mapping[name], source))
        if defn is not None and defn.default is not None:
            value = None if sensitive else to_config_string(defn.default)
            out.append(ConfigSynonym(name, value, ConfigSource.DEFAULT_CONFIG))
    return out


def describe_topic_configs(
    topic_overrides: Mapping[str, str],
    broker_config: BrokerConfig,
    include_synonyms: bool = False,
    include_documentation: bool = False,
    names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs entries of a topic, in name order (or for `names`, unknown ones skipped)."""
    wanted = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
    entries = []
    for name in wanted:
        defn = TOPIC_CONFIGS[name]
        synonyms = _broker_synonyms(broker_config, (s.name for s in defn.synonyms))
        if name in topic_overrides:
            value = to_config_string(parse_value(name, defn.type, topic_overrides[name]))
            synonyms.insert(0, ConfigSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        else:
            value = to_config_string(broker_config.topic_default(name)[0])
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=None if defn.sensitive else value,
                read_only=False,
                source=source,
                sensitive=defn.sensitive,
                synonyms=synonyms if include_synonyms else [],
                type=defn.type,
                documentation=defn.doc if include_documentation else None,
            )
        )
    return entries


def describe_broker_configs(
    broker_config: BrokerConfig,
    include_synonyms: bool = False,
    include_documentation: bool = False,
    names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs entries of this broker: every known config plus unknown keys that were set."""
    if names is None:
        wanted = sorted(
            set(BROKER_CONFIGS)
            | set(broker_config.values)
            | set(broker_config.dynamic)
            | set(broker_config.dynamic_default)
        )
    else:
        wanted = list(names)
    entries = []
    for name in wanted:
        defn = BROKER_CONFIGS.get(name)
        if defn is None and not broker_config.is_set(name):
            continue
        group = BROKER_SYNONYM_GROUPS.get(name, (name,))
        # a synonym group lists the key itself first, then its lower-priority twins
        group = (name, *[g for g in group if g != name and group.index(g) > group.index(name)])
        synonyms = _broker_synonyms(broker_config, group)
        sensitive = defn is not None and defn.sensitive
        value = broker_config.get_str(name) if defn is not None else broker_config.get(name)
        entries.append(
            ConfigEntry(
                name=name,
                value=None if sensitive else value,
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                sensitive=sensitive,
                synonyms=synonyms if include_synonyms else [],
                type=defn.type if defn is not None else ConfigType.UNKNOWN,
                documentation=(defn.doc if defn is not None else None)
                if include_documentation
                else None,
            )
        )
    return entries
