"""Kafka's `sasl.jaas.config` value as a broker reads it for one listener and mechanism
(`listener.name.<listener>.<mechanism lower case>.sasl.jaas.config`).

`<LoginModule class> <flag> key="value" ...;` Two kinds of options matter to a node:
`username`/`password`, the node's own credentials towards its peers (inter-broker and
controller connections), and PLAIN's `user_<name>="<password>"` entries, the users its
PlainLoginModule accepts (Kafka's PlainServerCallbackHandler): the only credentials a
controller listener has before the metadata log (where SCRAM credentials live) is agreed on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JaasEntry", "jaas_key", "listener_jaas", "parse_jaas"]

_MODULE = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b", re.I)
_OPTION = re.compile(r"""\s*([\w.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^\s;"']+)""")


@dataclass(frozen=True)
class JaasEntry:
    module: str  # the login module's class name
    options: dict[str, str] = field(default_factory=dict, repr=False)  # holds passwords

    @property
    def kind(self) -> str:
        """PLAIN, SCRAM or OAUTHBEARER (from the class name), or the class name."""
        short = self.module.rsplit(".", 1)[-1]
        return {"PlainLoginModule": "PLAIN", "ScramLoginModule": "SCRAM",
                "OAuthBearerLoginModule": "OAUTHBEARER"}.get(short, short)

    def plain_users(self) -> dict[str, str]:
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_") and k[5:]}


def parse_jaas(value: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """One login module entry; ValueError naming `key` when it is not one."""
    m = _MODULE.match(value)
    if m is None:
        raise ValueError(f"{key}: not a JAAS entry ('<LoginModule> required key=\"value\" "
                         "...;')")
    rest, options = value[m.end():], {}
    while True:
        o = _OPTION.match(rest)
        if o is None:
            break
        raw = o.group(2)
        if raw[:1] == '"':
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        elif raw[:1] == "'":
            raw = raw[1:-1]
        options[o.group(1)] = raw
        rest = rest[o.end():]
    if rest.strip() not in (";", ""):
        raise ValueError(f"{key}: cannot read the options of the {m.group(1)} entry near "
                         f"{rest.strip()[:20]!r}")
    if not rest.strip():
        raise ValueError(f"{key}: the JAAS entry must end with ';'")
    return JaasEntry(m.group(1), options)


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def listener_jaas(config: Any, listener: str, mechanism: str) -> JaasEntry | None:
    """The listener's entry for the mechanism, or None when it has none."""
    key = jaas_key(listener, mechanism)
    value = config.values.get(key)
    if value is None:
        return None
    entry = parse_jaas(str(getattr(value, "value", value)), key)
    want = "SCRAM" if mechanism.upper().startswith("SCRAM-") else mechanism.upper()
    if entry.kind != want:
        raise ValueError(f"{key}: a {entry.module} entry where a {want} login module is "
                         "expected")
    return entry
