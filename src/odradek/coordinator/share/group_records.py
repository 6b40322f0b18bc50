"""Share-group membership as records of `__consumer_offsets`, Kafka's own record types:
ShareGroupMemberMetadata (key version 10: rack, client id and host, subscribed topics),
ShareGroupMetadata (11: the group epoch) and ShareGroupCurrentMemberAssignment (14: the
member's epoch and assigned partitions). Keys are classic (non-flexible) encoding, values
flexible (version 0), as Kafka writes them; a null value is a tombstone.

The group coordinator's replay skips these key versions; the share coordinator reads them
back (`replay_groups`) to restore its groups, so members keep their epochs across a
restart. Decoding goes through the checked Reader: a corrupt record raises ProtocolError.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from odradek.coordinator.share.group import ShareGroup, ShareMember
from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import Reader, Writer
from odradek.protocol.records import decode_records

MEMBER_METADATA_KEY = 10
GROUP_METADATA_KEY = 11
CURRENT_MEMBER_ASSIGNMENT_KEY = 14
STATE_PARTITION_METADATA_KEY = 15
SHARE_KEYS = frozenset({MEMBER_METADATA_KEY, GROUP_METADATA_KEY, CURRENT_MEMBER_ASSIGNMENT_KEY,
                        STATE_PARTITION_METADATA_KEY})
GROUP_KEYS = frozenset({GROUP_METADATA_KEY, STATE_PARTITION_METADATA_KEY})  # no member id
Record = tuple[bytes, bytes | None]


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    w = Writer()
    w.write_int16(kind)
    w.write_string(group_id)
    if member_id is not None:
        w.write_string(member_id)
    return w.getvalue()


def group_records(g: ShareGroup) -> list[Record]:
    w = Writer()
    w.write_int16(0)
    w.write_int32(g.group_epoch)
    w.write_tagged_fields()
    return [(_key(GROUP_METADATA_KEY, g.group_id), w.getvalue())]


def member_records(group_id: str, m: ShareMember,
                   topic_ids: dict[str, uuid.UUID]) -> list[Record]:
    meta = Writer()
    meta.write_int16(0)
    meta.write_compact_nullable_string(m.rack_id)
    meta.write_compact_string(m.client_id)
    meta.write_compact_string(m.client_host)
    meta.write_compact_array_len(len(m.subscribed))
    for t in m.subscribed:
        meta.write_compact_string(t)
    meta.write_tagged_fields()
    assign = Writer()
    assign.write_int16(0)
    assign.write_int32(m.member_epoch)
    assign.write_int32(m.member_epoch)  # previous epoch: a share member has no revocation
    assign.write_int8(0)  # MemberState.STABLE
    tps = [(topic_ids[t], ps) for t, ps in sorted(m.assignment.items()) if t in topic_ids]
    assign.write_compact_array_len(len(tps))
    for tid, ps in tps:
        assign.write_uuid(tid)
        assign.write_compact_array_len(len(ps))
        for p in ps:
            assign.write_int32(p)
        assign.write_tagged_fields()
    assign.write_tagged_fields()
    return [(_key(MEMBER_METADATA_KEY, group_id, m.member_id), meta.getvalue()),
            (_key(CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, m.member_id), assign.getvalue())]


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [(_key(CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member_id), None),
            (_key(MEMBER_METADATA_KEY, group_id, member_id), None)]


def state_partition_metadata(g: ShareGroup) -> list[Record]:
    """ShareGroupStatePartitionMetadata (key version 15): the topic-partitions whose
    share-group state may exist (InitializedTopics), none being deleted (DeletingTopics)."""
    w = Writer()
    w.write_int16(0)
    topics = sorted(g.initialized.items(), key=lambda kv: kv[1][0])
    w.write_compact_array_len(len(topics))
    for tid, (name, parts) in topics:
        w.write_uuid(tid)
        w.write_compact_string(name)
        w.write_compact_array_len(len(parts))
        for p in sorted(parts):
            w.write_int32(p)
        w.write_tagged_fields()
    w.write_compact_array_len(0)
    w.write_tagged_fields()
    return [(_key(STATE_PARTITION_METADATA_KEY, g.group_id), w.getvalue())]


def group_tombstone(group_id: str) -> list[Record]:
    return [(_key(STATE_PARTITION_METADATA_KEY, group_id), None),
            (_key(GROUP_METADATA_KEY, group_id), None)]


@dataclass
class RestoredGroup:
    epoch: int = 0
    metadata: dict[str, dict] = field(default_factory=dict)
    assignment: dict[str, dict] = field(default_factory=dict)
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)


def _initialized(v: Reader) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
    out = {}
    for _ in range(v.compact_array_len() or 0):
        tid = v.uuid()
        name = v.compact_string()
        parts = frozenset(v.int32() for _ in range(v.compact_array_len() or 0))
        v.skip_tagged_fields()
        out[tid] = (name, parts)
    for _ in range(v.compact_array_len() or 0):  # DeletingTopics: none is written here
        v.uuid()
        v.compact_string()
        v.skip_tagged_fields()
    return out


def _value_version(r: Reader) -> None:
    if r.int16() != 0:
        raise ProtocolError("unknown share group record value version")


def apply(groups: dict[str, RestoredGroup], key: bytes, value: bytes | None) -> bool:
    """Apply one `__consumer_offsets` record if it is a share-group one; whether it was."""
    r = Reader(key)
    kind = r.int16()
    if kind not in SHARE_KEYS:
        return False
    gid = r.string()
    member = r.string() if kind not in GROUP_KEYS else None
    if kind == STATE_PARTITION_METADATA_KEY:
        if value is None:
            if gid in groups:
                groups[gid].initialized = {}
            return True
        v = Reader(value)
        _value_version(v)
        groups.setdefault(gid, RestoredGroup()).initialized = _initialized(v)
        return True
    if kind == GROUP_METADATA_KEY:
        if value is None:
            groups.pop(gid, None)
            return True
        v = Reader(value)
        _value_version(v)
        groups.setdefault(gid, RestoredGroup()).epoch = v.int32()
        return True
    g = groups.setdefault(gid, RestoredGroup())
    table = g.metadata if kind == MEMBER_METADATA_KEY else g.assignment
    if value is None:
        table.pop(member or "", None)
        return True
    v = Reader(value)
    _value_version(v)
    if kind == MEMBER_METADATA_KEY:
        rack = v.compact_nullable_string()
        client_id = v.compact_string()
        host = v.compact_string()
        topics = tuple(v.compact_string() for _ in range(v.compact_array_len() or 0))
        table[member or ""] = {"rack_id": rack, "client_id": client_id,
                               "client_host": host, "subscribed": topics}
    else:
        epoch = v.int32()
        v.int32()
        v.int8()
        tps = []
        for _ in range(v.compact_array_len() or 0):
            tid = v.uuid()
            ps = [v.int32() for _ in range(v.compact_array_len() or 0)]
            v.skip_tagged_fields()
            tps.append((tid, ps))
        table[member or ""] = {"epoch": epoch, "partitions": tps}
    return True


def restore(restored: dict[str, RestoredGroup], topic_name: object,
            deadline: float) -> Iterator[ShareGroup]:
    """ShareGroups from replayed records; every member's session restarts at `deadline`
    (Kafka restarts the session timers of a loaded group)."""
    for gid, rg in restored.items():
        g = ShareGroup(gid)
        g.group_epoch = g.assignment_epoch = rg.epoch
        g.initialized = dict(rg.initialized)
        for mid, meta in rg.metadata.items():
            a = rg.assignment.get(mid, {"epoch": 0, "partitions": []})
            assignment = {}
            for tid, ps in a["partitions"]:
                name = topic_name(tid)  # type: ignore[operator]
                if name is not None:
                    assignment[name] = list(ps)
            g.members[mid] = ShareMember(mid, a["epoch"], meta["subscribed"], meta["rack_id"],
                                         meta["client_id"], meta["client_host"], deadline,
                                         assignment)
        yield g


def records_of(batches: Iterable[tuple[object, object]]) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) of the non-transactional data records of replayed batches."""
    for header, view in batches:
        if header.is_control or header.is_transactional:  # type: ignore[attr-defined]
            continue
        for rec in decode_records(header, view):  # type: ignore[arg-type]
            if rec.key is not None:
                yield bytes(rec.key), None if rec.value is None else bytes(rec.value)
