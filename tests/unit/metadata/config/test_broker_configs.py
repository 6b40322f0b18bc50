"""The broker config table and BrokerConfig: defaults, node.id/broker.id, unknown keys."""

from __future__ import annotations

import pytest

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.protocol.errors import ErrorCode, KafkaError


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
