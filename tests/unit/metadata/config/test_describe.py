"""DescribeConfigs entries: values, sources and synonyms of topics and brokers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata.config.broker_configs import BROKER_CONFIGS, BrokerConfig
from odradek.metadata.config.config_def import ConfigSource, ConfigType
from odradek.metadata.config.describe import describe_broker_configs, describe_topic_configs
from odradek.metadata.config.log_config import log_config
from odradek.metadata.config.topic_configs import TOPIC_CONFIGS, validate_topic_configs
from odradek.protocol.errors import KafkaError


def entry(entries, name):
    return next(e for e in entries if e.name == name)


def test_topic_default_from_broker_synonyms_in_kafka_order():
    config = BrokerConfig.from_properties({"log.retention.hours": "2", "log.retention.minutes": "30"})
    entries = describe_topic_configs({}, config, include_synonyms=True)
    retention = entry(entries, "retention.ms")
    assert retention.value == str(30 * 60_000)  # minutes beat hours
    assert retention.source == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.minutes", "30", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]


def test_topic_override_comes_first_and_sources():
    config = BrokerConfig.from_properties({"log.roll.hours": "1"})
    entries = describe_topic_configs(
        {"segment.bytes": "1000"}, config, include_synonyms=True, include_documentation=True
    )
    seg = entry(entries, "segment.bytes")
    assert (seg.value, seg.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [s.name for s in seg.synonyms] == ["segment.bytes", "log.segment.bytes"]
    assert seg.documentation
    assert seg.type == ConfigType.INT
    seg_ms = entry(entries, "segment.ms")
    assert seg_ms.value == "3600000"
    assert seg_ms.source == ConfigSource.STATIC_BROKER_CONFIG
    assert [s.name for s in seg_ms.synonyms] == ["log.roll.hours", "log.roll.hours"]
    ret = entry(entries, "retention.ms")
    assert (ret.value, ret.source) == ("604800000", ConfigSource.DEFAULT_CONFIG)
    flush = entry(entries, "flush.ms")
    assert [s.name for s in flush.synonyms] == ["log.flush.scheduler.interval.ms"]
    cleanup = entry(entries, "cleanup.policy")
    assert cleanup.value == "delete"
    assert not entry(describe_topic_configs({}, config), "segment.ms").synonyms


def test_dynamic_broker_configs_beat_static_ones():
    config = BrokerConfig(
        {"log.retention.ms": "1000"}, dynamic={"log.retention.ms": "3000"},
        dynamic_default={"log.retention.ms": "2000"},
    )
    ret = entry(describe_topic_configs({}, config, include_synonyms=True), "retention.ms")
    assert ret.value == "3000"
    assert ret.source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [s.source for s in ret.synonyms][:3] == [
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
    ]


def test_describe_broker_configs():
    config = BrokerConfig.from_properties({"num.partitions": "3", "custom.key": "v"})
    entries = describe_broker_configs(config, include_synonyms=True)
    num = entry(entries, "num.partitions")
    assert (num.value, num.source, num.read_only) == ("3", ConfigSource.STATIC_BROKER_CONFIG, True)
    assert entry(entries, "custom.key").type == ConfigType.UNKNOWN
    hours = entry(entries, "log.retention.hours")
    assert (hours.value, hours.source) == ("168", ConfigSource.DEFAULT_CONFIG)
    ms = entry(entries, "log.retention.ms")
    assert ms.value is None
    assert ms.read_only is False
    assert [s.name for s in ms.synonyms] == ["log.retention.hours"]
    assert set(BROKER_CONFIGS) <= {e.name for e in entries}


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(TOPIC_CONFIGS)), st.sampled_from(["1", "0", "-1", "100000", "true", "delete", "0.5"]), max_size=4))
def test_describe_agrees_with_log_config(overrides):
    try:
        validate_topic_configs(overrides)
    except KafkaError:
        return
    config = BrokerConfig.from_properties({})
    entries = {e.name: e for e in describe_topic_configs(overrides, config)}
    lc = log_config(overrides, config)
    assert entries["segment.bytes"].value == str(lc.segment_bytes)
    assert entries["retention.ms"].value == str(lc.retention_ms)
    for name in overrides:
        assert entries[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
