"""The ACL authorizer, with the semantics of Kafka's StandardAuthorizer (KRaft mode).

Sans-I/O: it reads the ACLs of the current metadata image (`acls_source()`, re-indexed only
when the image's ACL map changes) and answers `authorize(session, operation, resource)`.

The rules, as Kafka's StandardAuthorizerData applies them:
- a principal named in `super.users` may do everything;
- the ACLs that apply to a resource are its LITERAL ones, the LITERAL `*` ones of its type and
  the PREFIXED ones whose name starts the resource name;
- an ACL applies to a request when its principal is the request's or `User:*`, and its host is
  the client's address or `*`;
- a DENY that applies wins over any ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER also
  allows DESCRIBE and one of ALTER_CONFIGS also allows DESCRIBE_CONFIGS (a DENY implies
  nothing), ALL matches every operation;
- no ACL at all on the resource: `allow.everyone.if.no.acl.found` (default false) decides;
  ACLs on it that do not allow: denied.

Decisions go to the logger `kafka.authorizer.logger` (Kafka's name, so log settings carry
over): a denial of something the client asked for at INFO, an allow at DEBUG, and the checks
behind authorized-operations fields and filtered listings at TRACE (logging.DEBUG - 5).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from odradek.metadata.acls import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.metadata.config.config_def import ConfigError
from odradek.security.principal import Session

__all__ = [
    "AUDIT_LOG",
    "AUTHORIZER_CLASS_NAMES",
    "TRACE",
    "StandardAuthorizer",
    "authorizer_from_config",
    "operations_bitfield",
    "supported_operations_bitfield",
]

AUDIT_LOG = logging.getLogger("kafka.authorizer.logger")
TRACE = logging.DEBUG - 5  # log4j's TRACE, which Python's logging lacks

# the class names `authorizer.class.name` accepts: Kafka's KRaft authorizer (ACLs in the
# metadata log), which is what this module is
AUTHORIZER_CLASS_NAMES = frozenset({"org.apache.kafka.metadata.authorizer.StandardAuthorizer"})

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS,
                                       AclOperation.ALTER_CONFIGS})

# Kafka's SecurityUtils.resourceTypeName: how resources are printed in the audit log
_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group",
               ResourceType.CLUSTER: "Cluster", ResourceType.TRANSACTIONAL_ID: "TransactionalId",
               ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}


def _grants(acl: AclEntry, operation: AclOperation) -> bool:
    """Whether the ACL's operation covers the requested one (the implications hold for ALLOW
    ACLs only: a DENY of READ does not deny DESCRIBE)."""
    if acl.operation is AclOperation.ALL or acl.operation == operation:
        return True
    if acl.permission is not PermissionType.ALLOW:
        return False
    if operation is AclOperation.DESCRIBE:
        return acl.operation in _IMPLIES_DESCRIBE
    if operation is AclOperation.DESCRIBE_CONFIGS:
        return acl.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


def operations_bitfield(operations: Iterable[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit `op` set for each operation (authorized-operations
    fields of Metadata, DescribeCluster, DescribeGroups)."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


def supported_operations_bitfield(resource_type: ResourceType) -> int:
    """What the authorized-operations fields say with no authorizer: every supported one."""
    return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])


class _Index:
    """One image's ACLs, arranged for lookup: by (type, literal name), and by type then
    prefix (with the prefix lengths present, so a name is cut only at those lengths)."""

    __slots__ = ("literal", "prefix_lengths", "prefixed")

    def __init__(self, acls: Iterable[AclEntry]) -> None:
        self.literal: dict[tuple[ResourceType, str], list[AclEntry]] = {}
        self.prefixed: dict[ResourceType, dict[str, list[AclEntry]]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for acl in acls:
            if acl.pattern_type is PatternType.LITERAL:
                self.literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            elif acl.pattern_type is PatternType.PREFIXED:
                self.prefixed.setdefault(acl.resource_type, {}).setdefault(
                    acl.resource_name, []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.resource_name))
        self.prefix_lengths = {t: sorted(ls) for t, ls in lengths.items()}

    def applicable(self, resource_type: ResourceType, name: str) -> list[AclEntry]:
        found = list(self.literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self.literal.get((resource_type, WILDCARD), ())
        by_prefix = self.prefixed.get(resource_type)
        if by_prefix:
            for n in self.prefix_lengths[resource_type]:
                if n > len(name):
                    break
                found += by_prefix.get(name[:n], ())
        return found


class StandardAuthorizer:
    def __init__(self, acls_source: Callable[[], Mapping[Any, AclEntry]],
                 super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self._source = acls_source
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._indexed: Mapping[Any, AclEntry] | None = None
        self._index = _Index(())

    def _current(self) -> _Index:
        acls = self._source()
        if acls is not self._indexed:  # the image's map is replaced on every ACL change
            self._index = _Index(acls.values())
            self._indexed = acls
        return self._index

    def acls(self) -> list[AclEntry]:
        return list(self._source().values())

    # -------------------------------------------------------------- decisions

    def authorize(self, session: Session, operation: AclOperation,
                  resource_type: ResourceType, name: str, *, api: str = "",
                  log_if_allowed: bool = True, log_if_denied: bool = True) -> bool:
        principal = str(session.principal)
        if principal in self.super_users:
            rule = "SuperUser"
            allowed = True
        else:
            allowed, rule = self._decide(principal, session.client_address, operation,
                                         resource_type, name)
        self._audit(allowed, principal, session, operation, resource_type, name, api, rule,
                    log_if_allowed, log_if_denied)
        return allowed

    def _decide(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> tuple[bool, str]:
        found_acls = False
        allow: AclEntry | None = None
        for acl in self._current().applicable(resource_type, name):
            found_acls = True
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if not _grants(acl, operation):
                continue
            if acl.permission is PermissionType.DENY:
                return False, f"MatchingAcl(acl={acl}, result=DENIED)"
            if acl.permission is PermissionType.ALLOW:
                allow = acl
        if allow is not None:
            return True, f"MatchingAcl(acl={allow}, result=ALLOWED)"
        if not found_acls:
            result = "ALLOWED" if self.allow_if_no_acl else "DENIED"
            return self.allow_if_no_acl, f"DefaultRule(result={result})"
        return False, "DefaultRule(result=DENIED)"

    def authorize_by_resource_type(self, session: Session, operation: AclOperation,
                                   resource_type: ResourceType, *, api: str = "") -> bool:
        """Whether the principal may do `operation` on some resource of the type (Kafka's
        Authorizer.authorizeByResourceType, e.g. an idempotent producer's Write on any
        topic): an ALLOW pattern that no DENY literal of the same name nor DENY prefix of it
        covers, a `*` ALLOW, or the answer for a resource with no ACLs."""
        if self.authorize(session, operation, resource_type, "hardcode", api=api,
                          log_if_allowed=True, log_if_denied=False):
            return True
        principal = str(session.principal)
        host = session.client_address
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allows: list[AclEntry] = []
        for acl in self._source().values():
            if acl.resource_type != resource_type:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != operation and acl.operation is not AclOperation.ALL:
                continue
            if acl.permission is PermissionType.DENY:
                if acl.pattern_type is PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                elif acl.pattern_type is PatternType.PREFIXED:
                    deny_prefix.add(acl.resource_name)
            elif acl.permission is PermissionType.ALLOW:
                if acl.pattern_type is PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return True
                allows.append(acl)
        for acl in allows:
            if acl.pattern_type is PatternType.LITERAL and acl.resource_name in deny_literal:
                continue
            pattern = acl.resource_name
            if any(pattern[:n] in deny_prefix for n in range(1, len(pattern) + 1)):
                continue
            return True
        return False

    def authorized_operations(self, session: Session, resource_type: ResourceType,
                              name: str) -> int:
        """The bitfield of the supported operations the principal may do on the resource
        (checked without audit noise, as Kafka's logIfAllowed/logIfDenied false)."""
        return operations_bitfield(
            op for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(session, op, resource_type, name, log_if_allowed=False,
                              log_if_denied=False))

    # -------------------------------------------------------------- audit log

    def _audit(self, allowed: bool, principal: str, session: Session, operation: AclOperation,
               resource_type: ResourceType, name: str, api: str, rule: str,
               log_if_allowed: bool, log_if_denied: bool) -> None:
        if allowed:
            level = logging.DEBUG if log_if_allowed else TRACE
        else:
            level = logging.INFO if log_if_denied else TRACE
        if not AUDIT_LOG.isEnabledFor(level):
            return
        AUDIT_LOG.log(
            level, "Principal = %s is %s operation = %s from host = %s on resource = %s:%s:%s "
            "for request = %s with resourceRefCount = 1 based on rule %s", principal,
            "Allowed" if allowed else "Denied", operation.name, session.client_address,
            _TYPE_NAMES.get(resource_type, resource_type.name), PatternType.LITERAL.name, name,
            api or "?", rule)


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons, as Kafka reads it."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


def authorizer_from_config(config: Any,
                           acls_source: Callable[[], Mapping[Any, AclEntry]]
                           ) -> StandardAuthorizer | None:
    """The node's authorizer from `authorizer.class.name`: None when empty (Kafka's
    default, no authorization), the StandardAuthorizer for Kafka's class name; any other
    class is refused, since a node that silently authorized nothing would be worse."""
    name = str(config.get("authorizer.class.name") or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(
            f"Invalid value {name} for configuration authorizer.class.name: odradek implements "
            f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))} (ACLs in the metadata log) and no "
            "other authorizer; set that or leave it empty")
    allow = config.get("allow.everyone.if.no.acl.found")
    if isinstance(allow, str):
        allow = allow.strip().lower() == "true"
    return StandardAuthorizer(acls_source, parse_super_users(config.get("super.users")),
                              bool(allow))
