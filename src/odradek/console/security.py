"""ACLs and SCRAM users for the console, through Kafka's admin API (DescribeAcls, CreateAcls,
DeleteAcls, Describe/AlterUserScramCredentials). The console acts as the principal its client
config logs in as (`odradek console -X sasl.username=...`), so the node's authorizer decides
what it may see and change, as for any client. Quotas are not here: confluent-kafka has no
DescribeClientQuotas (`odradek quota` speaks it directly).
"""

from __future__ import annotations

from typing import Any

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


def list_acls(cluster: Cluster) -> list[dict[str, Any]]:
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    rows = [{"principal": b.principal, "host": b.host, "operation": b.operation.name,
             "permission": b.permission_type.name, "resource_type": _type_name(b.restype),
             "resource": b.name, "pattern": b.resource_pattern_type.name}
            for b in result(cluster.admin.describe_acls(flt, request_timeout=TIMEOUT_S))]
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
    got = result(cluster.admin.describe_user_scram_credentials(request_timeout=TIMEOUT_S))
    rows = []
    for name, desc in sorted(got.items()):
        rows.append({"user": name, "mechanisms": [
            {"mechanism": i.mechanism.name.replace("_", "-"), "iterations": i.iterations}
            for i in desc.scram_credential_infos]})
    return rows


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
