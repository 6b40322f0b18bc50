"""Issue 16, point 5: the client settings of the services `odradek serve` runs beside its
node (schema.registry.kafkastore.*, console.kafka.*): which listener each service connects
to, and the refusals at start when it could not log in (sans-I/O: config in, answer out)."""

from __future__ import annotations

import os

import pytest

from odradek.broker.startup import StartRefused
from odradek.cli.service_clients import CONSOLE_PREFIX, REGISTRY_PREFIX, service_client
from odradek.client.security_settings import read_command_config
from odradek.metadata.config.broker_configs import BrokerConfig

# a single node (its own quorum) whose only listener is SASL_SSL
SASL_ONLY = {"listeners": "SASL_SSL://127.0.0.1:9094"}
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="registry" password="s3cret";')


def _client(settings: dict[str, str], prefix: str = REGISTRY_PREFIX) -> object:
    return service_client(BrokerConfig.from_properties(settings), prefix, "the Schema Registry",
                          "schema.registry.listeners")


def test_a_plaintext_listener_needs_nothing() -> None:
    both = {"listeners": "SASL_SSL://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092"}
    client = _client(both)
    assert client.listener == "PLAINTEXT" and dict(client.settings) == {}
    assert client.open_pipe() is None


def test_a_node_whose_only_listener_needs_sasl_refuses_a_service_without_credentials() -> None:
    with pytest.raises(StartRefused) as refused:
        _client(SASL_ONLY)
    text = str(refused.value)
    assert "no client listener of the node is PLAINTEXT" in text
    assert "SASL_SSL (SASL_SSL)" in text and "schema.registry.kafkastore.security.protocol" in text
    assert "schema.registry.listeners= (empty)" in text
    with pytest.raises(StartRefused, match=r"console\.kafka\.security\.protocol"):
        service_client(BrokerConfig.from_properties(SASL_ONLY), CONSOLE_PREFIX, "the console",
                       "console.listeners")


@pytest.mark.parametrize("prefix", [REGISTRY_PREFIX, CONSOLE_PREFIX])
def test_credentials_pick_the_listener_of_their_protocol(prefix: str) -> None:
    settings = {**SASL_ONLY, f"{prefix}security.protocol": "SASL_SSL",
                f"{prefix}sasl.mechanism": "SCRAM-SHA-512",
                f"{prefix}sasl.jaas.config": JAAS,
                f"{prefix}ssl.truststore.type": "PEM",
                f"{prefix}ssl.truststore.location": "/etc/ca.pem"}
    client = _client(settings, prefix)
    assert client.listener == "SASL_SSL"
    fd = client.open_pipe()
    assert fd is not None
    try:
        # what the child reads as --command-config /dev/fd/N: the Kafka names, unchanged
        got = read_command_config(f"/dev/fd/{fd}")
    finally:
        os.close(fd)
    assert got == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                   "sasl.jaas.config": JAAS, "ssl.truststore.type": "PEM",
                   "ssl.truststore.location": "/etc/ca.pem"}


def test_what_no_client_can_honour_is_refused_naming_the_key() -> None:
    with pytest.raises(StartRefused, match=r"no client listener of this node speaks SSL"):
        _client({**SASL_ONLY, f"{REGISTRY_PREFIX}security.protocol": "SSL"})
    with pytest.raises(StartRefused,
                       match=r"schema\.registry\.kafkastore\.ssl\.truststore\.location: a JKS"):
        _client({**SASL_ONLY, f"{REGISTRY_PREFIX}security.protocol": "SASL_SSL",
                 f"{REGISTRY_PREFIX}ssl.truststore.location": "/x/trust.jks"})
    with pytest.raises(StartRefused, match=r"console\.kafka\.bootstrap\.servers: only"):
        _client({**SASL_ONLY, f"{CONSOLE_PREFIX}bootstrap.servers": "elsewhere:9092"},
                CONSOLE_PREFIX)


def test_the_settings_are_masked_in_the_config_repr() -> None:
    config = BrokerConfig.from_properties({**SASL_ONLY,
                                           f"{REGISTRY_PREFIX}sasl.jaas.config": JAAS})
    assert "s3cret" not in repr(config)
