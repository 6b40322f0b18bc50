"""Broker configs of authorization and quotas (issue 16, the `acl` half): Kafka's names and
defaults. Kept apart from broker_configs.py so the TLS/SASL half adds its keys beside them."""

from __future__ import annotations

from odradek.metadata.config.config_def import ConfigDef, ConfigType, at_least

__all__ = ["AUTHZ_CONFIG_DEFS"]

AUTHZ_CONFIG_DEFS = [
    ConfigDef("authorizer.class.name", ConfigType.STRING, "", None,
              "The authorizer: empty (no authorization, Kafka's default) or "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata "
              "log). Any other class is refused at start.", (), False),
    ConfigDef("super.users", ConfigType.STRING, "", None,
              "Principals allowed everything, separated by semicolons: User:admin;User:ops.",
              (), False),
    ConfigDef("allow.everyone.if.no.acl.found", ConfigType.BOOLEAN, False, None,
              "Allow every principal on a resource that has no ACL at all.", (), False),
    ConfigDef("quota.window.num", ConfigType.INT, 11, at_least(1),
              "Samples kept per client-quota rate (Kafka's default 11).", (), False),
    ConfigDef("quota.window.size.seconds", ConfigType.INT, 1, at_least(1),
              "The span of one client-quota sample, in seconds.", (), False),
]
