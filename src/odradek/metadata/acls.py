"""ACL bindings as Kafka names them: resource patterns, entries, filters.

An ACL is a resource pattern (type, name, LITERAL or PREFIXED) and an access control entry
(principal, host, operation, ALLOW/DENY). They live in the metadata log as
AccessControlEntryRecord (with a generated id) and leave it by RemoveAccessControlEntryRecord,
as in Kafka's KRaft mode; the image keeps them by id. The enums carry Kafka's wire numbers
(ResourceType, PatternType, AclOperation, AclPermissionType), so the codecs of CreateAcls,
DescribeAcls and DeleteAcls pass them through unchanged. Filters (DescribeAcls, DeleteAcls)
match as Kafka's AclBindingFilter does. Pure data: the authorizer (security/) and the
controller both read it.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from odradek.metadata.records import AccessControlEntryRecord

__all__ = [
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclEntry",
    "AclFilter",
    "AclOperation",
    "PatternType",
    "PermissionType",
    "ResourceType",
    "acl_error",
    "acl_of_record",
    "record_of_acl",
]

WILDCARD = "*"  # a LITERAL resource name (or a host) matching every one
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The operations each resource type supports (Kafka's AclEntry.supportedOperations): what an
# ACL may name (else INVALID_REQUEST) and what authorized-operations fields are made of.
_OPS = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_OPS.READ, _OPS.WRITE, _OPS.CREATE, _OPS.DESCRIBE,
                                   _OPS.DELETE, _OPS.ALTER, _OPS.DESCRIBE_CONFIGS,
                                   _OPS.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_OPS.READ, _OPS.DESCRIBE, _OPS.DELETE,
                                   _OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_OPS.CREATE, _OPS.CLUSTER_ACTION, _OPS.DESCRIBE_CONFIGS,
                                     _OPS.ALTER_CONFIGS, _OPS.IDEMPOTENT_WRITE, _OPS.ALTER,
                                     _OPS.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_OPS.DESCRIBE, _OPS.WRITE,
                                              _OPS.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({_OPS.DESCRIBE}),
    ResourceType.USER: frozenset({_OPS.CREATE_TOKENS, _OPS.DESCRIBE_TOKENS}),
}

CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name


@dataclass(frozen=True, slots=True)
class AclEntry:
    """One ACL binding (Kafka's StandardAcl): resource pattern plus access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, op={self.operation.name}, "
                f"permissionType={self.permission.name}) on "
                f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}")


def acl_error(acl: AclEntry) -> str | None:
    """Why CreateAcls must refuse this binding (Kafka's AclControlManager.validateNewAcl and
    the request's checks), or None: every enum concrete (no ANY/UNKNOWN/MATCH), the
    operation supported by the resource type, a principal `Type:name`, a non-empty name."""
    if acl.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return f"Invalid resource type {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid pattern type {acl.pattern_type.name}"
    if acl.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        return f"Invalid permission type {acl.permission.name}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if (acl.operation is not AclOperation.ALL
            and acl.operation not in SUPPORTED_OPERATIONS.get(acl.resource_type, ())):
        return (f"ResourceType {acl.resource_type.name} only supports operations "
                f"{', '.join(sorted(o.name for o in SUPPORTED_OPERATIONS[acl.resource_type]))}")
    if acl.resource_type is ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{acl.principal}` (no colon is present)."
    if not acl.host:
        return "Host should not be empty"
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None for a string and ANY for an enum match everything;
    pattern type MATCH matches every pattern that applies to the named resource (the literal
    name, the `*` wildcard and PREFIXED patterns the name starts with)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches(self, acl: AclEntry) -> bool:
        if self.resource_type is not ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not AclOperation.ANY and acl.operation != self.operation:
            return False
        return self.permission is PermissionType.ANY or acl.permission == self.permission

    def _pattern_matches(self, acl: AclEntry) -> bool:
        name, kind = self.resource_name, self.pattern_type
        if kind is PatternType.MATCH:
            if name is None:
                return True
            if acl.pattern_type is PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD)
            return acl.pattern_type is PatternType.PREFIXED and name.startswith(acl.resource_name)
        if kind is not PatternType.ANY and acl.pattern_type != kind:
            return False
        return name is None or acl.resource_name == name

    def error(self) -> str | None:
        """Why DeleteAcls/DescribeAcls must refuse this filter (UNKNOWN values), or None."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value.name == "UNKNOWN":
                return f"Filter contains UNKNOWN elements: {type(value).__name__}"
        return None


def acl_of_record(r: AccessControlEntryRecord) -> AclEntry:
    """The image's entry of a record; a value outside Kafka's enums is a log we did not
    write (ValueError)."""
    return AclEntry(ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type),
                    r.principal, r.host, AclOperation(r.operation),
                    PermissionType(r.permission_type))


def record_of_acl(acl_id: uuid.UUID, acl: AclEntry) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(acl_id, int(acl.resource_type), acl.resource_name,
                                    int(acl.pattern_type), acl.principal, acl.host,
                                    int(acl.operation), int(acl.permission))
