"""Issue 14.1: KRaft config rules (Kafka's KafkaConfig.validateValues), refused in one line."""

from __future__ import annotations

import pytest

from odradek.broker.config import (
    ConfigError,
    broker_listeners,
    check_config,
    controller_listener_names,
    controller_listeners,
    has_quorum,
    inter_broker_listener_name,
    parse_voters,
    security_protocol_map,
)
from odradek.metadata.config.broker_configs import BrokerConfig

VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"
COMBINED = {"node.id": "1", "process.roles": "broker,controller",
            "controller.quorum.voters": VOTERS,
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}


def config(**values: str) -> BrokerConfig:
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in values.items()})


def cfg(base: dict[str, str], **changes: str | None) -> BrokerConfig:
    values = dict(base)
    for key, value in changes.items():
        key = key.replace("_", ".")
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    return BrokerConfig.from_properties(values)


def test_kafka_defaults_of_the_cluster_keys() -> None:
    c = BrokerConfig.from_properties({})
    assert c.get_int("broker.heartbeat.interval.ms") == 2000
    assert c.get_int("broker.session.timeout.ms") == 9000
    assert c.get_int("replica.lag.time.max.ms") == 30_000
    assert c.get_int("replica.fetch.wait.max.ms") == 500
    assert c.get_int("replica.fetch.min.bytes") == 1
    assert c.get_int("replica.fetch.response.max.bytes") == 10_485_760
    assert c.get_int("replica.fetch.backoff.ms") == 1000
    assert c.get_int("num.replica.fetchers") == 1
    assert c.get_int("default.replication.factor") == 1
    assert c.get_int("min.insync.replicas") == 1
    assert c.get_bool("unclean.leader.election.enable") is False
    assert c.get_bool("auto.leader.rebalance.enable") is True
    assert c.get_int("controller.quorum.election.timeout.ms") == 1000
    assert c.get_int("controller.quorum.fetch.timeout.ms") == 2000
    assert c.get_int("metadata.log.max.record.bytes.between.snapshots") == 20 * 1024 * 1024
    assert c.get_str("replica.selector.class") is None


def test_single_node_has_no_quorum_and_stays_valid() -> None:
    c = config(listeners="PLAINTEXT://localhost:9092")
    check_config(c)
    assert not has_quorum(c)
    assert controller_listeners(c) == []
    assert [lst.name for lst in broker_listeners(c)] == ["PLAINTEXT"]


def test_combined_node() -> None:
    c = cfg(COMBINED)
    check_config(c)
    assert controller_listener_names(c) == ["CONTROLLER"]
    assert security_protocol_map(c)["CONTROLLER"] == "PLAINTEXT"
    assert [lst.port for lst in controller_listeners(c)] == [9093]
    assert [lst.name for lst in broker_listeners(c)] == ["PLAINTEXT"]
    assert inter_broker_listener_name(c) == "PLAINTEXT"


def test_parse_voters() -> None:
    voters = parse_voters(VOTERS.split(","))
    assert sorted(voters) == [1, 2, 3]
    assert (voters[2].host, voters[2].port) == ("127.0.0.1", 9095)
    assert parse_voters(["4@[::1]:9093"])[4].host == "::1"
    for bad in (["1@host"], ["x@h:1"], ["h:1"], ["1@h:1", "1@h:2"], ["1@h:0"]):
        with pytest.raises(ConfigError, match=r"controller\.quorum\.voters"):
            parse_voters(bad)


@pytest.mark.parametrize(("changes", "words"), [
    ({"process.roles": "controller"}, ["needs a quorum"]),
    ({"process.roles": "broker"}, ["needs a quorum"]),
])
def test_roles_without_a_quorum_are_refused(changes: dict[str, str], words: list[str]) -> None:
    with pytest.raises(ConfigError) as exc:
        check_config(BrokerConfig.from_properties(changes))
    for word in words:
        assert word in str(exc.value)


@pytest.mark.parametrize(("changes", "words"), [
    ({"node.id": None}, ["node.id"]),
    ({"node.id": "7"}, ["node.id 7", "controller.quorum.voters"]),
    ({"controller.quorum.voters": "1@h"}, ["controller.quorum.voters", "id@host:port"]),
    ({"controller.listener.names": "CTRL",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"},
     ["controller.listener.names", "listeners"]),
    ({"process.roles": "controller"}, ["only contain controller listeners", "PLAINTEXT"]),
    ({"process.roles": "broker"}, ["must not be in the set of voters"]),
    ({"inter.broker.listener.name": "CONTROLLER"}, ["must not be a controller listener"]),
    ({"inter.broker.listener.name": "OTHER"}, ["inter.broker.listener.name", "OTHER"]),
    ({"process.roles": "witness"}, ["process.roles"]),
])
def test_refusals(changes: dict[str, str | None], words: list[str]) -> None:
    with pytest.raises((ConfigError, ValueError)) as exc:
        check_config(cfg(COMBINED, **{k.replace(".", "_"): v for k, v in changes.items()}))
    for word in words:
        assert word in str(exc.value), (word, str(exc.value))


def test_split_roles() -> None:
    controller = cfg(COMBINED, process_roles="controller",
                     listeners="CONTROLLER://127.0.0.1:9093")
    check_config(controller)
    assert broker_listeners(controller) == []
    broker = cfg(COMBINED, node_id="4", process_roles="broker",
                 listeners="PLAINTEXT://127.0.0.1:9099")
    check_config(broker)
    assert controller_listeners(broker) == []
    with pytest.raises(ConfigError, match="must not contain a value appearing in listeners"):
        check_config(cfg(COMBINED, node_id="4", process_roles="broker"))


def test_inter_broker_listener_defaults_to_first_broker_listener() -> None:
    c = cfg(COMBINED, listeners="INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,"
            "EXTERNAL://127.0.0.1:9094",
            listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,"
            "CONTROLLER:PLAINTEXT")
    check_config(c)
    assert inter_broker_listener_name(c) == "INTERNAL"
