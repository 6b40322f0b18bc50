"""max.connections.per.ip.overrides parsing and the per-address limit it gives."""

from __future__ import annotations

import pytest

from odradek.broker.acceptor import INT_MAX, ConnectionLimits, parse_overrides


def test_overrides_parse_kafka_syntax() -> None:
    assert parse_overrides("127.0.0.1:200, 10.0.0.7:0") == {"127.0.0.1": 200, "10.0.0.7": 0}
    assert parse_overrides("") == {}
    assert parse_overrides("[::1]:5") == {"::1": 5}


def test_a_hostname_is_resolved_once() -> None:
    assert parse_overrides("localhost:3").get("127.0.0.1") == 3


@pytest.mark.parametrize("bad", ["127.0.0.1", "127.0.0.1:x", ":5"])
def test_bad_entries_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_overrides(bad)


def test_limit_for_an_address() -> None:
    limits = ConnectionLimits(max_per_ip=10, overrides={"10.0.0.1": 50})
    assert limits.per_ip("10.0.0.1") == 50
    assert limits.per_ip("10.0.0.2") == 10
    assert ConnectionLimits().per_ip("x") == INT_MAX


def test_the_config_keys_have_kafkas_defaults_and_checks() -> None:
    from odradek.metadata.config.broker_configs import BrokerConfig
    from odradek.metadata.config.config_def import ConfigError

    config = BrokerConfig({"max.connections.per.ip.overrides": "127.0.0.2:40"})
    limits = ConnectionLimits.from_config(config)
    assert limits.max_connections == INT_MAX and limits.max_per_ip == INT_MAX
    assert limits.overrides == {"127.0.0.2": 40}
    with pytest.raises(ConfigError):
        BrokerConfig({"max.connections.per.ip.overrides": "127.0.0.2"})
    with pytest.raises(ConfigError):
        BrokerConfig({"max.connections": "-1"})
