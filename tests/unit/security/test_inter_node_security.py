"""Issue 16: the node's own client side (inter-broker and controller listeners secured),
its config checks with Kafka's messages, the SASL client steps, PLAIN's JAAS users, and the
Envelope's principal codec (fuzzed). No processes, no sockets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.config import ConfigError, check_config, inter_node_securities
from odradek.broker.envelope import decode_principal, encode_principal
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.network.client_security import AuthenticationFailed, ClientSecurity
from odradek.protocol.errors import ProtocolError
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl.jaas import parse_jaas
from odradek.security.sasl.mechanism import SaslFailure
from odradek.security.sasl.plain import PlainServer
from odradek.security.sasl.scram import MECHANISMS, ScramServer, make_credential
from tests.support.tls_certs import CertAuthority

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_bob="b;\\"ob";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return CertAuthority(tmp_path_factory.mktemp("ca"))


def secured(ca: CertAuthority, **changes: str | None) -> dict[str, str]:
    """A combined node whose every listener is SASL_SSL (as the system test's)."""
    server = ca.issue("localhost", server=True)
    values = {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "BROKER://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "BROKER:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "BROKER",
        "controller.listener.names": "CONTROLLER",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.bundle),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.ca_pem),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.broker.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    for key, value in changes.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    return values


def refused(values: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        check_config(BrokerConfig(values))


def test_every_listener_sasl_ssl(ca: CertAuthority) -> None:
    config = BrokerConfig(secured(ca))
    check_config(config)
    peers = inter_node_securities(config)
    inter, ctrl = peers.inter_broker, peers.controller
    assert inter is not None and ctrl is not None
    assert (inter.protocol, inter.mechanism, inter.username) == ("SASL_SSL", "SCRAM-SHA-512",
                                                                 "admin")
    assert (ctrl.protocol, ctrl.mechanism) == ("SASL_SSL", "PLAIN")
    assert inter.ssl_context is not None and inter.ssl_context.check_hostname
    assert "admin-secret" not in repr(inter) and "admin-secret" not in repr(peers)
    # ssl.endpoint.identification.algorithm empty: no host name check (Kafka's way to say so)
    plain = inter_node_securities(BrokerConfig(secured(
        ca, **{"ssl.endpoint.identification.algorithm": ""}))).inter_broker
    assert plain is not None and plain.ssl_context is not None
    assert not plain.ssl_context.check_hostname


def test_kafka_rules_for_the_inter_broker_listener(ca: CertAuthority) -> None:
    refused(secured(ca, **{"security.inter.broker.protocol": "SASL_SSL"}),
            "^Only one of inter.broker.listener.name and security.inter.broker.protocol "
            "should be set.$")
    refused(secured(ca, **{"inter.broker.listener.name": "INTERNAL"}),
            "^Listener with name INTERNAL defined in inter.broker.listener.name not found in "
            "listener.security.protocol.map.$")
    refused(secured(ca, **{"sasl.mechanism.inter.broker.protocol": None}),
            "^sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
            "when SASL is used for inter-broker communication")  # Kafka's default is GSSAPI
    refused(secured(ca, **{"sasl.mechanism.controller.protocol": "SCRAM-SHA-512"}),
            "sasl.mechanism.controller.protocol must be included in sasl.enabled.mechanisms")
    # security.inter.broker.protocol names the listener of that name
    values = secured(ca, **{"inter.broker.listener.name": None,
                            "security.inter.broker.protocol": "SASL_SSL",
                            "listeners": "SASL_SSL://127.0.0.1:9092,"
                                         "CONTROLLER://127.0.0.1:9093",
                            "listener.security.protocol.map":
                                "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
                            "listener.name.broker.scram-sha-512.sasl.jaas.config": None,
                            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                                SCRAM_JAAS})
    check_config(BrokerConfig(values))
    inter = inter_node_securities(BrokerConfig(values)).inter_broker
    assert inter is not None and inter.mechanism == "SCRAM-SHA-512"


def test_what_the_node_cannot_do_is_refused(ca: CertAuthority) -> None:
    refused(secured(ca, **{"listener.name.broker.scram-sha-512.sasl.jaas.config": None}),
            "listener.name.broker.scram-sha-512.sasl.jaas.config is not set")
    refused(secured(ca, **{"listener.name.broker.scram-sha-512.sasl.jaas.config":
                           PLAIN_JAAS}), "PlainLoginModule entry where a SCRAM login module")
    refused(secured(ca, **{"listener.name.broker.scram-sha-512.sasl.jaas.config":
                           "org.apache.kafka.common.security.scram.ScramLoginModule "
                           "required username=\"admin\";"}), "needs username and password")
    # SCRAM credentials live in the metadata log the controllers must first agree on
    refused(secured(ca, **{"sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
                           "listener.name.controller.sasl.enabled.mechanisms":
                               "SCRAM-SHA-512"}), "cannot authenticate nodes with SCRAM")
    refused(secured(ca, **{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
                           "sasl.enabled.mechanisms": "OAUTHBEARER"}),
            "authenticate to each other with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 only")
    # a broker-only node has no controller listener: the mechanism cannot be checked
    # against one, but the credentials still must be there
    broker_only = secured(ca, **{"process.roles": "broker", "node.id": "4",
                                 "listeners": "BROKER://127.0.0.1:9092"})
    check_config(BrokerConfig(broker_only))
    broker_only.pop("listener.name.controller.plain.sasl.jaas.config")
    refused(broker_only, "listener.name.controller.plain.sasl.jaas.config is not set")


def test_plaintext_peers_need_nothing(ca: CertAuthority) -> None:
    values = {"process.roles": "broker,controller", "node.id": "1",
              "controller.quorum.voters": "1@127.0.0.1:9093",
              "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}
    peers = inter_node_securities(BrokerConfig(values))
    assert peers.inter_broker is None and peers.controller is None


def test_jaas_entries() -> None:
    entry = parse_jaas(PLAIN_JAAS)
    assert entry.kind == "PLAIN" and entry.options["password"] == "admin-secret"
    assert entry.plain_users() == {"admin": "admin-secret", "bob": 'b;"ob'}
    assert "admin-secret" not in repr(entry)
    for bad in ("", "username=x;", "a.b.Module required username=\"x\"",
                "a.b.Module required username=\"x\" ?;"):
        with pytest.raises(ValueError):
            parse_jaas(bad)


def test_plain_checks_the_listener_jaas_users_first() -> None:
    stored = make_credential("SCRAM-SHA-256", "stored-secret")
    users = parse_jaas(PLAIN_JAAS).plain_users()

    def server() -> PlainServer:
        return PlainServer(lambda u: [("SCRAM-SHA-256", stored)] if u in ("admin", "carol")
                           else [], users)

    s = server()
    s.step(b"\0admin\0admin-secret")
    assert s.complete and s.username == "admin"
    with pytest.raises(SaslFailure):  # a JAAS user is checked against JAAS only
        server().step(b"\0admin\0stored-secret")
    s = server()
    s.step(b"\0carol\0stored-secret")  # others: the stored SCRAM credentials
    assert s.username == "carol"


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_client_exchange_against_our_server(mechanism: str) -> None:
    cred = make_credential(mechanism, "pw")
    sec = ClientSecurity("SASL_PLAINTEXT", None, mechanism, "we,ird=user", "pw")
    server = ScramServer(mechanism, lambda u: cred if u == "we,ird=user" else None)
    steps = sec.sasl_exchange()
    token = next(steps)
    with pytest.raises(StopIteration):
        while True:
            token = steps.send(server.step(token))
    assert server.complete and server.username == "we,ird=user"
    # a server final message without the right signature (a server that does not hold the
    # stored key cannot make it) fails the exchange
    other = ScramServer(mechanism, lambda u: make_credential(mechanism, "pw"))
    steps = ClientSecurity("SASL_PLAINTEXT", None, mechanism, "u", "pw").sasl_exchange()
    steps.send(other.step(next(steps)))
    with pytest.raises(AuthenticationFailed, match="signature"):
        steps.send(b"v=" + b"A" * 88)
    with pytest.raises(ValueError):
        ClientSecurity("SASL_SSL", None, "PLAIN", "u", "p")  # SASL_SSL without TLS


def test_principal_codec() -> None:
    for p in (KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "CN=a,O=b:c"),
              KafkaPrincipal("Group", "ü")):
        assert decode_principal(encode_principal(p)) == p
    # Kafka's own bytes for User:ANONYMOUS (version 0, compact strings, false, no tags)
    assert encode_principal(KafkaPrincipal("User", "ANONYMOUS")) == \
        b"\x00\x00\x05User\x0aANONYMOUS\x00\x00"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_principal_decoder_fuzzed(data: bytes) -> None:
    try:
        principal = decode_principal(data)
    except ProtocolError:
        return
    assert principal.principal_type and principal.name
