"""ACLs and SCRAM users for the console, through Kafka's admin API (DescribeAcls, CreateAcls,
DeleteAcls, Describe/AlterUserScramCredentials). The console acts as the principal its client
config logs in as (`odradek console -X sasl.username=...`), so the node's authorizer decides
what it may see and change, as for any client. Client quotas are in console/quotas.py (through
odradek's native client: confluent-kafka has no DescribeClientQuotas).

The two listings go through odradek's native client when it can log in with the console's
settings: librdkafka drops DescribeAcls' CLUSTER_AUTHORIZATION_FAILED (an empty list where the
node refused) and confluent-kafka crashed the process on a refused DescribeUserScramCredentials.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.console.cluster import TIMEOUT_S, Cluster, KafkaFailure, result
from odradek.console.paging import BadRequest

if TYPE_CHECKING:
    from odradek.client.connection import Connection

RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE")
PERMISSIONS = ("ALLOW", "DENY")
PATTERNS = ("LITERAL", "PREFIXED")
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


# Kafka's resource type 4 is CLUSTER; confluent-kafka names it BROKER
_ResourceTypes = {"TOPIC": ResourceType.TOPIC, "GROUP": ResourceType.GROUP,
                  "CLUSTER": ResourceType.BROKER, "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID}


def _type_name(rtype: ResourceType) -> str:
    return "CLUSTER" if rtype == ResourceType.BROKER else rtype.name


def _enum(kind: Any, value: str, allowed: tuple[str, ...], what: str) -> Any:
    name = value.strip().upper().replace("-", "_")
    if name not in {a.replace("-", "_") for a in allowed}:
        raise BadRequest(f"{what} must be one of {', '.join(allowed)}, not {value[:30]!r}")
    return kind[name]


def native(cluster: Cluster, ask: Callable[[Connection], Any]) -> Any:
    """`ask` over a native connection logged in as the console's clients are; NotImplemented
    when the native client cannot honour the settings (OAUTHBEARER, ...)."""
    from odradek.client.config import resolve_bootstrap
    from odradek.client.connection import Connection, fetch_supports, security_of, servers

    settings = {k: str(v) for k, v in cluster.overrides.items()}
    if not fetch_supports(settings):
        return NotImplemented
    host, port = servers(resolve_bootstrap(cluster.bootstrap))[0]
    try:
        conn = Connection(host, port, "odradek-console", TIMEOUT_S, 16 << 20,
                          security_of(settings))
    except Exception as exc:  # refused, unreachable, TLS: the page says why
        raise KafkaFailure(f"cannot reach {host}:{port}: {exc}", 502) from None
    try:
        return ask(conn)
    except (OSError, ConnectionError) as exc:
        raise KafkaFailure(f"no answer from {host}:{port}: {exc}", 502) from None
    finally:
        conn.close()


def _code_name(kind: Any, code: int) -> str:
    """Kafka's code as confluent-kafka's enums name it (CLUSTER for its BROKER); a code they
    lack (6, DELEGATION_TOKEN) by Kafka's name or number."""
    try:
        member = kind(code)
    except ValueError:
        return "DELEGATION_TOKEN" if kind is ResourceType and code == 6 else str(code)
    return _type_name(member) if kind is ResourceType else str(member.name)


def refused(code: int, message: str | None) -> KafkaFailure:
    from odradek.client.connection import error_name

    name = error_name(code)
    return KafkaFailure(f"{name}: {message}" if message else name,
                        403 if "AUTHORIZATION" in name else 400)


def list_acls(cluster: Cluster) -> list[dict[str, Any]]:
    from odradek.client.security_admin import describe_acls

    got = native(cluster, lambda conn: describe_acls(conn, 1, None, 1))
    if got is NotImplemented:
        flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
        bindings = [(_type_name(b.restype), b.name, b.resource_pattern_type.name, b.principal,
                     b.host, b.operation.name, b.permission_type.name)
                    for b in result(cluster.admin.describe_acls(flt,
                                                                request_timeout=TIMEOUT_S))]
    else:
        code, message, found = got
        if code:
            raise refused(code, message)
        bindings = [(_code_name(ResourceType, a.resource_type), a.name,
                     _code_name(ResourcePatternType, a.pattern_type), a.principal, a.host,
                     _code_name(AclOperation, a.operation),
                     _code_name(AclPermissionType, a.permission)) for a in found]
    rows = [{"principal": principal, "host": host, "operation": op, "permission": perm,
             "resource_type": rtype, "resource": name, "pattern": pattern}
            for rtype, name, pattern, principal, host, op, perm in bindings]
    return sorted(rows, key=lambda r: (r["resource_type"], r["resource"], r["principal"],
                                       r["operation"]))


def binding(body: dict[str, Any]) -> AclBinding:
    principal = str(body.get("principal") or "").strip()
    if not principal.count(":") or principal.startswith(":"):
        raise BadRequest(f"a principal is TYPE:NAME, e.g. User:alice, not {principal[:60]!r}")
    rtype = _enum(_ResourceTypes, str(body.get("resource_type") or ""), RESOURCE_TYPES,
                  "resource_type")
    name = str(body.get("resource") or "").strip()
    if rtype == ResourceType.BROKER:
        name = "kafka-cluster"
    if not name:
        raise BadRequest("resource is required (a topic, group or transactional id name, or *)")
    return AclBinding(rtype, name,
                      _enum(ResourcePatternType, str(body.get("pattern") or "LITERAL"), PATTERNS,
                            "pattern"),
                      principal, str(body.get("host") or "*").strip() or "*",
                      _enum(AclOperation, str(body.get("operation") or ""), OPERATIONS,
                            "operation"),
                      _enum(AclPermissionType, str(body.get("permission") or "ALLOW"),
                            PERMISSIONS, "permission"))


def create_acl(cluster: Cluster, b: AclBinding) -> None:
    futures = cluster.admin.create_acls([b], request_timeout=TIMEOUT_S)
    result(futures[b])


def delete_acl(cluster: Cluster, b: AclBinding) -> int:
    flt = AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                           b.operation, b.permission_type)
    futures = cluster.admin.delete_acls([flt], request_timeout=TIMEOUT_S)
    deleted = result(futures[flt])
    if not deleted:
        raise KafkaFailure("no ACL matched: nothing was deleted", 404)
    return len(deleted)


def list_users(cluster: Cluster) -> list[dict[str, Any]]:
    from odradek.client.security_admin import describe_scram_users

    got = native(cluster, describe_scram_users)
    if got is NotImplemented:
        users = {name: [(i.mechanism.name.replace("_", "-"), i.iterations)
                        for i in desc.scram_credential_infos]
                 for name, desc in result(cluster.admin.describe_user_scram_credentials(
                     request_timeout=TIMEOUT_S)).items()}
    else:
        code, message, results = got
        if code:
            raise refused(code, message)
        users = {name: [(MECHANISMS[m - 1] if m in (1, 2) else str(m), i) for m, i in infos]
                 for name, _, _, infos in results}
    return [{"user": name, "mechanisms": [{"mechanism": m, "iterations": i} for m, i in infos]}
            for name, infos in sorted(users.items())]


def upsert_user(cluster: Cluster, user: str, password: str, mechanism: str,
                iterations: int) -> None:
    if not user.strip():
        raise BadRequest("user is required")
    if not password:
        raise BadRequest("password is required")
    mech = _enum(ScramMechanism, mechanism, MECHANISMS, "mechanism")
    futures = cluster.admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, iterations),
                                      password.encode())], request_timeout=TIMEOUT_S)
    result(futures[user])


def delete_user(cluster: Cluster, user: str, mechanism: str) -> None:
    mech = _enum(ScramMechanism, mechanism, MECHANISMS, "mechanism")
    futures = cluster.admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, mech)], request_timeout=TIMEOUT_S)
    result(futures[user])
