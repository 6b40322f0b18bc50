"""Kafka's configs, split by concern; each module is imported by name (nothing is re-exported).

- `config_def`: what a config is (`ConfigDef`, `ConfigType`, `ConfigSource`, `ConfigEntry`),
  parsing and printing values as Kafka does, the validators, `ConfigError` (INVALID_CONFIG).
- `topic_configs`: the topic config table `TOPIC_CONFIGS` and `validate_topic_configs`.
- `broker_configs`: the broker config table `BROKER_CONFIGS` (odradek's own keys included)
  and `BrokerConfig`, a node's layered values (default < static < dynamic).
- `describe`: DescribeConfigs entries with their sources and synonyms.
- `log_config`: a topic's effective values and the typed storage `LogConfig` built from them.
- `java_properties`: the .properties syntax server.properties and meta.properties use.
"""
