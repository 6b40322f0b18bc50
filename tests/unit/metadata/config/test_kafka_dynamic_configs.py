"""Kafka's dynamic broker configs (DynamicBrokerConfig of Kafka 4.x: its reconfigurable
sets, per broker or cluster-wide) against odradek's table: each is known with Kafka's update
mode, AlterConfigs takes the ones odradek has no use for (describe's documentation says so),
and a per-broker one at the cluster-wide default is refused as Kafka refuses it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.metadata.config.broker_configs import BROKER_CONFIGS, BrokerConfig
from odradek.metadata.config.describe import describe_broker_configs
from odradek.metadata.config.kafka_dynamic_configs import dynamic_mode
from odradek.metadata.config.security_configs import SECURITY_DEFS
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.controller_requests import AlterOp, IncrementalAlterConfigsResource
from odradek.metadata.quorum import MetadataQuorum
from odradek.metadata.records import RESOURCE_BROKER
from odradek.protocol.errors import ErrorCode


# Kafka's dynamic broker configs and their update mode (kafka.apache.org/42 broker configs'
# "Update Mode"; DynamicBrokerConfig's sets), less the log.* synonyms of topic configs
def _names(text: str) -> list[str]:
    return text.split()


KAFKA_DYNAMIC = {
    **dict.fromkeys(_names(
        "ssl.keystore.type ssl.keystore.location ssl.keystore.password ssl.key.password "
        "ssl.keystore.certificate.chain ssl.keystore.key ssl.truststore.type "
        "ssl.truststore.location ssl.truststore.password ssl.truststore.certificates "
        "ssl.protocol ssl.provider ssl.cipher.suites ssl.enabled.protocols "
        "ssl.keymanager.algorithm ssl.trustmanager.algorithm "
        "ssl.endpoint.identification.algorithm ssl.secure.random.implementation "
        "ssl.client.auth ssl.engine.factory.class principal.builder.class "
        "listeners listener.security.protocol.map "
        "sasl.mechanism.inter.broker.protocol sasl.jaas.config sasl.enabled.mechanisms "
        "sasl.kerberos.service.name sasl.kerberos.kinit.cmd "
        "sasl.kerberos.ticket.renew.window.factor sasl.kerberos.ticket.renew.jitter "
        "sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules "
        "sasl.login.refresh.window.factor sasl.login.refresh.window.jitter "
        "sasl.login.refresh.min.period.seconds sasl.login.refresh.buffer.seconds"),
        "per-broker"),
    **dict.fromkeys(_names(
        "log.cleaner.threads log.cleaner.dedupe.buffer.size log.cleaner.io.buffer.load.factor "
        "log.cleaner.io.buffer.size message.max.bytes log.cleaner.io.max.bytes.per.second "
        "log.cleaner.backoff.ms num.io.threads num.replica.fetchers "
        "num.recovery.threads.per.data.dir background.threads metric.reporters "
        "max.connections max.connection.creation.rate num.network.threads "
        "max.connections.per.ip max.connections.per.ip.overrides producer.id.expiration.ms "
        "transaction.partition.verification.enable "
        "remote.log.index.file.cache.total.size.bytes remote.fetch.max.wait.ms "
        "remote.log.manager.copy.max.bytes.per.second "
        "remote.log.manager.fetch.max.bytes.per.second "
        "remote.list.offsets.request.timeout.ms"), "cluster-wide"),
}

# odradek uses these but cannot yet change them at runtime: refused (read-only) rather than
# accepted and silently not applied
NOT_YET_DYNAMIC = {
    "listeners", "listener.security.protocol.map",  # re-registration
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    # the listeners' TLS and SASL settings (issue 16), read when the listeners start: Kafka
    # reloads key stores and mechanisms at runtime, odradek does not yet
    *(d.name for d in SECURITY_DEFS if d.name in KAFKA_DYNAMIC),
}
# read from the node's static properties only (the transaction coordinator's, at start)
NOT_YET_KNOWN = {"transaction.partition.verification.enable", "producer.id.expiration.ms"}


def test_every_kafka_dynamic_config_has_kafkas_mode() -> None:
    unknown = {n for n in KAFKA_DYNAMIC if n not in BROKER_CONFIGS}
    assert unknown == NOT_YET_KNOWN
    modes = {n: dynamic_mode(BROKER_CONFIGS[n]) for n in KAFKA_DYNAMIC if n in BROKER_CONFIGS}
    wrong = {n: m for n, m in modes.items() if m != KAFKA_DYNAMIC[n]}
    assert wrong == dict.fromkeys(NOT_YET_DYNAMIC, "read-only")


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    c = Controller(quorum, load_image(quorum, "cid"), BrokerConfig.from_properties({}))
    c.bootstrap()
    c.register_broker()
    yield c
    quorum.close()


def alter(c: Controller, broker: str, name: str, value: str) -> ErrorCode:
    [r] = c.incremental_alter_configs([IncrementalAlterConfigsResource(
        RESOURCE_BROKER, broker, [(name, AlterOp.SET, value)])])
    return ErrorCode(r.error_code)


def test_unused_configs_are_accepted_and_say_so(controller: Controller) -> None:
    assert alter(controller, "1", "sasl.kerberos.min.time.before.relogin", "120000") == 0
    assert alter(controller, "", "metric.reporters", "") == 0
    assert alter(controller, "1", "sasl.kerberos.min.time.before.relogin", "soon") == \
        ErrorCode.invalid_config
    # per-broker configs only per broker, as Kafka
    assert alter(controller, "", "sasl.kerberos.service.name", "kafka") == \
        ErrorCode.invalid_config
    assert alter(controller, "1", "sasl.kerberos.service.name", "kafka") == 0
    # a listener's TLS settings are served (issue 16), read at start: refused at runtime
    assert alter(controller, "1", "ssl.keystore.type", "PKCS12") == ErrorCode.invalid_request
    # read-only in Kafka 4.x (KAFKA-18405): refused per broker as at the default
    assert dynamic_mode(BROKER_CONFIGS["advertised.listeners"]) == "read-only"
    for broker in ("1", ""):
        assert alter(controller, broker, "advertised.listeners", "PLAINTEXT://h:9092") == \
            ErrorCode.invalid_request
    [entry] = describe_broker_configs(controller.broker_config, include_documentation=True,
                                      names=["sasl.kerberos.min.time.before.relogin"])
    assert entry.value == "120000" and not entry.read_only
    assert "odradek has no use for this config" in (entry.documentation or "")
