"""AlterClientQuotas and DescribeClientQuotas from odradek's native client (confluent-kafka's
Python AdminClient has no client-quota calls). One request, one answer, over `Connection`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from odradek.client.connection import Connection
from odradek.protocol.apis import ApiKey, response_header_version
from odradek.protocol.headers import response_body_offset
from odradek.protocol.messages import decode_response, encode_request, request_class

__all__ = ["alter_client_quotas", "describe_client_quotas"]

VERSION = 1
Entity = Sequence[tuple[str, str | None]]


def _call(conn: Connection, api: ApiKey, request: Any) -> Any:
    corr = conn.send(int(api), VERSION, encode_request(request))
    frame = conn.receive(corr)
    offset = response_body_offset(frame, response_header_version(int(api), VERSION))
    return decode_response(int(api), VERSION, frame, offset)


def alter_client_quotas(conn: Connection,
                        entries: Sequence[tuple[Entity, Sequence[tuple[str, float, bool]]]],
                        validate_only: bool = False) -> list[tuple[int, str | None]]:
    """Set (or with remove=True drop) quota keys of entities; (error code, message) each."""
    cls = request_class(int(ApiKey.ALTER_CLIENT_QUOTAS), VERSION)
    mod = __import__(cls.__module__, fromlist=["EntryData", "EntityData", "OpData"])
    req = cls(entries=tuple(
        mod.EntryData(entity=tuple(mod.EntityData(entity_type=t, entity_name=n) for t, n in ent),
                      ops=tuple(mod.OpData(key=k, value=float(v), remove=r) for k, v, r in ops))
        for ent, ops in entries), validate_only=validate_only)
    resp = _call(conn, ApiKey.ALTER_CLIENT_QUOTAS, req)
    return [(int(e.error_code), e.error_message) for e in resp.entries]


def describe_client_quotas(conn: Connection, components: Sequence[tuple[str, int, str | None]],
                           strict: bool = False
                           ) -> tuple[int, str | None, list[tuple[list[tuple[str, str | None]],
                                                                  dict[str, float]]]]:
    """Quotas of the entities matching (entity type, match type 0 exact/1 default/2 any
    specified, name): (error code, message, [(entity, {key: value})])."""
    cls = request_class(int(ApiKey.DESCRIBE_CLIENT_QUOTAS), VERSION)
    mod = __import__(cls.__module__, fromlist=["ComponentData"])
    req = cls(components=tuple(mod.ComponentData(entity_type=t, match_type=m, match=n)
                               for t, m, n in components), strict=strict)
    resp = _call(conn, ApiKey.DESCRIBE_CLIENT_QUOTAS, req)
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity],
                {v.key: float(v.value) for v in entry.values}) for entry in resp.entries or ()]
    return int(resp.error_code), resp.error_message, entries
