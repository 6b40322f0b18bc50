"""Transactional offset commits in `__consumer_offsets` over real logs: held per producer id,
applied at the COMMIT marker, dropped at ABORT, at runtime and at replay alike, and a plain
commit written after a transactional one wins over it (Kafka's olderThan rule)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.coordinator import GroupConfig, GroupCoordinator, OffsetCommitEntry
from odradek.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from odradek.coordinator.transaction.producer_ids import ProducerIdManager
from odradek.coordinator.transaction.state_log import TOPIC as TXN_TOPIC
from odradek.metadata.controller_requests import CreatableTopic
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import OFFSETS_PARTITIONS, Node

E = ErrorCode
GROUPS = ["g-a", "g-b", "g-c"]
PARTS = 3


def encode(group: str, topic: str, p: int, offset: int, lep: int, meta: str,
           now: int) -> tuple[bytes, bytes]:
    key = ot.encode_key(ot.RecordKey(ot.OFFSET_COMMIT_KEY, group, topic, p))
    return key, ot.encode_value(ot.OFFSET_COMMIT_KEY, {
        "offset": offset, "leader_epoch": lep, "metadata": meta, "commit_timestamp": now})


def setup(tmp_path: Path) -> tuple[Node, TransactionCoordinator]:
    node = Node(tmp_path, {"data": PARTS})
    node.controller.create_topics([CreatableTopic(TXN_TOPIC, 1, 1)], False)
    asyncio.run(node.rm.sync(node.controller.image))
    return node, txn_coordinator(node, node.coordinator)


def txn_coordinator(node: Node, groups: GroupCoordinator) -> TransactionCoordinator:
    ids = ProducerIdManager(lambda: node.controller.allocate_producer_ids(1, -1, 1000))
    tc = TransactionCoordinator(node.rm, TxnConfig(num_partitions=1), ids, groups)
    tc.load()
    tc.recover()
    return tc


def replayed(node: Node) -> GroupCoordinator:
    """A second group coordinator replaying the same `__consumer_offsets` logs."""
    gc = GroupCoordinator(node.rm, GroupConfig(num_partitions=OFFSETS_PARTITIONS), node.lookup,
                          node.name_of, lambda: list(node.controller.image.topics_by_name))
    gc.load()
    return gc


def visible(gc: GroupCoordinator) -> dict[tuple[str, str, int], int]:
    return {(g, t, p): c.offset for g in GROUPS for (t, p), c in gc.offsets.get(g).items()}


def test_random_histories_replay_as_they_ran(tmp_path: Path) -> None:
    """Random interleavings of transactional commits (committed, aborted, left open) and plain
    commits; the expected offsets are computed by a model of Kafka's rules, independently of
    the coordinator, and must be what the runtime shows and what a replay rebuilds."""
    node, tc = setup(tmp_path)
    rng = random.Random(6)
    expected: dict[tuple[str, str, int], int] = {}
    # model: per transactional id, its pending offsets with their write order
    open_txns: dict[str, tuple[int, int, dict[tuple[str, str, int], tuple[int, int]]]] = {}
    plain_seq: dict[tuple[str, str, int], int] = {}  # key -> write order of the last plain commit
    tids = [f"tx-{i}" for i in range(4)]
    for tid in tids:
        r = tc.init_producer_id(tid, 60000)
        assert r.error == E.none
        open_txns[tid] = (r.producer_id, r.producer_epoch, {})
    for seq in range(1, 121):
        tid = rng.choice(tids)
        pid, epoch, pending = open_txns[tid]
        group = rng.choice(GROUPS)
        key = (group, "data", rng.randrange(PARTS))
        offset = rng.randrange(10_000)
        action = rng.random()
        if action < 0.45:
            assert tc.add_offsets(tid, pid, epoch, group, ot.TOPIC, OFFSETS_PARTITIONS) == E.none
            assert tc.txn_offset_commit(tid, pid, epoch, group, {key[1:]: (offset, -1, "")},
                                        ot.TOPIC, OFFSETS_PARTITIONS, encode) == E.none
            pending[key] = (offset, seq)
        elif action < 0.7:
            res = node.coordinator.commit_offsets(group, -1, "", None, [
                OffsetCommitEntry(key[1], key[2], offset)])
            assert set(res.values()) == {E.none}
            expected[key] = offset
            plain_seq[key] = seq
        elif pending:
            commit = action < 0.9
            assert tc.end_txn(tid, pid, epoch, commit) == E.none
            if commit:
                for k, (off, wrote) in pending.items():
                    if wrote > plain_seq.get(k, -1):
                        expected[k] = off
                        plain_seq[k] = wrote
            open_txns[tid] = (pid, epoch, {})
    assert visible(node.coordinator) == expected

    # a restart: the replay alone (no help from the transaction coordinator) agrees
    gc = replayed(node)
    assert visible(gc) == expected
    still_open = {pid: {k: off for k, (off, _) in pending.items()}
                  for pid, _, pending in open_txns.values() if pending}
    assert {pid: {k: p.value["offset"] for k, p in entries.items()}
            for pid, entries in gc.store.txn.pending.items()} == still_open

    # the transactions left open complete after the restart: commit half, abort the rest
    tc2 = txn_coordinator(node, gc)
    for i, tid in enumerate(tids):
        pid, epoch, pending = open_txns[tid]
        if not pending:
            continue
        commit = i % 2 == 0
        assert tc2.end_txn(tid, pid, epoch, commit) == E.none
        if commit:
            for k, (off, wrote) in pending.items():
                if wrote > plain_seq.get(k, -1):
                    expected[k] = off
                    plain_seq[k] = wrote
    assert visible(gc) == expected
    assert not gc.store.txn.pending
    assert visible(replayed(node)) == expected
    node.close()


def test_plain_commit_after_a_transactional_one_wins(tmp_path: Path) -> None:
    node, tc = setup(tmp_path)
    r = tc.init_producer_id("tw", 60000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert tc.add_offsets("tw", pid, epoch, "g-a", ot.TOPIC, OFFSETS_PARTITIONS) == E.none
    assert tc.txn_offset_commit("tw", pid, epoch, "g-a", {("data", 0): (20, -1, "")}, ot.TOPIC,
                                OFFSETS_PARTITIONS, encode) == E.none
    node.coordinator.commit_offsets("g-a", -1, "", None, [OffsetCommitEntry("data", 0, 15)])
    assert tc.end_txn("tw", pid, epoch, True) == E.none
    assert visible(node.coordinator) == {("g-a", "data", 0): 15}
    assert visible(replayed(node)) == {("g-a", "data", 0): 15}
    node.close()
