"""What an admin does to share groups (Kafka's kafka-share-groups): list them, read their
share-partition start offsets and lag, move the start offsets, delete the offsets of
topics, delete whole groups. Offsets may only be moved or deleted while the group has no
members (NON_EMPTY_GROUP otherwise, as Kafka), so no member holds records whose window
is being changed.

A share group is known by its members (in memory) or by the share-partition state it has
in `__share_group_state` (which outlives a restart): a group with state but no members is
Empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.share import group_records as gr
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.partition import DONE
from odradek.coordinator.share.state_log import TOPIC as STATE_TOPIC
from odradek.coordinator.share.state_log import ShareKey
from odradek.protocol.errors import ErrorCode

E = ErrorCode


@dataclass(frozen=True, slots=True)
class StartOffset:
    start_offset: int  # -1: the share-partition was never initialized
    lag: int  # -1: not known here
    error: ErrorCode = E.none
    # records at or past the start offset already done (acknowledged or archived)
    done: int = 0


def with_high_watermark(so: StartOffset, high_watermark: int | None) -> StartOffset:
    """`so` with its lag against a high watermark learnt elsewhere (the partition's leader
    on another node); unchanged when there is none."""
    if high_watermark is None or so.start_offset < 0:
        return so
    return StartOffset(so.start_offset, max(0, high_watermark - so.start_offset - so.done),
                       so.error, so.done)


def group_ids(coord: ShareCoordinator) -> set[str]:
    return set(coord.groups) | {k.group_id for k in (*coord.snapshots, *coord.partitions)}


def group_state(coord: ShareCoordinator, group_id: str) -> str:
    g = coord.groups.get(group_id)
    return g.state if g is not None else "Empty"


def list_groups(coord: ShareCoordinator, states: set[str] | None = None
                ) -> list[tuple[str, str]]:
    """(group id, state) of every share group, filtered by lower-case state names."""
    rows = [(gid, group_state(coord, gid)) for gid in sorted(group_ids(coord))]
    return [r for r in rows if not states or r[1].lower() in states]


def keys_of(coord: ShareCoordinator, group_id: str) -> set[ShareKey]:
    return {k for k in (*coord.snapshots, *coord.partitions) if k.group_id == group_id}


def start_offset(coord: ShareCoordinator, key: ShareKey, high_watermark: int | None
                 ) -> StartOffset:
    """The share-partition start offset and lag (records from the SPSO to the high
    watermark not yet done: Kafka's share-partition lag), from memory or the snapshot."""
    sp = coord.partitions.get(key)
    if sp is not None:
        start = sp.start_offset
        done = sum(1 for r in sp.records.values() if r.state in DONE)
    else:
        snap = coord.snapshots.get(key)
        if snap is None:
            return StartOffset(-1, -1)
        start = snap.start_offset
        done = sum(b.last_offset - b.first_offset + 1 for b in snap.batches
                   if b.state in DONE)
    lag = -1 if high_watermark is None else max(0, high_watermark - start - done)
    return StartOffset(start, lag, E.none, done)


async def start_offset_anywhere(coord: ShareCoordinator, key: ShareKey, part: object,
                                timeout_s: float = 5.0) -> StartOffset:
    """The start offset and lag of a share-partition whose state may be coordinated on
    another node (ReadShareGroupStateSummary through the persister). `part` is the
    topic-partition when this node leads it (the lag needs its high watermark), else None.
    A share-partition in memory here (this node leads it) answers from memory."""
    hw = None if part is None else int(part.high_watermark)  # type: ignore[attr-defined]
    if part is not None and coord.loaded(key, part):
        return start_offset(coord, key, hw)
    got = await coord.persister.summary(key, timeout_s=timeout_s)
    if got.error != E.none:
        return StartOffset(-1, -1, got.error)
    if got.start_offset < 0:
        return StartOffset(-1, -1)
    done = max(0, got.delivery_complete_count)
    lag = -1 if hw is None else max(0, hw - got.start_offset - done)
    return StartOffset(got.start_offset, lag, E.none, done)


def _empty_or(coord: ShareCoordinator, group_id: str) -> ErrorCode:
    g = coord.groups.get(group_id)
    return E.non_empty_group if g is not None and g.members else E.none


async def alter_start_offset(coord: ShareCoordinator, key: ShareKey, offset: int
                             ) -> ErrorCode:
    """Start the share-partition afresh at `offset` (AlterShareGroupOffsets): its share
    coordinator initializes it with the next state epoch, wherever it is."""
    if (code := _empty_or(coord, key.group_id)) != E.none:
        return code
    if offset < 0:
        return E.invalid_request
    return (await coord.reset_state(key, offset)).error


async def delete_offsets(coord: ShareCoordinator, group_id: str, topic_id: object
                         ) -> ErrorCode:
    """Forget the group's state on every partition of a topic (DeleteShareGroupOffsets)."""
    if (code := _empty_or(coord, group_id)) != E.none:
        return code
    for key in sorted(keys_of(coord, group_id), key=lambda k: k.partition):
        if key.topic_id == topic_id and (code := await coord.delete_state(key)) != E.none:
            return code
    return E.none


async def delete_group(coord: ShareCoordinator, group_id: str) -> ErrorCode:
    """DeleteGroups of a share group: only an empty one; its share-partition state goes
    with it, wherever it is coordinated: the keys this node holds, and every
    topic-partition the group was ever assigned (ShareGroupStatePartitionMetadata), each a
    DeleteShareGroupState at its share coordinator (the persister; Kafka's group
    coordinator deletes the state through its persister too). A state that cannot be
    deleted now fails the deletion, and the group stays."""
    if group_id not in group_ids(coord):
        return E.group_id_not_found
    if (code := _empty_or(coord, group_id)) != E.none:
        return code
    keys = keys_of(coord, group_id)
    g = coord.groups.get(group_id)
    if g is not None:
        keys |= {ShareKey(group_id, tid, p) for tid, (_, parts) in g.initialized.items()
                 for p in parts}
    if coord.topics(STATE_TOPIC) is None:
        keys_here: set[ShareKey] = set()  # no __share_group_state: no state anywhere
    elif (code := await coord.ensure_ready()) != E.none:
        return code
    else:
        keys_here = keys
    for key in sorted(keys_here, key=lambda k: (str(k.topic_id), k.partition)):
        code = await coord.delete_state(key)
        # a deleted topic's state cannot be named any more: nothing to delete
        if code not in (E.none, E.unknown_topic_or_partition):
            return code
    for key in keys:
        coord.forget(key)
    if coord.groups.pop(group_id, None) is not None:
        coord.append_offsets_records(group_id, gr.group_tombstone(group_id))
    return E.none
