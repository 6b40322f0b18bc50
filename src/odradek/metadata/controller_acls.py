"""The controller's ACL operations (Kafka's AclControlManager): CreateAcls and DeleteAcls
become AccessControlEntryRecord / RemoveAccessControlEntryRecord in the metadata log, so every
node's image (and its authorizer) follows them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.metadata.acls import AclEntry, AclFilter, acl_error, record_of_acl
from odradek.metadata.records import MetadataRecord, RemoveAccessControlEntryRecord
from odradek.protocol.errors import ErrorCode

__all__ = ["AclControl", "AclResult", "DeleteAclsResult"]


@dataclass(frozen=True, slots=True)
class AclResult:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass(slots=True)
class DeleteAclsResult:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    deleted: list[AclEntry] = field(default_factory=list)


class AclControl:
    """Mixin of the Controller (its `_lock`, `_require_active`, `image`, `_commit`)."""

    _lock: Any
    image: Any

    def create_acls(self, acls: Sequence[AclEntry]) -> list[AclResult]:
        """Each binding checked alone (a bad one fails with INVALID_REQUEST, the others go
        on); one already present is not written twice. The new ones go as one batch."""
        with self._lock:
            self._require_active()  # type: ignore[attr-defined]
            existing = set(self.image.acls.values())
            results: list[AclResult] = []
            records: list[MetadataRecord] = []
            for acl in acls:
                problem = acl_error(acl)
                if problem is not None:
                    results.append(AclResult(ErrorCode.invalid_request, problem))
                    continue
                if acl not in existing:
                    existing.add(acl)
                    records.append(record_of_acl(uuid.uuid4(), acl))
                results.append(AclResult())
            self._commit(records)  # type: ignore[attr-defined]
            return results

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[DeleteAclsResult]:
        """Every binding a filter matches is removed (one binding matched by two filters is
        reported by both, removed once)."""
        with self._lock:
            self._require_active()  # type: ignore[attr-defined]
            acls = self.image.acls
            results: list[DeleteAclsResult] = []
            removed: set[uuid.UUID] = set()
            records: list[MetadataRecord] = []
            for flt in filters:
                problem = flt.error()
                if problem is not None:
                    results.append(DeleteAclsResult(ErrorCode.invalid_request, problem))
                    continue
                result = DeleteAclsResult()
                for acl_id, acl in acls.items():
                    if flt.matches(acl):
                        result.deleted.append(acl)
                        if acl_id not in removed:
                            removed.add(acl_id)
                            records.append(RemoveAccessControlEntryRecord(acl_id))
                results.append(result)
            self._commit(records)  # type: ignore[attr-defined]
            return results
