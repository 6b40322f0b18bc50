"""Client security settings as Kafka users write them, for librdkafka.

A `--command-config` file is a Java properties file of Kafka's client settings. librdkafka
takes most of them by the same name (security.protocol, sasl.mechanism, ssl.keystore.* for
PKCS12, ssl.endpoint.identification.algorithm); the Java-only ones are translated:

- `sasl.jaas.config` with PlainLoginModule or ScramLoginModule -> sasl.username/password;
- `ssl.truststore.location` of type PEM -> ssl.ca.location; a PEM `ssl.keystore.location`
  -> ssl.certificate.location and ssl.key.location (the file holds both).

A Java-only setting that cannot be translated (a JKS store, another login module) is an
error naming it, never dropped: a client that silently ignored it would connect with less
security than asked for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["for_librdkafka", "read_command_config"]

_JAAS = re.compile(r"""(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^\s;]+)""")
_MODULES = ("PlainLoginModule", "ScramLoginModule", "OAuthBearerLoginModule")


def read_command_config(path: str | Path) -> dict[str, str]:
    """key=value (or key: value) lines; # and ! comments; a trailing backslash continues."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"--command-config {path}: {exc.strerror or exc}") from None
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)", line)
        if m is None:
            raise ValueError(f"--command-config {path}: {line!r} is not key=value")
        out[m.group(1)] = m.group(2)
    return out


def _jaas(value: str) -> dict[str, str]:
    module = next((m for m in _MODULES if m in value), None)
    if module is None:
        raise ValueError("sasl.jaas.config: only PlainLoginModule, ScramLoginModule and "
                         "OAuthBearerLoginModule entries can be used with this client")
    if module == "OAuthBearerLoginModule":
        return {}
    opts = {k: v.strip("\"'") for k, v in _JAAS.findall(value.split(module, 1)[1])}
    out = {}
    if "username" in opts:
        out["sasl.username"] = opts["username"]
    if "password" in opts:
        out["sasl.password"] = opts["password"]
    return out


def for_librdkafka(settings: Mapping[str, object]) -> dict[str, object]:
    """Kafka client settings -> librdkafka's (unchanged where the names agree)."""
    out: dict[str, object] = {}
    trust_type = str(settings.get("ssl.truststore.type", "JKS")).upper()
    key_type = str(settings.get("ssl.keystore.type", "JKS")).upper()
    for key, value in settings.items():
        if key == "sasl.jaas.config":
            out.update(_jaas(str(value)))
        elif key == "ssl.truststore.location":
            if trust_type != "PEM":
                raise ValueError(f"ssl.truststore.location: a {trust_type} trust store cannot "
                                 "be read by librdkafka; use ssl.truststore.type=PEM (or "
                                 "ssl.ca.location)")
            out["ssl.ca.location"] = value
        elif key == "ssl.truststore.certificates":
            out["ssl.ca.pem"] = value
        elif key in ("ssl.truststore.type", "ssl.truststore.password", "ssl.keystore.type"):
            continue
        elif key == "ssl.keystore.location" and key_type == "PEM":
            out["ssl.certificate.location"] = value
            out["ssl.key.location"] = value
        elif key == "ssl.keystore.location" and key_type not in ("PKCS12", "PEM"):
            raise ValueError(f"ssl.keystore.location: a {key_type} key store cannot be read "
                             "by librdkafka; use PKCS12 or PEM")
        elif key == "ssl.key.password" and key_type == "PEM":
            out["ssl.key.password"] = value
        elif key == "ssl.keystore.key":
            out["ssl.key.pem"] = value
        elif key == "ssl.keystore.certificate.chain":
            out["ssl.certificate.pem"] = value
        else:
            out[key] = value
    return out
