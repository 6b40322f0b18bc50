"""Kafka's dynamic broker configs: which ones a broker takes at runtime, and at what level.

Kafka changes some broker configs at runtime (DynamicBrokerConfig): per broker (security and
listener configs: each broker has its own keystore) or cluster-wide (the rest). A
per-broker config set at the cluster-wide default is refused, as Kafka refuses it.

`UNUSED_DYNAMIC_DEFS` are the dynamic broker configs of Kafka 4.2 that odradek has no use
for: TLS and SASL settings of the broker (odradek's listeners are PLAINTEXT), Kerberos
login, metrics reporters (odradek serves /metrics itself) and tiered storage. Kafka accepts
them in AlterConfigs, so odradek does too; it stores them, and describe's documentation says
that odradek does not apply them.
"""

from __future__ import annotations

from typing import Any

from odradek.metadata.config.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigType,
    Validator,
    at_least,
    between,
    one_of,
)
from odradek.metadata.config.security_configs import SECURITY_DEFS

__all__ = ["PER_BROKER_CONFIGS", "UNUSED_DYNAMIC_DEFS", "dynamic_mode"]

S, I, L, D, LST, P, C, SH = (  # noqa: E741
    ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST,
    ConfigType.PASSWORD, ConfigType.CLASS, ConfigType.SHORT,
)

_UNUSED = "odradek has no use for this config: accepted and stored, not applied. Kafka: "


def _u(name: str, ctype: ConfigType, default: Any, validator: Validator | None,
       doc: str) -> ConfigDef:
    return ConfigDef(name, ctype, default, validator, _UNUSED + doc, (), True)


_KAFKA_DYNAMIC_UNUSED = [
    # the broker's TLS material and settings (SslConfigs, DynamicListenerConfig)
    _u("ssl.keystore.type", S, "JKS", None, "The file format of the key store file."),
    _u("ssl.keystore.location", S, None, None, "The location of the key store file."),
    _u("ssl.keystore.password", P, None, None, "The store password for the key store file."),
    _u("ssl.key.password", P, None, None, "The password of the private key."),
    _u("ssl.keystore.certificate.chain", P, None, None,
       "Certificate chain in the format specified by ssl.keystore.type."),
    _u("ssl.keystore.key", P, None, None,
       "Private key in the format specified by ssl.keystore.type."),
    _u("ssl.truststore.type", S, "JKS", None, "The file format of the trust store file."),
    _u("ssl.truststore.location", S, None, None, "The location of the trust store file."),
    _u("ssl.truststore.password", P, None, None, "The password for the trust store file."),
    _u("ssl.truststore.certificates", P, None, None,
       "Trusted certificates in the format specified by ssl.truststore.type."),
    _u("ssl.protocol", S, "TLSv1.3", None, "The SSL protocol used to generate the SSLContext."),
    _u("ssl.provider", S, None, None, "The name of the security provider for SSL."),
    _u("ssl.cipher.suites", LST, [], None, "A list of cipher suites."),
    _u("ssl.enabled.protocols", LST, ["TLSv1.2", "TLSv1.3"], None,
       "The list of protocols enabled for SSL connections."),
    _u("ssl.keymanager.algorithm", S, "SunX509", None,
       "The algorithm used by the key manager factory."),
    _u("ssl.trustmanager.algorithm", S, "PKIX", None,
       "The algorithm used by the trust manager factory."),
    _u("ssl.endpoint.identification.algorithm", S, "https", None,
       "The endpoint identification algorithm to validate server hostname."),
    _u("ssl.secure.random.implementation", S, None, None,
       "The SecureRandom PRNG implementation to use for SSL operations."),
    _u("ssl.client.auth", S, "none", one_of("required", "requested", "none"),
       "Whether the broker requires client authentication."),
    _u("ssl.engine.factory.class", C, None, None,
       "The class of type SslEngineFactory providing SSLEngine objects."),
    _u("principal.builder.class", C,
       "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", None,
       "The class of type KafkaPrincipalBuilder used to build the principal."),
    # SASL and Kerberos login (DynamicListenerConfig)
    _u("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", None,
       "SASL mechanism used for inter-broker communication."),
    _u("sasl.jaas.config", P, None, None, "JAAS login context parameters for SASL connections."),
    _u("sasl.enabled.mechanisms", LST, ["GSSAPI"], None,
       "The list of SASL mechanisms enabled in the server."),
    _u("sasl.kerberos.service.name", S, None, None,
       "The Kerberos principal name that Kafka runs as."),
    _u("sasl.kerberos.kinit.cmd", S, "/usr/bin/kinit", None, "Kerberos kinit command path."),
    _u("sasl.kerberos.ticket.renew.window.factor", D, 0.8, None,
       "Fraction of the ticket lifetime after which the login thread renews it."),
    _u("sasl.kerberos.ticket.renew.jitter", D, 0.05, None,
       "Percentage of random jitter added to the renewal time."),
    _u("sasl.kerberos.min.time.before.relogin", L, 60_000, None,
       "Login thread sleep time between refresh attempts."),
    _u("sasl.kerberos.principal.to.local.rules", LST, ["DEFAULT"], None,
       "Rules for mapping from principal names to short names."),
    _u("sasl.login.refresh.window.factor", D, 0.8, between(0.5, 1.0),
       "Fraction of the credential lifetime after which the login refresh thread refreshes."),
    _u("sasl.login.refresh.window.jitter", D, 0.05, between(0.0, 0.25),
       "Maximum random jitter added to the login refresh thread's sleep time."),
    _u("sasl.login.refresh.min.period.seconds", SH, 60, between(0, 900),
       "The minimum time for the login refresh thread to wait before refreshing."),
    _u("sasl.login.refresh.buffer.seconds", SH, 300, between(0, 3600),
       "The time to maintain around credential expiration when refreshing."),
    # metrics and tiered storage
    _u("metric.reporters", LST, ["org.apache.kafka.common.metrics.JmxReporter"], None,
       "A list of classes to use as metrics reporters."),
    _u("remote.log.index.file.cache.total.size.bytes", L, 1_073_741_824, at_least(1),
       "The total size of the space allocated to store index files fetched from remote "
       "storage."),
    _u("remote.fetch.max.wait.ms", I, 500, at_least(1),
       "The maximum amount of time the server waits for remote fetch data."),
    _u("remote.log.manager.copy.max.bytes.per.second", L, LONG_MAX, at_least(1),
       "The maximum number of bytes that can be copied from local storage to remote storage "
       "per second."),
    _u("remote.log.manager.fetch.max.bytes.per.second", L, LONG_MAX, at_least(1),
       "The maximum number of bytes that can be read from remote storage to local storage "
       "per second."),
    _u("remote.list.offsets.request.timeout.ms", L, 30_000, at_least(1),
       "The maximum amount of time the server waits for remote list offsets requests."),
    _u("max.connection.creation.rate", I, INT_MAX, at_least(0),
       "The maximum connection creation rate allowed in the broker at any time."),
]
# the listener TLS and SASL settings odradek now serves (security_configs) are read when the
# listeners start: there they are static (read-only), not dynamic-and-unused
_SERVED = {d.name for d in SECURITY_DEFS}
UNUSED_DYNAMIC_DEFS = [d for d in _KAFKA_DYNAMIC_UNUSED if d.name not in _SERVED]

# Kafka's per-broker dynamic configs (DynamicSecurityConfigs and DynamicListenerConfig, less
# max.connections, max.connection.creation.rate and num.network.threads, which are
# cluster-wide). Not advertised.listeners: Kafka 4.0 made it read-only (KAFKA-18405; a KRaft
# broker never could re-register new endpoints at runtime, it refused the change), so an
# AlterConfigs of it gets INVALID_REQUEST "Cannot update these configs dynamically".
PER_BROKER_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class", "principal.builder.class",
    "listeners", "listener.security.protocol.map", "sasl.mechanism.inter.broker.protocol",
    "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
})


def dynamic_mode(defn: ConfigDef) -> str:
    """Kafka's "Update Mode" of a broker config: read-only, per-broker or cluster-wide."""
    if not defn.dynamic:
        return "read-only"
    return "per-broker" if defn.name in PER_BROKER_CONFIGS else "cluster-wide"
