"""The transition table, the epoch rules, and the persistent election state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.metadata.raft.state import (
    Candidate,
    Follower,
    IllegalTransition,
    Leader,
    Prospective,
    QuorumState,
    Resigned,
    Role,
    Unattached,
    Voted,
    check_transition,
)
from odradek.metadata.raft.store import (
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
)

ME = 1


def test_legal_path_through_an_election() -> None:
    check_transition(Unattached(0), Prospective(0), ME)
    check_transition(Prospective(0), Candidate(1, ME), ME)
    check_transition(Candidate(1, ME), Leader(1, ME, ME), ME)
    check_transition(Leader(1, ME, ME), Resigned(1, ME, ME), ME)
    check_transition(Resigned(1, ME, ME), Follower(2, None, 2), ME)


@pytest.mark.parametrize(
    "old,new,why",
    [
        (Prospective(3, 2), Voted(3, 3), "vote changes"),
        (Follower(3, None, 2), Follower(3, None, 3), "leader changes"),
        (Unattached(3), Leader(3, ME, ME), "transition table"),
        (Prospective(3), Leader(3, ME, ME), "transition table"),
        (Candidate(3, ME), Candidate(3, ME), "transition table"),
        (Prospective(3), Candidate(3, ME), "new epoch"),
        (Follower(3, None, 2), Unattached(2), "epoch goes back"),
        (Follower(3, None, 2), Unattached(3), "new epoch"),
        (Voted(3, 2), Follower(3, None, ME), "another voter"),
        (Follower(3, None, 2), Resigned(3, None, ME), "transition table"),
    ],
)
def test_illegal_transitions_are_refused(old, new, why) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IllegalTransition, match=why):
        check_transition(old, new, ME)


def test_state_is_written_before_it_takes_effect() -> None:
    store = MemoryQuorumStateStore()
    q = QuorumState(ME, frozenset({1, 2, 3}), store)
    q.transition_to(Unattached(4))
    q.transition_to(Voted(4, 2))
    assert store.read() == ElectionState(4, 2, None)
    with pytest.raises(IllegalTransition):
        q.transition_to(Voted(4, 3))
    assert store.read() == ElectionState(4, 2, None)  # a refused transition writes nothing
    assert q.role is Role.VOTED


@pytest.mark.parametrize(
    "saved,role",
    [
        (ElectionState(5, ME, ME), Role.RESIGNED),  # a leader cannot resume its epoch
        (ElectionState(5, None, 2), Role.FOLLOWER),
        (ElectionState(5, 3, None), Role.VOTED),
        (ElectionState(5, None, None), Role.UNATTACHED),
    ],
)
def test_restart_resumes_what_was_promised(saved: ElectionState, role: Role) -> None:
    store = MemoryQuorumStateStore()
    store.write(saved)
    q = QuorumState(ME, frozenset({1, 2, 3}), store)
    assert (q.role, q.state.election()) == (role, saved)


def test_file_store_round_trip(tmp_path: Path) -> None:
    store = FileQuorumStateStore(tmp_path)
    assert store.read() == ElectionState()
    store.write(ElectionState(7, 2, 3))
    assert FileQuorumStateStore(tmp_path).read() == ElectionState(7, 2, 3)
    data = json.loads((tmp_path / "quorum-state").read_text())
    assert data == {"data_version": 1, "leaderEpoch": 7, "votedId": 2, "leaderId": 3}
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_file_store_refuses_an_unknown_version(tmp_path: Path) -> None:
    (tmp_path / "quorum-state").write_text('{"data_version": 9, "leaderEpoch": 1}')
    with pytest.raises(ValueError, match="data_version"):
        FileQuorumStateStore(tmp_path).read()
