"""The controller's part of SCRAM credentials (Kafka's ScramControlManager): checks an
AlterUserScramCredentials and commits its UserScramCredentialRecord /
RemoveUserScramCredentialRecord. The credential arrives already derived (salt, StoredKey,
ServerKey): the controller never sees a password."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from odradek.metadata.image import MetadataImage
from odradek.metadata.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from odradek.protocol.errors import ErrorCode

__all__ = ["MECHANISM_TYPES", "ScramControl", "UserResult"]

MECHANISM_TYPES = (1, 2)  # SCRAM-SHA-256, SCRAM-SHA-512
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384

# (user, error code, error message)
UserResult = tuple[str, int, str | None]


class ScramControl:
    # provided by Controller
    image: MetadataImage
    _lock: Any
    _commit: Any
    _require_active: Any

    def alter_user_scram_credentials(
        self, deletions: Sequence[tuple[str, int]],
        upsertions: Sequence[UserScramCredentialRecord],
    ) -> list[UserResult]:
        """One result per user named; a user with any bad entry has none of its changes
        applied, the other users' go in (Kafka's per-user outcome)."""
        with self._lock:
            self._require_active()
            errors: dict[str, tuple[int, str]] = {}
            keys = Counter([*deletions, *((u.name, u.mechanism) for u in upsertions)])
            for (user, _mech), n in keys.items():
                if n > 1:
                    errors.setdefault(user, (ErrorCode.duplicate_resource,
                                             "A user credential cannot be altered twice in "
                                             "the same request"))
            existing = self.image.scram_credentials
            for user, mech in deletions:
                if not user:
                    errors.setdefault(user, (ErrorCode.unacceptable_credential,
                                             "Username must not be empty"))
                elif mech not in MECHANISM_TYPES:
                    errors.setdefault(user, (ErrorCode.unsupported_sasl_mechanism,
                                             "Unknown SCRAM mechanism"))
                elif (user, mech) not in existing:
                    errors.setdefault(user, (ErrorCode.resource_not_found,
                                             "Attempt to delete a user credential that "
                                             "does not exist"))
            for up in upsertions:
                if not up.name:
                    errors.setdefault(up.name, (ErrorCode.unacceptable_credential,
                                                "Username must not be empty"))
                elif up.mechanism not in MECHANISM_TYPES:
                    errors.setdefault(up.name, (ErrorCode.unsupported_sasl_mechanism,
                                                "Unknown SCRAM mechanism"))
                elif up.iterations < MIN_ITERATIONS:
                    errors.setdefault(up.name, (ErrorCode.unacceptable_credential,
                                                "Too few iterations"))
                elif up.iterations > MAX_ITERATIONS:
                    errors.setdefault(up.name, (ErrorCode.unacceptable_credential,
                                                "Too many iterations"))
            records: list[MetadataRecord] = []
            records += [RemoveUserScramCredentialRecord(u, m) for u, m in deletions
                        if u not in errors]
            records += [u for u in upsertions if u.name not in errors]
            if records:
                self._commit(records)
            users = list(dict.fromkeys([*(u for u, _ in deletions),
                                        *(u.name for u in upsertions)]))
            return [(u, *errors[u]) if u in errors else (u, ErrorCode.none, None)
                    for u in users]


def describe_user_scram_credentials(image: MetadataImage,
                                    users: Sequence[str] | None) -> list[tuple[str, int,
                                                                                 str | None,
                                                                                 list[tuple[int, int]]]]:
    """(user, error code, message, [(mechanism, iterations)]); None: every user."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (user, mech), rec in sorted(image.scram_credentials.items()):
        by_user.setdefault(user, []).append((mech, rec.iterations))
    if users is None:
        return [(u, ErrorCode.none, None, infos) for u, infos in by_user.items()]
    counts = Counter(users)
    out = []
    for user in dict.fromkeys(users):
        if counts[user] > 1:
            out.append((user, ErrorCode.duplicate_resource,
                        "Cannot describe SCRAM credentials for the same user twice in a "
                        "single request", []))
        elif user not in by_user:
            out.append((user, ErrorCode.resource_not_found,
                        "Attempt to describe a user credential that does not exist", []))
        else:
            out.append((user, ErrorCode.none, None, by_user[user]))
    return out
