"""The broker's security configs: TLS, SASL and re-authentication, with Kafka's names,
types and defaults (BrokerSecurityConfigs, SslConfigs, SaslConfigs).

Each may also be set for one listener as `listener.name.<listener lower case>.<key>`
(`security.tls.listener_value` reads those first), as Kafka's per-listener overrides.
"""

from __future__ import annotations

from odradek.metadata.config.config_def import ConfigDef, ConfigType, at_least, one_of

S, INT, L, LST, P = (ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.LIST,
                   ConfigType.PASSWORD)


def _d(name: str, ctype: ConfigType, default: object, doc: str,
       validator: object = None) -> ConfigDef:
    return ConfigDef(name, ctype, default, validator, doc)  # type: ignore[arg-type]


SECURITY_DEFS: list[ConfigDef] = [
    _d("ssl.keystore.type", S, "JKS", "PEM or PKCS12 (JKS is refused: odradek has no Java "
       "keystore reader).", one_of("JKS", "PKCS12", "PEM")),
    _d("ssl.keystore.location", S, None, "The key store file: PKCS12, or PEM holding the "
       "private key and the certificate chain."),
    _d("ssl.keystore.password", P, None, "The password of the key store file."),
    _d("ssl.key.password", P, None, "The password of the private key in the key store."),
    _d("ssl.keystore.key", P, None, "A PEM private key given inline (ssl.keystore.type=PEM)."),
    _d("ssl.keystore.certificate.chain", P, None,
       "A PEM certificate chain given inline (ssl.keystore.type=PEM)."),
    _d("ssl.truststore.type", S, "JKS", "PEM or PKCS12.", one_of("JKS", "PKCS12", "PEM")),
    _d("ssl.truststore.location", S, None, "The trust store file (PEM or PKCS12)."),
    _d("ssl.truststore.password", P, None, "The password of a PKCS12 trust store."),
    _d("ssl.truststore.certificates", P, None, "PEM trusted certificates given inline."),
    _d("ssl.client.auth", S, "none", "none, requested or required: whether the node asks "
       "clients for a certificate.", one_of("none", "requested", "required")),
    _d("ssl.enabled.protocols", LST, ["TLSv1.2", "TLSv1.3"], "The TLS versions served."),
    _d("ssl.protocol", S, "TLSv1.3", "Accepted for compatibility (the versions served are "
       "ssl.enabled.protocols)."),
    _d("ssl.cipher.suites", LST, [], "The TLS 1.2 cipher suites served (OpenSSL or IANA "
       "names); empty: the defaults of the ssl module."),
    _d("ssl.endpoint.identification.algorithm", S, "https",
       "https: a client of this node checks the server's host name (inter-broker)."),
    _d("ssl.principal.mapping.rules", S, "DEFAULT",
       "Rules mapping a client certificate's distinguished name to a principal name."),
    _d("sasl.enabled.mechanisms", LST, ["GSSAPI"], "SASL mechanisms served on SASL listeners "
       "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)."),
    _d("security.inter.broker.protocol", S, "PLAINTEXT", "The security protocol between "
       "brokers (its listener is the one of that name); only one of this and "
       "inter.broker.listener.name may be set."),
    _d("sasl.mechanism.inter.broker.protocol", S, "GSSAPI",
       "The SASL mechanism this node uses towards other brokers."),
    _d("sasl.mechanism.controller.protocol", S, "GSSAPI",
       "The SASL mechanism this node uses towards the controllers."),
    _d("sasl.jaas.config", P, None, "Accepted as Kafka's; odradek reads only the username "
       "and password options of a PlainLoginModule or ScramLoginModule entry (this node's own "
       "client credentials)."),
    _d("connections.max.reauth.ms", L, 0, "KIP-368: a SASL session lives at most this long "
       "before the client must re-authenticate; 0 disables.", at_least(0)),
    _d("sasl.oauthbearer.jwks.endpoint.url", S, None,
       "OAUTHBEARER: the JWKS the token signatures are checked against (file:// URL)."),
    _d("sasl.oauthbearer.expected.audience", LST, [], "OAUTHBEARER: accepted audiences."),
    _d("sasl.oauthbearer.expected.issuer", S, None, "OAUTHBEARER: the required issuer."),
    _d("sasl.oauthbearer.sub.claim.name", S, "sub", "OAUTHBEARER: the claim naming the "
       "principal."),
    _d("sasl.oauthbearer.scope.claim.name", S, "scope", "OAUTHBEARER: the scope claim."),
    _d("sasl.oauthbearer.clock.skew.seconds", INT, 30, "OAUTHBEARER: tolerated clock skew.",
       at_least(0)),
]
