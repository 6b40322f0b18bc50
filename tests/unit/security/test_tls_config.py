"""ssl.* settings -> a listener's TLS context, refusals naming the key, and
ssl.principal.mapping.rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.config import ConfigError, check_config
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.security.principal_rules import NoMatchingRule, PrincipalMapper
from odradek.security.tls import TlsConfigError, server_context
from tests.support.tls_certs import CertAuthority


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return CertAuthority(tmp_path_factory.mktemp("ca"))


def _config(**values: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in values.items()})


def test_pem_pkcs12_and_encrypted_keys(ca: CertAuthority) -> None:
    plain = ca.issue("pem-server", server=True)
    enc = ca.issue("enc-server", server=True, key_password="k-pass")
    server_context(BrokerConfig({"ssl.keystore.type": "PEM",
                                 "ssl.keystore.location": str(plain.bundle)}), "SSL")
    server_context(BrokerConfig({"ssl.keystore.type": "PKCS12",
                                 "ssl.keystore.location": str(plain.p12),
                                 "ssl.keystore.password": plain.password}), "SSL")
    server_context(BrokerConfig({"ssl.keystore.type": "PEM", "ssl.key.password": "k-pass",
                                 "ssl.keystore.location": str(enc.bundle)}), "SSL")
    server_context(BrokerConfig({"ssl.keystore.type": "PEM",
                                 "ssl.keystore.key": plain.key.read_text(),
                                 "ssl.keystore.certificate.chain": plain.cert.read_text()}),
                   "SSL")
    with pytest.raises(TlsConfigError, match=r"ssl\.keystore\.location"):
        server_context(BrokerConfig({"ssl.keystore.type": "PKCS12",
                                     "ssl.keystore.location": str(plain.p12),
                                     "ssl.keystore.password": "wrong"}), "SSL")
    with pytest.raises(TlsConfigError, match="JKS"):
        server_context(BrokerConfig({"ssl.keystore.location": str(plain.p12)}), "SSL")


def test_client_auth_needs_a_truststore(ca: CertAuthority) -> None:
    server = ca.issue("auth-server", server=True)
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.bundle),
            "ssl.client.auth": "required"}
    with pytest.raises(TlsConfigError, match="truststore"):
        server_context(BrokerConfig(base), "SSL")
    import ssl

    ctx = server_context(BrokerConfig({**base, "ssl.truststore.type": "PEM",
                                       "ssl.truststore.location": str(ca.ca_pem)}), "SSL")
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    ctx = server_context(BrokerConfig({**base, "ssl.client.auth": "requested",
                                       "ssl.truststore.type": "PKCS12",
                                       "ssl.truststore.location": str(server.p12),
                                       "ssl.truststore.password": server.password}), "SSL")
    assert ctx.verify_mode == ssl.CERT_OPTIONAL


def test_protocols_and_cipher_suites(ca: CertAuthority) -> None:
    import ssl

    server = ca.issue("proto-server", server=True)
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.bundle)}
    ctx = server_context(BrokerConfig({**base, "ssl.enabled.protocols": "TLSv1.2"}), "SSL")
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    with pytest.raises(TlsConfigError, match="gap"):
        server_context(BrokerConfig({**base, "ssl.enabled.protocols": "TLSv1.1,TLSv1.3"}), "SSL")
    with pytest.raises(TlsConfigError, match="not known"):
        server_context(BrokerConfig({**base, "ssl.enabled.protocols": "SSLv3"}), "SSL")
    ctx = server_context(BrokerConfig({**base, "ssl.enabled.protocols": "TLSv1.2",
                                       "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"}),
                         "SSL")
    assert {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"} == {
        "ECDHE-ECDSA-AES128-GCM-SHA256"}
    with pytest.raises(TlsConfigError, match=r"TLS 1\.3"):
        server_context(BrokerConfig({**base, "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}),
                       "SSL")
    with pytest.raises(TlsConfigError, match="OpenSSL"):
        server_context(BrokerConfig({**base, "ssl.enabled.protocols": "TLSv1.2",
                                     "ssl.cipher.suites": "NOT-A-CIPHER"}), "SSL")


def test_per_listener_override(ca: CertAuthority, tmp_path: Path) -> None:
    server = ca.issue("override-server", server=True)
    config = BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "missing.pem"),
        "listener.name.internal.ssl.keystore.location": str(server.bundle)})
    check_config(config)  # the listener's own key store is used, not the broken global one


def test_start_refusals_name_the_key(ca: CertAuthority) -> None:
    server = ca.issue("refusal-server", server=True)
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.bundle)}
    # Kafka's default sasl.enabled.mechanisms is GSSAPI, which odradek does not serve
    with pytest.raises(ConfigError, match="GSSAPI"):
        check_config(BrokerConfig({"listeners": "SASL_SSL://127.0.0.1:9093", **tls}))
    with pytest.raises(ConfigError, match="jwks"):
        check_config(BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
                                   "sasl.enabled.mechanisms": "OAUTHBEARER"}))
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        check_config(BrokerConfig({"listeners": "SSL://127.0.0.1:9093"}))
    with pytest.raises(ConfigError, match=r"mapping\.rules"):
        check_config(BrokerConfig({"listeners": "SSL://127.0.0.1:9093", **tls,
                                   "ssl.principal.mapping.rules": "RULE:(/x"}))
    check_config(BrokerConfig({"listeners": "SASL_SSL://127.0.0.1:9093", **tls,
                               "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"}))


def test_principal_mapping_rules_as_kafka_documents() -> None:
    rules = PrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT")
    assert rules.name_of("CN=kafka-server1,OU=ServiceUsers,O=org,L=SF,ST=CA,C=US") == \
        "kafka-server1"
    assert rules.name_of("CN=adminUser,OU=Admin,O=Apache,L=SF,ST=CA,C=US") == "adminuser@admin"
    assert rules.name_of("CN=kafka1,O=Apache") == "KAFKA1"
    assert PrincipalMapper("DEFAULT").name_of("CN=a,O=b") == "CN=a,O=b"
    assert PrincipalMapper("RULE:^CN=(.*)$/$1/\nDEFAULT").name_of("O=x") == "O=x"
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name_of("O=x")
    with pytest.raises(ValueError):
        PrincipalMapper("RULE:^CN=(.*)$/$1/,garbage")


def test_secured_inter_node_listeners(ca: CertAuthority) -> None:
    """Secured controller and inter-broker listeners are served (their client side is
    test_inter_node_security's); one the node could not reach as configured is refused."""
    server = ca.issue("cluster-server", server=True)
    base = {"process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.bundle),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    with pytest.raises(ConfigError, match=r"sasl.mechanism.inter.broker.protocol must be "
                                          r"included in sasl.enabled.mechanisms"):
        check_config(BrokerConfig({
            **base, "listeners": "INTERNAL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": "INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT"}))
    check_config(BrokerConfig({
        **base, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}))
    # client listeners may be secured beside a PLAINTEXT inter-broker one
    check_config(BrokerConfig({
        **base, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,"
                             "SASL_SSL://127.0.0.1:9094",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL"}))
