from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata.configs import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigSource,
    ConfigType,
    describe_broker_configs,
    describe_topic_configs,
    log_config,
    parse_properties,
    validate_topic_configs,
)
from odradek.protocol.errors import ErrorCode, KafkaError


def entry(entries, name):
    return next(e for e in entries if e.name == name)


def test_every_kafka_topic_config_is_defined_with_its_type():
    expected = {
        "cleanup.policy": ConfigType.LIST,
        "compression.type": ConfigType.STRING,
        "delete.retention.ms": ConfigType.LONG,
        "file.delete.delay.ms": ConfigType.LONG,
        "flush.messages": ConfigType.LONG,
        "flush.ms": ConfigType.LONG,
        "follower.replication.throttled.replicas": ConfigType.LIST,
        "index.interval.bytes": ConfigType.INT,
        "leader.replication.throttled.replicas": ConfigType.LIST,
        "local.retention.bytes": ConfigType.LONG,
        "local.retention.ms": ConfigType.LONG,
        "max.compaction.lag.ms": ConfigType.LONG,
        "max.message.bytes": ConfigType.INT,
        "message.downconversion.enable": ConfigType.BOOLEAN,
        "message.format.version": ConfigType.STRING,
        "message.timestamp.after.max.ms": ConfigType.LONG,
        "message.timestamp.before.max.ms": ConfigType.LONG,
        "message.timestamp.difference.max.ms": ConfigType.LONG,
        "message.timestamp.type": ConfigType.STRING,
        "min.cleanable.dirty.ratio": ConfigType.DOUBLE,
        "min.compaction.lag.ms": ConfigType.LONG,
        "min.insync.replicas": ConfigType.INT,
        "preallocate": ConfigType.BOOLEAN,
        "remote.storage.enable": ConfigType.BOOLEAN,
        "retention.bytes": ConfigType.LONG,
        "retention.ms": ConfigType.LONG,
        "segment.bytes": ConfigType.INT,
        "segment.index.bytes": ConfigType.INT,
        "segment.jitter.ms": ConfigType.LONG,
        "segment.ms": ConfigType.LONG,
        "unclean.leader.election.enable": ConfigType.BOOLEAN,
    }
    for name, ctype in expected.items():
        assert TOPIC_CONFIGS[name].type is ctype, name


def test_broker_defaults():
    config = BrokerConfig.from_properties({})
    assert config.get_int("num.partitions") == 1
    assert config.get_int("default.replication.factor") == 1
    assert config.get_bool("auto.create.topics.enable") is True
    assert config.get_int("socket.request.max.bytes") == 104857600
    assert config.get_int("message.max.bytes") == 1048588
    assert config.get_int("offsets.topic.num.partitions") == 50
    assert config.node_id == 1
    assert config.listeners == ["PLAINTEXT://localhost:9092"]
    assert config.advertised_listeners == config.listeners
    assert config.values == {}


def test_broker_id_is_an_alias_of_node_id_and_must_agree():
    assert BrokerConfig.from_properties({"broker.id": "7"}).node_id == 7
    assert BrokerConfig.from_properties({"node.id": "3", "broker.id": "3"}).node_id == 3
    with pytest.raises(KafkaError) as err:
        BrokerConfig.from_properties({"node.id": "3", "broker.id": "4"})
    assert "broker.id" in err.value.message


def test_unknown_broker_key_is_kept_with_a_warning(caplog):
    config = BrokerConfig.from_properties({"some.plugin.setting": "x"})
    assert config.values["some.plugin.setting"] == "x"
    assert "some.plugin.setting" in caplog.text


def test_bad_broker_value_names_the_key():
    with pytest.raises(KafkaError) as err:
        BrokerConfig.from_properties({"num.partitions": "many"})
    assert err.value.code == ErrorCode.invalid_config
    assert "num.partitions" in err.value.message
    with pytest.raises(KafkaError):
        BrokerConfig.from_properties({"num.partitions": "0"})


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


@pytest.mark.parametrize(
    ("configs", "key"),
    [
        ({"segment.bytes": "13"}, "segment.bytes"),
        ({"segment.bytes": "abc"}, "segment.bytes"),
        ({"segment.bytes": "99999999999"}, "segment.bytes"),
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"cleanup.policy": "delete,forever"}, "cleanup.policy"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
        ({"preallocate": "yes"}, "preallocate"),
        ({"message.timestamp.type": "Now"}, "message.timestamp.type"),
        ({"no.such.config": "1"}, "no.such.config"),
        ({"retention.ms": None}, "retention.ms"),
        ({"leader.replication.throttled.replicas": "a:b"}, "leader.replication.throttled.replicas"),
    ],
)
def test_topic_config_validation_names_the_key(configs, key):
    with pytest.raises(KafkaError) as err:
        validate_topic_configs(configs)
    assert err.value.code == ErrorCode.invalid_config
    assert key in err.value.message


def test_valid_topic_configs_parse():
    parsed = validate_topic_configs(
        {
            "segment.bytes": "14",
            "retention.ms": "-1",
            "retention.bytes": "-1",
            "cleanup.policy": "compact, delete",
            "min.cleanable.dirty.ratio": "0.1",
            "preallocate": "TRUE",
            "leader.replication.throttled.replicas": "0:1,1:1",
        }
    )
    assert parsed["cleanup.policy"] == ["compact", "delete"]
    assert parsed["preallocate"] is True
    assert parsed["segment.bytes"] == 14


def test_compaction_lag_conflict():
    with pytest.raises(KafkaError) as err:
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert "min.compaction.lag.ms" in err.value.message


def test_log_config_layers_override_over_broker():
    config = BrokerConfig.from_properties({"log.segment.bytes": "2048", "log.roll.hours": "2"})
    lc = log_config({"retention.ms": "5000"}, config)
    assert lc.segment_bytes == 2048
    assert lc.segment_ms == 7_200_000
    assert lc.retention_ms == 5000
    assert lc.flush_messages is None
    assert lc.cleanup_policy == "delete"


def test_parse_properties():
    text = (
        "# a comment\n"
        "! another comment \\\n"
        "node.id=1\n"
        "  listeners = PLAINTEXT://localhost:9092\n"
        "log.dirs: /tmp/a\n"
        "num.partitions 3\n"
        "key\\ with\\=escapes=va\\tl\\u0041\n"
        "multi=one,\\\n"
        "      two,\\\n"
        "   three\n"
        "empty=\n"
        "\r\n"
        "colon\\:key=x\n"
        "trailing.backslash=a\\\\\n"
    )
    props = parse_properties(text)
    assert props == {
        "node.id": "1",
        "listeners": "PLAINTEXT://localhost:9092",
        "log.dirs": "/tmp/a",
        "num.partitions": "3",
        "key with=escapes": "va\tlA",
        "multi": "one,two,three",
        "empty": "",
        "colon:key": "x",
        "trailing.backslash": "a\\",
    }


def test_parse_properties_bad_unicode_escape():
    with pytest.raises(ValueError):
        parse_properties("a=\\u12\n")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab=: \\\n\r\t#!u0", max_size=60))
def test_properties_parser_never_crashes(text):
    try:
        props = parse_properties(text)
    except ValueError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(TOPIC_CONFIGS)), st.text(max_size=12))
def test_topic_config_values_fail_only_with_invalid_config(name, value):
    try:
        validate_topic_configs({name: value})
    except KafkaError as exc:
        assert exc.code == ErrorCode.invalid_config
        assert name in exc.message


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
