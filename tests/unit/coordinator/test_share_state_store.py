"""The share coordinator's state store (Kafka's ShareCoordinatorShard) over a real runtime
and real logs: the five persister operations with Kafka's codes (fencing by leader and
state epoch, unknown partitions, bad batches, keys not owned or loading) with nothing
written when refused; state replayed by a new leader; the batch merge against a model; the
FindCoordinator share key parser fuzzed."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.handlers.share_state import parse_share_key
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.coordinator.share.partition import RecordState, StateBatch
from odradek.coordinator.share.state_log import TOPIC, ShareKey
from odradek.coordinator.share.state_store import ShareStateStore, merge_batches
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import Node

E = ErrorCode
A, ACK, ARC = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
STATE_PARTITIONS = 3


def _setup(tmp_path: Path) -> tuple[Node, CoordinatorRuntime, ShareStateStore, uuid.UUID]:
    node = Node(tmp_path, topics={TOPIC: STATE_PARTITIONS, "data": 2})
    runtime = CoordinatorRuntime(node.rm)
    store = _store(node, runtime)
    runtime.load(TOPIC, range(STATE_PARTITIONS))
    return node, runtime, store, node.lookup("data")[0]  # type: ignore[index]


def _store(node: Node, runtime: CoordinatorRuntime) -> ShareStateStore:
    def exists(tid: uuid.UUID, p: int) -> bool:
        name = node.name_of(tid)
        info = node.lookup(name) if name else None
        return info is not None and 0 <= p < info[1]

    store = ShareStateStore(runtime, exists)
    store.register(STATE_PARTITIONS)
    return store


def _end(node: Node, store: ShareStateStore, key: ShareKey) -> int:
    return node.rm.get(TOPIC, store.state_partition(key)).log_end_offset  # type: ignore[no-any-return]


def test_read_write_fencing_and_replay(tmp_path: Path) -> None:
    node, _runtime, store, tid = _setup(tmp_path)
    key = ShareKey("g", tid, 0)
    # no state yet: Kafka's defaults (start -1, state epoch 0)
    r = store.read(key, 3)
    assert (r.error, r.start_offset, r.state_epoch, r.batches) == (E.none, -1, 0, ())
    batches = (StateBatch(10, 12, ACK, 1), StateBatch(13, 13, A, 2))
    assert store.write(key, 0, 3, 10, batches).error == E.none
    r = store.read(key, 3)
    assert (r.start_offset, r.batches) == (10, batches)
    # a deposed leader (older epoch) can neither read nor write; nothing is appended
    end = _end(node, store, key)
    assert store.read(key, 2).error == E.fenced_leader_epoch
    assert store.write(key, 0, 2, 14, ()).error == E.fenced_leader_epoch
    assert _end(node, store, key) == end
    # a newer leader reads, and from then on the old one is fenced
    assert store.read(key, 4).error == E.none
    assert store.write(key, 0, 3, 14, ()).error == E.fenced_leader_epoch
    # the merge: a delta overwrites where it overlaps, the start offset cuts below it
    assert store.write(key, 0, 4, 11, (StateBatch(13, 13, ACK, 2),)).error == E.none
    assert store.read(key, 4).batches == (StateBatch(11, 12, ACK, 1),
                                          StateBatch(13, 13, ACK, 2))
    # an admin initializes with the next state epoch: older state epochs are fenced
    assert store.initialize(key, 1, 50).error == E.none
    assert store.write(key, 0, 4, 51, ()).error == E.fenced_state_epoch
    assert store.initialize(key, 0, 60).error == E.fenced_state_epoch
    s = store.summary(key, -1)
    assert (s.error, s.state_epoch, s.start_offset, s.delivery_complete_count) == (
        E.none, 1, 50, 0)
    assert store.write(key, 1, 4, 50, (StateBatch(50, 51, ACK, 1),)).error == E.none
    assert store.summary(key, -1).delivery_complete_count == 2

    # a new leader of the state partition replays it: same state, same fencing
    other = _store(node, CoordinatorRuntime(node.rm))
    other.runtime.load(TOPIC, range(STATE_PARTITIONS))  # type: ignore[attr-defined]
    r = other.read(key, 4)
    assert (r.state_epoch, r.start_offset, r.batches) == (1, 50, (StateBatch(50, 51, ACK, 1),))
    assert other.write(key, 1, 3, 50, ()).error == E.fenced_leader_epoch
    # delete: a tombstone, the defaults again (on replay too)
    assert other.delete(key).error == E.none
    assert other.read(key, 5).start_offset == -1
    third = _store(node, CoordinatorRuntime(node.rm))
    third.runtime.load(TOPIC, range(STATE_PARTITIONS))  # type: ignore[attr-defined]
    assert key not in third.snapshots
    node.close()


def test_refusals_change_nothing(tmp_path: Path) -> None:
    node, runtime, store, tid = _setup(tmp_path)
    key = ShareKey("g", tid, 1)
    assert store.write(key, 0, 0, 5, (StateBatch(5, 6, A, 1),)).error == E.none
    before = dict(store.snapshots)
    ends = {p: node.rm.get(TOPIC, p).log_end_offset for p in range(STATE_PARTITIONS)}
    bad = [
        (store.write(ShareKey("g", uuid.uuid4(), 0), 0, 0, 0, ()), E.unknown_topic_or_partition),
        (store.read(ShareKey("g", tid, 7), 0), E.unknown_topic_or_partition),
        (store.write(ShareKey("g", tid, -1), 0, 0, 0, ()), E.invalid_request),
        (store.read(ShareKey("", tid, 0), 0), E.invalid_request),
        (store.write(key, 0, 0, 5, (StateBatch(5, 7, A, 1), StateBatch(7, 8, A, 1))),
         E.invalid_request),  # overlapping batches
        (store.write(key, 0, 0, 5, (StateBatch(9, 8, A, 1),)), E.invalid_request),
        (store.write(key, 0, 0, 5, (StateBatch(5, 5, RecordState.ACQUIRED, 1),)),
         E.invalid_request),  # a lock is never persisted
        (store.write(ShareKey("new", tid, 0), 0, 0, -1, ()), E.invalid_request),
        (store.initialize(key, 0, -3), E.invalid_request),
    ]
    for got, code in bad:
        assert got.error == code, (got, code)
    # a key whose partition is not owned, or still loading
    p = store.state_partition(key)
    runtime.unload(TOPIC, [p])
    assert store.read(key, 0).error == E.not_coordinator
    assert store.write(key, 0, 0, 5, ()).error == E.not_coordinator
    runtime.begin_loading(TOPIC, [p])
    assert store.summary(key, 0).error == E.coordinator_load_in_progress
    assert store.delete(key).error == E.coordinator_load_in_progress
    assert {p: node.rm.get(TOPIC, p).log_end_offset for p in range(STATE_PARTITIONS)} == ends
    assert {k: v for k, v in before.items() if store.state_partition(k) != p} == \
        store.snapshots
    node.close()


# ---------------------------------------------------------------- merge, against a model

_batch = st.builds(
    lambda first, length, state, count: StateBatch(first, first + length, state, count),
    st.integers(0, 40), st.integers(0, 6), st.sampled_from([A, ACK, ARC]),
    st.integers(0, 3))


def _cells(batches: list[StateBatch] | tuple[StateBatch, ...]) -> dict[int, tuple[int, int]]:
    out = {}
    for b in batches:
        for o in range(b.first_offset, b.last_offset + 1):
            out[o] = (int(b.state), b.delivery_count)
    return out


def _disjoint(batches: list[StateBatch]) -> list[StateBatch]:
    out: list[StateBatch] = []
    for b in sorted(batches, key=lambda b: b.first_offset):
        if not out or out[-1].last_offset < b.first_offset:
            out.append(b)
    return out


@settings(max_examples=120, deadline=None)
@given(st.lists(_batch, max_size=8), st.lists(_batch, max_size=8), st.integers(0, 45))
def test_merge_matches_a_per_offset_model(stored: list[StateBatch], new: list[StateBatch],
                                          start: int) -> None:
    stored, new = _disjoint(stored), _disjoint(new)
    model = {o: v for o, v in {**_cells(stored), **_cells(new)}.items() if o >= start}
    got = merge_batches(stored, new, start)
    assert _cells(got) == model
    # ordered, disjoint, and touching runs of one state and count are joined
    for a, b in itertools.pairwise(got):
        assert a.last_offset < b.first_offset
        assert not (a.last_offset + 1 == b.first_offset and a.state == b.state
                    and a.delivery_count == b.delivery_count)


# ---------------------------------------------------------------- the share key


def test_share_key_parses_kafka_form() -> None:
    tid = uuid.UUID("7d4af586-1103-4a6f-96b7-cfd95b946d87")
    key = ShareKey("a:b", tid, 12)
    assert parse_share_key(key.coordinator_key()) == key  # colons in the group id
    assert parse_share_key(f"g:{tid}:3") == ShareKey("g", tid, 3)  # canonical form too
    for bad in ("", "g", "g:x:1", f"g:{tid}", f":{tid}:1", f"g:{tid}:-1", f"g:{tid}:+1",
                f"g:{tid}:1x"):
        assert parse_share_key(bad) is None, bad


@given(st.text(max_size=80))
def test_share_key_parser_never_raises(text: str) -> None:
    got = parse_share_key(text)
    if got is not None:
        assert got.partition >= 0 and got.group_id
        assert parse_share_key(got.coordinator_key()) == got


@given(st.text(min_size=1, max_size=30), st.uuids(), st.integers(0, 2**31 - 1))
def test_share_key_round_trip(group: str, tid: uuid.UUID, partition: int) -> None:
    key = ShareKey(group, tid, partition)
    assert parse_share_key(key.coordinator_key()) == key
