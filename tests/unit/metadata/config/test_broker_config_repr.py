"""A BrokerConfig's repr (logs, tracebacks) hides passwords and JAAS entries."""

from __future__ import annotations

from odradek.metadata.config.broker_configs import BrokerConfig


def test_repr_hides_passwords_and_jaas_entries() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="broker" password="s3cret-jaas" user_alice="alice-pw";')
    config = BrokerConfig({
        "node.id": "1",
        "ssl.keystore.password": "s3cret-keystore",
        "listener.name.internal.plain.sasl.jaas.config": jaas,
        "listener.name.internal.ssl.key.password": "s3cret-key",
    })
    text = repr(config)
    assert "s3cret" not in text and "alice-pw" not in text
    assert "'node.id': '1'" in text
    assert text.count("[hidden]") == 3
