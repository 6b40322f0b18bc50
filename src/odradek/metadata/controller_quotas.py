"""The controller's client-quota operation (Kafka's ClientQuotaControlManager):
AlterClientQuotas becomes ClientQuotaRecords in the metadata log, so every node's image (and
its quota manager) follows them.

An entity is one `user`, one `client-id`, or both; a name of None is that type's default.
Keys: producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate.
`ip` entities (connection_creation_rate) are refused: odradek does not enforce them, and a
quota that is stored but never applied would be a silent weakening.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.metadata.records import ClientQuotaRecord, MetadataRecord, QuotaEntityData
from odradek.protocol.errors import ErrorCode

__all__ = ["QUOTA_KEYS", "ClientQuotaAlteration", "QuotaControl", "quota_entity_error"]

USER, CLIENT_ID = "user", "client-id"
# the keys and whether Kafka types them LONG (whole numbers) or DOUBLE
QUOTA_KEYS = {"producer_byte_rate": True, "consumer_byte_rate": True,
              "request_percentage": False, "controller_mutation_rate": False}


@dataclass(slots=True)
class ClientQuotaAlteration:
    entity: list[tuple[str, str | None]]
    ops: list[tuple[str, float, bool]] = field(default_factory=list)  # key, value, remove


def quota_entity_error(entity: Sequence[tuple[str, str | None]]) -> str | None:
    types = [t for t, _ in entity]
    if not types:
        return "Invalid empty client quota entity"
    if len(set(types)) != len(types):
        return f"Invalid client quota entity: duplicate entity type in {types}"
    unknown = [t for t in types if t not in (USER, CLIENT_ID)]
    if "ip" in unknown:
        return ("ip quotas (connection_creation_rate) are not enforced by odradek; only user "
                "and client-id entities are accepted")
    if unknown:
        return f"Unhandled client quota entity type: {unknown[0]}"
    return None


def _op_error(key: str, value: float, remove: bool) -> str | None:
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        return f"Invalid configuration key {key}"
    if remove:
        return None
    if math.isnan(value) or math.isinf(value) or value <= 0:
        return f"Quota value for {key} must be a positive number, got {value}"
    if whole and value != int(value):
        return f"Integer value required for configuration key {key}, got {value}"
    return None


class QuotaControl:
    """Mixin of the Controller (its `_lock`, `_require_active`, `_commit`)."""

    _lock: Any

    def alter_client_quotas(self, entries: Sequence[ClientQuotaAlteration],
                            validate_only: bool = False
                            ) -> list[tuple[ErrorCode, str | None]]:
        with self._lock:
            self._require_active()  # type: ignore[attr-defined]
            results: list[tuple[ErrorCode, str | None]] = []
            records: list[MetadataRecord] = []
            for entry in entries:
                problem = quota_entity_error(entry.entity)
                if problem is None:
                    keys = [k for k, _, _ in entry.ops]
                    if len(set(keys)) != len(keys):
                        problem = f"Duplicate quota key in {keys}"
                    else:
                        problem = next((e for k, v, r in entry.ops
                                        if (e := _op_error(k, v, r)) is not None), None)
                if problem is not None:
                    results.append((ErrorCode.invalid_request, problem))
                    continue
                parts = [QuotaEntityData(t, n) for t, n in entry.entity]
                records += [ClientQuotaRecord(list(parts), k, 0.0 if r else float(v), r)
                            for k, v, r in entry.ops]
                results.append((ErrorCode.none, None))
            if not validate_only:
                self._commit(records)  # type: ignore[attr-defined]
            return results
