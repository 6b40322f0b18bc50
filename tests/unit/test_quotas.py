"""security.quotas: Kafka's quota resolution order, shared and per-entity sensors, the
windowed rate and the throttle time; metadata: ClientQuotaRecords and AccessControlEntry
records through the controller ops into the image and back out of a snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.metadata.acls import AclEntry, AclFilter, AclOperation, PatternType, PermissionType
from odradek.metadata.acls import ResourceType as RT
from odradek.metadata.controller_acls import AclControl
from odradek.metadata.controller_quotas import ClientQuotaAlteration, QuotaControl
from odradek.metadata.image import MetadataImage, image_to_records
from odradek.metadata.records import MetadataRecord
from odradek.protocol.errors import ErrorCode
from odradek.security.quotas import ClientQuotas, Rate, resolve_quota

U, C = "user", "client-id"


def q(*parts: tuple[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(parts))


def test_resolution_order() -> None:
    levels = [
        (q((U, "alice"), (C, "app")), ("k", "alice", "app")),
        (q((U, "alice"), (C, None)), ("k", "alice", "app")),
        (q((U, "alice")), ("k", "alice", "")),
        (q((U, None), (C, "app")), ("k", "alice", "app")),
        (q((U, None), (C, None)), ("k", "alice", "app")),
        (q((U, None)), ("k", "alice", "")),
        (q((C, "app")), ("k", "", "app")),
        (q((C, None)), ("k", "", "app")),
    ]
    # with every level set, each one wins once the ones before it are gone
    for i, (entity, sensor) in enumerate(levels):
        quotas = {e: {"k": float(j + 1)} for j, (e, _) in enumerate(levels[i:], start=i)}
        assert resolve_quota(quotas, "k", "alice", "app") == (float(i + 1), sensor), entity
    assert resolve_quota({}, "k", "alice", "app") is None
    assert resolve_quota({q((U, "bob")): {"k": 1.0}}, "k", "alice", "app") is None
    assert resolve_quota({q((U, "alice")): {"other": 1.0}}, "k", "alice", "app") is None


def test_rate_window() -> None:
    r = Rate(samples=11, span_ms=1000)
    r.record(10_000, now_ms=0)
    # a new sensor's window is at least samples-1 spans: 10 s
    assert r.window_ms(0) == 10_000 and r.measure(0) == pytest.approx(1000)
    r.record(10_000, now_ms=20_000)  # the first sample fell out of the window
    assert r.measure(20_000) == pytest.approx(1000)


def test_throttle_and_unrecord() -> None:
    now = [0.0]
    quotas = ClientQuotas(lambda: {q((C, "slow")): {"producer_byte_rate": 1000.0}},
                          samples=11, span_ms=1000, clock=lambda: now[0])
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "fast", 1e9) == 0  # no quota
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "slow", 5_000) == 0  # 500 B/s
    # 15 000 B over a 10 s window is 1500 B/s: 50% over, for half the window
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "slow", 10_000) == 5000
    quotas.unrecord("producer_byte_rate", "ANONYMOUS", "slow", 10_000)
    assert quotas.throttle_ms("producer_byte_rate", "ANONYMOUS", "slow") == 0
    # far over: capped at the whole window
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "slow", 1e9) == 11_000


def test_shared_and_per_entity_sensors() -> None:
    now = [0.0]
    shared = ClientQuotas(lambda: {q((U, "alice")): {"k": 1000.0}}, clock=lambda: now[0])
    shared.record("k", "alice", "a", 6000)
    # alice's clients share her quota: b is throttled by what a sent
    assert shared.record("k", "alice", "b", 6000) > 0
    per = ClientQuotas(lambda: {q((U, None)): {"k": 1000.0}}, clock=lambda: now[0])
    per.record("k", "alice", "a", 6000)
    # the default user quota: each user on its own
    assert per.record("k", "bob", "a", 6000) == 0


class _Controller(AclControl, QuotaControl):
    """The mixins over an in-memory log: what `_commit` appends, the image applies."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.RLock()
        self.image = MetadataImage()
        self.log: list[MetadataRecord] = []

    def _require_active(self) -> None:
        pass

    def _commit(self, records: list[MetadataRecord]) -> None:
        self.log += records
        self.image = self.image.apply(records)


def test_acl_and_quota_records_through_the_controller_and_snapshot() -> None:
    c = _Controller()
    read = AclEntry(RT.TOPIC, "t", PatternType.LITERAL, "User:a", "*", AclOperation.READ,
                    PermissionType.ALLOW)
    bad = AclEntry(RT.GROUP, "g", PatternType.LITERAL, "User:a", "*", AclOperation.WRITE,
                   PermissionType.ALLOW)
    results = c.create_acls([read, bad, read])
    assert [r.error_code for r in results] == [ErrorCode.none, ErrorCode.invalid_request,
                                               ErrorCode.none]
    assert list(c.image.acls.values()) == [read]  # written once
    alter: Any = c.alter_client_quotas([
        ClientQuotaAlteration([(U, "a")], [("producer_byte_rate", 1024.0, False)]),
        ClientQuotaAlteration([("ip", None)], [("connection_creation_rate", 1.0, False)]),
        ClientQuotaAlteration([(C, None)], [("producer_byte_rate", 1.5, False)]),
        ClientQuotaAlteration([(C, None)], [("bogus", 1.0, False)]),
    ])
    assert [code for code, _ in alter] == [ErrorCode.none] + [ErrorCode.invalid_request] * 3
    assert c.image.client_quotas == {((U, "a"),): {"producer_byte_rate": 1024.0}}
    # a snapshot of the image rebuilds both
    rebuilt = MetadataImage().apply(image_to_records(c.image))
    assert rebuilt.acls == c.image.acls and rebuilt.client_quotas == c.image.client_quotas
    deleted = c.delete_acls([AclFilter(resource_type=RT.TOPIC), AclFilter()])
    assert [r.deleted for r in deleted] == [[read], [read]] and not c.image.acls
    c.alter_client_quotas([ClientQuotaAlteration([(U, "a")],
                                                 [("producer_byte_rate", 0.0, True)])])
    assert c.image.client_quotas == {}
