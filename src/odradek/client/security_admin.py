"""DescribeAcls and DescribeUserScramCredentials from odradek's native client, for the CLI.

librdkafka mishandles both answers' top-level error: it reads DescribeAcls' and drops it
(through 2.12 at least), so a principal without Describe on the cluster gets an empty,
successful listing where Kafka answers CLUSTER_AUTHORIZATION_FAILED; and confluent-kafka's
describe_user_scram_credentials crashed the process (SIGSEGV) on a refused
DescribeUserScramCredentials. `odradek acl list` and `odradek user list|delete` ask with
these instead and show the node's code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.static.primitive import i8

from odradek.client.connection import Connection
from odradek.protocol.apis import ApiKey, response_header_version
from odradek.protocol.headers import response_body_offset
from odradek.protocol.messages import decode_response, encode_request, request_class

__all__ = ["AclRow", "describe_acls", "describe_scram_users"]

VERSION = 1  # DescribeAcls: the first with pattern types (PREFIXED)


@dataclass(frozen=True)
class AclRow:
    """One ACL, in Kafka's codes (resource type, pattern type, operation, permission)."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


def describe_acls(conn: Connection, resource_type: int, name: str | None, pattern_type: int,
                  principal: str | None = None, host: str | None = None, operation: int = 1,
                  permission: int = 1) -> tuple[int, str | None, list[AclRow]]:
    """The ACLs matching the filter (1 is ANY for the codes): (error code, message, rows)."""
    cls = request_class(int(ApiKey.DESCRIBE_ACLS), VERSION)
    req = cls(resource_type_filter=i8(resource_type), resource_name_filter=name,
              pattern_type_filter=i8(pattern_type), principal_filter=principal,
              host_filter=host, operation=i8(operation), permission_type=i8(permission))
    resp = _call(conn, ApiKey.DESCRIBE_ACLS, VERSION, req)
    rows = [AclRow(int(r.resource_type), r.resource_name, int(r.pattern_type), a.principal,
                   a.host, int(a.operation), int(a.permission_type))
            for r in resp.resources for a in r.acls]
    return int(resp.error_code), resp.error_message, rows


def describe_scram_users(conn: Connection, users: list[str] | None = None
                         ) -> tuple[int, str | None, list[tuple[str, int, str | None,
                                                               list[tuple[int, int]]]]]:
    """SCRAM credentials of `users` (None: all): (error code, message, [(user, error code,
    message, [(mechanism, iterations)])]); mechanisms in Kafka's codes (1 SHA-256, 2 SHA-512)."""
    cls = request_class(int(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS), 0)
    mod = __import__(cls.__module__, fromlist=["UserName"])
    req = cls(users=None if users is None else tuple(mod.UserName(name=u) for u in users))
    resp = _call(conn, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, req)
    results = [(r.user, int(r.error_code), r.error_message,
                [(int(c.mechanism), int(c.iterations)) for c in r.credential_infos])
               for r in resp.results]
    return int(resp.error_code), resp.error_message, results


def _call(conn: Connection, api: ApiKey, version: int, request: object) -> Any:
    corr = conn.send(int(api), version, encode_request(request))
    frame = conn.receive(corr)
    offset = response_body_offset(frame, response_header_version(int(api), version))
    return decode_response(int(api), version, frame, offset)
