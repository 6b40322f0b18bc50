"""Client quotas for the console: DescribeClientQuotas and AlterClientQuotas through odradek's
native client (confluent-kafka's Python AdminClient has neither), logged in as the console's
other clients are, so the node's authorizer decides (DescribeConfigs / AlterConfigs on the
cluster) as for any client.

An entity is Kafka's: one `user`, one `client-id`, a user and a client id, or one `ip`; a name
of None is that type's default (`<default>` in kafka-configs' output). What the console can
tell is wrong (an unknown entity type or key, a value that is not a positive number) is refused
here with a message before anything is sent; the node's own refusals (ip entities, which
odradek does not enforce; an unauthorized console) come back with Kafka's error name.
"""

from __future__ import annotations

import math
from typing import Any

from odradek.console.cluster import Cluster, KafkaFailure
from odradek.console.paging import BadRequest
from odradek.console.security import native, refused

ENTITY_TYPES = ("user", "client-id", "ip")
# Kafka's quota keys, and whether Kafka types them LONG (whole numbers) or DOUBLE
KEYS = {"producer_byte_rate": True, "consumer_byte_rate": True, "request_percentage": False,
        "controller_mutation_rate": False, "connection_creation_rate": False}
MAX_NAME = 1000  # characters of an entity name (a principal, a client id or an address)

Entity = list[tuple[str, str | None]]


def entity_of(raw: Any) -> Entity:
    """[{"type": ..., "name": ... or null}] -> [(type, name)], refusing what Kafka would."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest('entity must be a list of {"type": ..., "name": ...} (name null or '
                         'empty: the default of that type)')
    out: Entity = []
    for part in raw:
        if not isinstance(part, dict):
            raise BadRequest('each entity part is {"type": ..., "name": ...}')
        kind = str(part.get("type") or "").strip().lower()
        if kind not in ENTITY_TYPES:
            raise BadRequest(f"unknown entity type {kind[:40]!r}: one of "
                             f"{', '.join(ENTITY_TYPES)}")
        name = part.get("name")
        if name is not None and not isinstance(name, str):
            raise BadRequest(f"the {kind} name must be a string or null")
        name = (name or "").strip() or None
        if name is not None and len(name) > MAX_NAME:
            raise BadRequest(f"the {kind} name is over {MAX_NAME} characters")
        out.append((kind, name))
    kinds = [k for k, _ in out]
    if len(set(kinds)) != len(kinds):
        raise BadRequest(f"an entity names each type once, got {', '.join(kinds)}")
    if "ip" in kinds and len(kinds) > 1:
        raise BadRequest("an ip entity stands alone (no user or client-id with it)")
    return out


def key_of(raw: Any) -> str:
    key = str(raw or "").strip()
    if key not in KEYS:
        raise BadRequest(f"unknown quota {key[:60]!r}: one of {', '.join(KEYS)}")
    return key


def value_of(key: str, raw: Any) -> float:
    """A quota's value: a positive number, whole for the byte rates (as Kafka checks)."""
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise BadRequest(f"{key} must be a number, got {str(raw)[:40]!r}") from None
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise BadRequest(f"{key} must be a positive number, got {str(raw)[:40]}")
    if KEYS[key] and value != int(value):
        raise BadRequest(f"{key} is a whole number of bytes per second, got {value:g}")
    return value


def label(entity: Entity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def list_quotas(cluster: Cluster) -> list[dict[str, Any]]:
    """Every quota the cluster holds, one row per (entity, key), users first."""
    from odradek.client.quotas import describe_client_quotas

    code, message, entries = _ask(cluster, lambda conn: describe_client_quotas(conn, []))
    if code:
        raise refused(code, message)
    rows = []
    for found, values in entries:
        # the node lists an entity's parts in any order: users first, as kafka-configs does
        entity = sorted(found, key=lambda p: _order(p[0]))
        for key, value in sorted(values.items()):
            rows.append({"entity": [{"type": t, "name": n} for t, n in entity],
                         "label": label(entity), "key": key,
                         "value": int(value) if value == int(value) else value})
    return sorted(rows, key=lambda r: ([_order(p["type"]) for p in r["entity"]], r["label"],
                                       r["key"]))


def _order(kind: str) -> int:
    return ENTITY_TYPES.index(kind) if kind in ENTITY_TYPES else len(ENTITY_TYPES)


def alter_quota(cluster: Cluster, entity: Entity, key: str, value: float | None) -> None:
    """Set `key` of `entity` to `value`, or remove it (value None)."""
    from odradek.client.quotas import alter_client_quotas

    op = (key, 0.0 if value is None else value, value is None)
    ((code, message),) = _ask(cluster, lambda conn: alter_client_quotas(conn, [(entity, [op])]))
    if code:
        raise refused(code, message)


def _ask(cluster: Cluster, call: Any) -> Any:
    got = native(cluster, call)
    if got is NotImplemented:
        raise KafkaFailure("client quotas are read and changed with odradek's own client, "
                           "which cannot log in with this console's settings (it speaks TLS "
                           "with PEM files and SASL PLAIN or SCRAM)", 501)
    return got
