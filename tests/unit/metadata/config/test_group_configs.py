"""Configs on GROUP resources (type 32): Kafka 4.2's GroupConfig names, bounds against the
broker's group.* min/max, ConfigRecords through the controller, and describe's sources."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.config_def import ConfigSource, ConfigType
from odradek.metadata.config.group_configs import (
    GROUP_CONFIGS,
    describe_group_configs,
    validate_group_configs,
)
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.controller_requests import (
    AlterConfigsResource,
    AlterOp,
    IncrementalAlterConfigsResource,
)
from odradek.metadata.quorum import MetadataQuorum
from odradek.metadata.records import RESOURCE_GROUP
from odradek.protocol.errors import ErrorCode, KafkaError

E = ErrorCode
S, D, A = AlterOp.SET, AlterOp.DELETE, AlterOp.APPEND

# Kafka 4.2's group configs (kafka.apache.org/42/configuration/group-configs): type, default
KAFKA_42_GROUP_CONFIGS = {
    "consumer.heartbeat.interval.ms": (ConfigType.INT, 5000),
    "consumer.session.timeout.ms": (ConfigType.INT, 45000),
    "share.auto.offset.reset": (ConfigType.STRING, "latest"),
    "share.heartbeat.interval.ms": (ConfigType.INT, 5000),
    "share.isolation.level": (ConfigType.STRING, "read_uncommitted"),
    "share.record.lock.duration.ms": (ConfigType.INT, 30000),
    "share.session.timeout.ms": (ConfigType.INT, 45000),
    "streams.heartbeat.interval.ms": (ConfigType.INT, 5000),
    "streams.initial.rebalance.delay.ms": (ConfigType.INT, 3000),
    "streams.num.standby.replicas": (ConfigType.INT, 0),
    "streams.session.timeout.ms": (ConfigType.INT, 45000),
}


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    c = Controller(quorum, load_image(quorum, "cid"), BrokerConfig.from_properties({}))
    c.bootstrap()
    c.register_broker()
    yield c
    quorum.close()


def test_the_table_is_kafka_42s() -> None:
    assert {n: (d.type, d.default) for n, d in GROUP_CONFIGS.items()} == KAFKA_42_GROUP_CONFIGS


def code_of(overrides: dict[str, str | None], broker: dict[str, str] | None = None) -> ErrorCode:
    try:
        validate_group_configs(overrides, BrokerConfig(broker or {}).get)
    except KafkaError as exc:
        return exc.code
    return E.none


@pytest.mark.parametrize(("overrides", "broker", "code"), [
    ({"consumer.session.timeout.ms": "50000"}, {}, E.none),
    ({"consumer.session.timeout.ms": "60000"}, {}, E.none),
    # beyond group.consumer.max.session.timeout.ms (60000) / below its min (45000)
    ({"consumer.session.timeout.ms": "60001"}, {}, E.invalid_config),
    ({"consumer.session.timeout.ms": "44999"}, {}, E.invalid_config),
    ({"consumer.session.timeout.ms": "10000"},
     {"group.consumer.min.session.timeout.ms": "6000"}, E.none),
    ({"consumer.heartbeat.interval.ms": "15001"}, {}, E.invalid_config),
    ({"consumer.heartbeat.interval.ms": "7000"}, {}, E.none),
    ({"consumer.session.timeout.ms": "x"}, {}, E.invalid_config),
    # the session must outlast the heartbeat interval
    ({"consumer.session.timeout.ms": "10000", "consumer.heartbeat.interval.ms": "10000"},
     {"group.consumer.min.session.timeout.ms": "1000"}, E.invalid_config),
    ({"share.auto.offset.reset": "earliest"}, {}, E.none),
    ({"share.auto.offset.reset": "by_duration:PT1H30M"}, {}, E.none),
    ({"share.auto.offset.reset": "by_duration:P1D"}, {}, E.none),
    ({"share.auto.offset.reset": "by_duration:-PT1H"}, {}, E.invalid_config),
    ({"share.auto.offset.reset": "by_duration:soon"}, {}, E.invalid_config),
    ({"share.auto.offset.reset": "none"}, {}, E.invalid_config),
    ({"share.isolation.level": "read_committed"}, {}, E.none),
    ({"share.isolation.level": "serializable"}, {}, E.invalid_config),
    ({"share.record.lock.duration.ms": "60000"}, {}, E.none),
    ({"share.record.lock.duration.ms": "14999"}, {}, E.invalid_config),
    ({"share.record.lock.duration.ms": "60001"}, {}, E.invalid_config),
    ({"streams.num.standby.replicas": "2"}, {}, E.none),
    ({"streams.num.standby.replicas": "3"}, {}, E.invalid_config),
    ({"session.timeout.ms": "50000"}, {}, E.invalid_config),
])
def test_validation(overrides: dict[str, str | None], broker: dict[str, str],
                    code: ErrorCode) -> None:
    assert code_of(overrides, broker) == code


def test_messages_name_the_broker_bound() -> None:
    with pytest.raises(KafkaError) as info:
        validate_group_configs({"consumer.session.timeout.ms": "70000"}, BrokerConfig({}).get)
    assert info.value.message == ("consumer.session.timeout.ms must be less than or equal to "
                                  "group.consumer.max.session.timeout.ms")


def test_stored_as_config_records_of_the_group(controller: Controller) -> None:
    [res] = controller.incremental_alter_configs([IncrementalAlterConfigsResource(
        RESOURCE_GROUP, "g", [("consumer.session.timeout.ms", S, "50000"),
                              ("share.auto.offset.reset", S, "earliest")])])
    assert res.error_code == E.none
    assert controller.image.configs[(RESOURCE_GROUP, "g")] == {
        "consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}
    bad = controller.incremental_alter_configs([
        IncrementalAlterConfigsResource(RESOURCE_GROUP, "g", [("share.auto.offset.reset", A,
                                                               "latest")]),
        IncrementalAlterConfigsResource(RESOURCE_GROUP, "g", [("consumer.session.timeout.ms",
                                                               S, "1")]),
        IncrementalAlterConfigsResource(RESOURCE_GROUP, "", [("consumer.session.timeout.ms",
                                                              S, "50000")]),
    ])
    assert [r.error_code for r in bad] == [E.invalid_config, E.invalid_config, E.invalid_request]
    controller.incremental_alter_configs([IncrementalAlterConfigsResource(
        RESOURCE_GROUP, "g", [("share.auto.offset.reset", D, None)])])
    assert controller.image.configs[(RESOURCE_GROUP, "g")] == {
        "consumer.session.timeout.ms": "50000"}
    # legacy AlterConfigs replaces every override of the group
    [legacy] = controller.alter_configs([AlterConfigsResource(
        RESOURCE_GROUP, "g", [("share.isolation.level", "read_committed")])])
    assert legacy.error_code == E.none
    assert controller.image.configs[(RESOURCE_GROUP, "g")] == {
        "share.isolation.level": "read_committed"}


def test_describe_sources_and_broker_defaults() -> None:
    broker = BrokerConfig({"group.consumer.heartbeat.interval.ms": "6000"})
    entries = {e.name: e for e in describe_group_configs(
        {"consumer.session.timeout.ms": "50000"}, broker.get, include_synonyms=True,
        include_documentation=True)}
    assert sorted(entries) == sorted(KAFKA_42_GROUP_CONFIGS)
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("50000", ConfigSource.GROUP_CONFIG)
    assert [(s.value, s.source) for s in session.synonyms] == [
        ("50000", ConfigSource.GROUP_CONFIG), ("45000", ConfigSource.DEFAULT_CONFIG)]
    # a group without its own value takes the broker's group.consumer.* value
    interval = entries["consumer.heartbeat.interval.ms"]
    assert (interval.value, interval.source) == ("6000", ConfigSource.DEFAULT_CONFIG)
    assert "share groups" in (entries["share.auto.offset.reset"].documentation or "")
