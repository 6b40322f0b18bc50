"""The topic config table: Kafka's names and types, and validation naming the bad key."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata.config.config_def import ConfigType
from odradek.metadata.config.topic_configs import TOPIC_CONFIGS, validate_topic_configs
from odradek.protocol.errors import ErrorCode, KafkaError


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


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(TOPIC_CONFIGS)), st.text(max_size=12))
def test_topic_config_values_fail_only_with_invalid_config(name, value):
    try:
        validate_topic_configs({name: value})
    except KafkaError as exc:
        assert exc.code == ErrorCode.invalid_config
        assert name in exc.message
