"""The storage LogConfig of a topic, built from the config table's typed values."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.log_config import LOG_CONFIG_FIELDS, log_config
from odradek.metadata.config.topic_configs import TOPIC_CONFIGS
from odradek.storage.config import LogConfig


def test_log_config_layers_override_over_broker():
    config = BrokerConfig.from_properties({"log.segment.bytes": "2048", "log.roll.hours": "2"})
    lc = log_config({"retention.ms": "5000"}, config)
    assert lc.segment_bytes == 2048
    assert lc.segment_ms == 7_200_000
    assert lc.retention_ms == 5000
    assert lc.flush_messages is None
    assert lc.cleanup_policy == "delete"


# Moved from tests/unit/storage/test_checkpoints.py with its assertions: the string parsing it
# checks is the config table's now (storage's LogConfig takes typed values only).
def test_log_config_from_topic_configs() -> None:
    cfg = log_config(
        {
            "segment.bytes": "1000",
            "flush.messages": "9223372036854775807",
            "flush.ms": "50",
            "cleanup.policy": "compact, delete",
            "preallocate": "true",
            "unknown.key": "x",
        },
        BrokerConfig(),
    )
    assert cfg.segment_bytes == 1000 and cfg.flush_messages is None and cfg.flush_ms == 50
    assert cfg.cleanup_policy == "compact,delete" and cfg.preallocate is True
    assert cfg.index_interval_bytes == 4096 and cfg.segment_ms == 604800000
    with pytest.raises(ValueError, match=r"segment\.ms"):
        log_config({"segment.ms": "soon"}, BrokerConfig())


def test_every_log_config_field_is_a_topic_config() -> None:
    names = {f.name for f in dataclasses.fields(LogConfig)}
    assert set(LOG_CONFIG_FIELDS.values()) == names
    assert set(LOG_CONFIG_FIELDS) <= set(TOPIC_CONFIGS), set(LOG_CONFIG_FIELDS) - set(TOPIC_CONFIGS)


def test_defaults_match_storage_defaults_and_values_arrive_typed() -> None:
    assert log_config({}, BrokerConfig()) == LogConfig()
    cfg = log_config(
        {"min.cleanable.dirty.ratio": "0.25", "unclean.leader.election.enable": "TRUE",
         "flush.messages": "10", "cleanup.policy": "compact"},
        BrokerConfig({"log.retention.minutes": "3", "log.preallocate": "true"}),
    )
    assert cfg.min_cleanable_dirty_ratio == 0.25 and type(cfg.min_cleanable_dirty_ratio) is float
    assert cfg.unclean_leader_election_enable is True and cfg.preallocate is True
    assert cfg.flush_messages == 10 and cfg.cleanup_policy == "compact"
    assert cfg.retention_ms == 180_000 and type(cfg.retention_ms) is int
