"""How the services `odradek serve` runs beside its node log in to that node.

The Schema Registry and the console are clients of the node like any other, so on a node
whose listeners need TLS or SASL they need client settings. They are node settings under a
prefix, in Kafka's client names:

- `schema.registry.kafkastore.<key>`: the registry's, as Confluent's registry names them
  (`kafkastore.security.protocol`, `kafkastore.sasl.mechanism`,
  `kafkastore.sasl.jaas.config`, `kafkastore.ssl.truststore.location`, ...);
- `console.kafka.<key>`: the console's (odradek's own name).

Only `security.protocol`, `sasl.*` and `ssl.*` may follow the prefix. The service connects
to the node's first client listener of that security protocol (PLAINTEXT when none is
given). A node with no such listener, or with settings a client cannot honour (a JKS
store, another login module), refuses its start with one message naming the key, rather
than running a service that can never log in.

The settings reach the child through an inherited pipe read as `--command-config
/dev/fd/N`: never on its command line (other users see argv in `ps`), never on disk.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.broker.config import ConfigError, security_protocol_map
from odradek.broker.node import advertised_listeners
from odradek.broker.startup import StartRefused
from odradek.metadata.config.broker_configs import SERVICE_CLIENT_PREFIXES, BrokerConfig

REGISTRY_PREFIX, CONSOLE_PREFIX = SERVICE_CLIENT_PREFIXES
_ALLOWED = ("security.protocol", "sasl.", "ssl.")
# a pipe holds this much without a reader; the settings are far smaller
_PIPE_LIMIT = 60_000


@dataclass(frozen=True)
class ServiceClient:
    """The listener a service connects to, and its Kafka client settings there."""

    listener: str  # the listener's name (PLAINTEXT, SASL_SSL, INTERNAL...)
    settings: Mapping[str, str] = field(default_factory=dict)

    def properties(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.settings.items())

    def open_pipe(self) -> int | None:
        """The read end of a pipe holding the settings as a properties file, for the child to
        inherit (None when there are none); the caller closes it once the child started."""
        if not self.settings:
            return None
        data = self.properties().encode()
        if len(data) > _PIPE_LIMIT:
            raise StartRefused(f"the service client settings are {len(data)} bytes; "
                               f"at most {_PIPE_LIMIT} can be handed to the service")
        read, write = os.pipe()
        try:
            os.write(write, data)
        finally:
            os.close(write)
        return read


def service_client(config: BrokerConfig, prefix: str, what: str, key: str) -> ServiceClient:
    """The checked client settings under `prefix` and the listener they are for; StartRefused
    when they name something else or no listener of the node can take them. `key` is the
    service's listeners setting, named in the advice to run without it."""
    from odradek.client.security_settings import for_librdkafka

    settings: dict[str, str] = {}
    for name, value in config.values.items():
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        if not (rest == "security.protocol" or rest.startswith(_ALLOWED[1:])):
            raise StartRefused(f"{name}: only {prefix}security.protocol, {prefix}sasl.* and "
                               f"{prefix}ssl.* can be set for {what}'s client")
        settings[rest] = value
    try:
        for_librdkafka(settings)  # a setting the client cannot honour is refused now
    except ValueError as exc:
        raise StartRefused(f"{prefix}{exc}") from None
    protocol = settings.get("security.protocol", "PLAINTEXT").strip().upper()
    try:
        mapping = security_protocol_map(config)
        listeners = advertised_listeners(config)
    except ConfigError as exc:
        raise StartRefused(str(exc)) from None
    for lst in listeners:
        if mapping.get(lst.name, lst.name) == protocol:
            return ServiceClient(lst.name, settings)
    offered = ", ".join(f"{lst.name} ({mapping.get(lst.name, lst.name)})" for lst in listeners)
    if "security.protocol" in settings:
        raise StartRefused(f"{prefix}security.protocol={protocol}, but no client listener of "
                           f"this node speaks {protocol} (it has {offered})")
    raise StartRefused(
        f"{what} connects to this node as a client, and no client listener of the node is "
        f"PLAINTEXT (it has {offered}): give it credentials with {prefix}security.protocol "
        f"and {prefix}sasl.* / {prefix}ssl.* (Kafka's client settings), or set {key}= "
        "(empty) to run without it")
