"""The Raft invariants checker on metadata logs written by the node's own raft log code."""

from __future__ import annotations

import shutil
from pathlib import Path

from odradek.metadata.quorum import COMMIT_MARKER, METADATA_LOG_DIR, CommitMarker
from odradek.metadata.raft.control import encode_leader_change
from odradek.metadata.raft.file_log import FileRaftLog
from odradek.metadata.raft.store import ElectionState, FileQuorumStateStore
from tests.system.jepsen.checker import check_raft


def node(
    root: Path, n: int, epochs: list[tuple[int, int, int]], committed: int, state: tuple[int, int]
) -> Path:
    """A node dir whose log has, per (epoch, leader, records), a LeaderChange and records."""
    d = root / f"node{n}"
    log = FileRaftLog.open(d / METADATA_LOG_DIR)
    for epoch, leader, records in epochs:
        log.append_as_leader(epoch, [encode_leader_change(leader, [1, 2, 3], [1, 2])], control=True)
        for i in range(records):
            log.append_as_leader(epoch, [f"e{epoch}-r{i}".encode()])
    log.flush()
    log.close()
    FileQuorumStateStore(d / METADATA_LOG_DIR).write(ElectionState(state[0], None, state[1]))
    marker = CommitMarker(d / METADATA_LOG_DIR / COMMIT_MARKER)
    marker.write(committed, state[0])
    marker.close()
    return d


def follower(
    root: Path, leader_dir: Path, n: int, keep: int, committed: int, state: tuple[int, int]
) -> Path:
    """A copy of `leader_dir` (followers hold the leader's bytes) cut to `keep` offsets."""
    d = root / f"node{n}"
    shutil.copytree(leader_dir, d)
    log = FileRaftLog.open(d / METADATA_LOG_DIR)
    log.truncate_to(keep)
    log.flush()
    log.close()
    FileQuorumStateStore(d / METADATA_LOG_DIR).write(ElectionState(state[0], None, state[1]))
    (d / METADATA_LOG_DIR / COMMIT_MARKER).unlink()
    marker = CommitMarker(d / METADATA_LOG_DIR / COMMIT_MARKER)
    marker.write(committed, state[0])
    marker.close()
    return d


def test_agreeing_nodes_pass(tmp_path: Path) -> None:
    one = node(tmp_path, 1, [(1, 1, 3), (2, 2, 2)], 7, (2, 2))
    dirs = {1: one, **{n: follower(tmp_path, one, n, 7, 7, (2, 2)) for n in (2, 3)}}
    r = check_raft(dirs)
    assert r.valid, r.table()
    assert r.stats["raft-committed-end"] == 7 and r.stats["raft-epochs"] == 2


def test_lagging_minority_passes(tmp_path: Path) -> None:
    one = node(tmp_path, 1, [(1, 1, 3), (2, 2, 2)], 7, (2, 2))
    dirs = {
        1: one,
        2: follower(tmp_path, one, 2, 7, 7, (2, 2)),
        3: follower(tmp_path, one, 3, 2, 2, (1, 1)),
    }
    assert check_raft(dirs).valid


def test_two_leaders_in_one_epoch(tmp_path: Path) -> None:
    dirs = {
        1: node(tmp_path, 1, [(1, 1, 2)], 0, (1, 1)),
        2: node(tmp_path, 2, [(1, 2, 2)], 0, (1, 2)),
    }
    r = check_raft(dirs)
    assert "raft-two-leaders" in r.found()
    assert r.anomalies["raft-two-leaders"][0]["epoch"] == 1


def test_diverged_below_commit(tmp_path: Path) -> None:
    one = node(tmp_path, 1, [(1, 1, 2)], 3, (1, 1))
    # node 3 kept offset 0..1 but wrote its own epoch-2 batch at offset 2, below the commit
    three = follower(tmp_path, one, 3, 2, 3, (2, 3))
    log = FileRaftLog.open(three / METADATA_LOG_DIR)
    log.append_as_leader(2, [b"other"])
    log.flush()
    log.close()
    dirs = {1: one, 2: follower(tmp_path, one, 2, 3, 3, (1, 1)), 3: three}
    r = check_raft(dirs)
    assert "raft-log-diverged" in r.found(), r.table()


def test_a_deposed_leaders_uncommitted_tail_is_not_divergence(tmp_path: Path) -> None:
    """Seen at the end of crash runs: the epoch-2 leader appended at offset 2 and stopped
    (its commit marker at 2) before it heard of epoch 3, whose leader committed its own
    offset 2 with the third node."""
    base = node(tmp_path, 9, [(1, 1, 1)], 2, (1, 1))  # offsets 0-1, committed
    old = follower(tmp_path, base, 2, 2, 2, (2, 2))
    log = FileRaftLog.open(old / METADATA_LOG_DIR)
    log.append_as_leader(2, [b"never committed"])
    log.flush()
    log.close()
    new = follower(tmp_path, base, 3, 2, 3, (3, 3))
    log = FileRaftLog.open(new / METADATA_LOG_DIR)
    log.append_as_leader(3, [b"committed in epoch 3"])
    log.flush()
    log.close()
    dirs = {1: follower(tmp_path, new, 1, 3, 3, (3, 3)), 2: old, 3: new}
    r = check_raft(dirs)
    assert r.valid, r.table()


def test_committed_lost(tmp_path: Path) -> None:
    # node 1 committed 6 offsets, but only it holds the tail
    one = node(tmp_path, 1, [(1, 1, 5)], 6, (1, 1))
    dirs = {
        1: one,
        2: follower(tmp_path, one, 2, 2, 2, (1, 1)),
        3: follower(tmp_path, one, 3, 2, 2, (1, 1)),
    }
    r = check_raft(dirs)
    assert "raft-committed-lost" in r.found()
    assert r.anomalies["raft-committed-lost"][0]["held_by"] == [1]


def test_missing_log_line_is_named(tmp_path: Path) -> None:
    dirs = {1: node(tmp_path, 1, [(1, 1, 1)], 2, (1, 1))}
    assert "became leader of epoch" in check_raft(dirs).table()
    lines = {
        1: "raft: node 1 became leader of epoch 1\n",
        2: "raft: node 2 became leader of epoch 1\n",
    }
    assert "raft-two-leaders" in check_raft(dirs, lines).found()
