"""The quorum's roles, one class each, and the one table that says which transitions are legal.

As in Kafka's QuorumState: the node is always in exactly one `EpochState`. Every role change
goes through `QuorumState.transition_to`, which checks it against `TRANSITIONS` and the epoch
rules below, and writes the persistent part (epoch, vote, leader) through the store *before*
the new role takes effect, so nothing is ever said to a peer on the strength of a state that a
crash could forget.

Epoch rules (beyond the role table):
- the epoch never goes down;
- within one epoch a cast vote never changes and a known leader never changes (a second vote or
  a second leader in one epoch is exactly what Raft's election safety forbids);
- Candidate starts a new epoch and votes for itself; Leader comes only from Candidate of the
  same epoch; Resigned only from Leader of the same epoch; Unattached only with a new epoch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from odradek.metadata.raft.store import ElectionState, QuorumStateStore


class Role(enum.Enum):
    UNATTACHED = "unattached"
    VOTED = "voted"  # Kafka's "unattached, voted": has cast its vote in this epoch
    PROSPECTIVE = "prospective"  # KIP-996: running a pre-vote, epoch not bumped yet
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


R = Role
TRANSITIONS: dict[Role, frozenset[Role]] = {
    R.UNATTACHED: frozenset({R.UNATTACHED, R.VOTED, R.PROSPECTIVE, R.FOLLOWER}),
    R.VOTED: frozenset({R.UNATTACHED, R.FOLLOWER, R.PROSPECTIVE}),
    R.PROSPECTIVE: frozenset({R.UNATTACHED, R.VOTED, R.FOLLOWER, R.CANDIDATE, R.PROSPECTIVE}),
    R.CANDIDATE: frozenset({R.UNATTACHED, R.FOLLOWER, R.LEADER, R.PROSPECTIVE}),
    R.LEADER: frozenset({R.UNATTACHED, R.FOLLOWER, R.RESIGNED}),
    R.FOLLOWER: frozenset({R.UNATTACHED, R.FOLLOWER, R.PROSPECTIVE}),
    R.RESIGNED: frozenset({R.UNATTACHED, R.FOLLOWER, R.PROSPECTIVE}),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(slots=True)
class EpochState:
    role: ClassVar[Role]
    epoch: int
    voted_for: int | None = None
    leader_id: int | None = None

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.voted_for, self.leader_id)


@dataclass(slots=True)
class Unattached(EpochState):
    role: ClassVar[Role] = R.UNATTACHED
    election_deadline: int = 0


@dataclass(slots=True)
class Voted(EpochState):
    role: ClassVar[Role] = R.VOTED
    election_deadline: int = 0


@dataclass(slots=True)
class _Election(EpochState):
    """What a pre-vote round and a vote round share: who was asked, who said yes or no."""

    election_deadline: int = 0
    round_ids: set[int] = field(default_factory=set)  # correlation ids of this round's requests
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


@dataclass(slots=True)
class Prospective(_Election):
    role: ClassVar[Role] = R.PROSPECTIVE


@dataclass(slots=True)
class Candidate(_Election):
    role: ClassVar[Role] = R.CANDIDATE


@dataclass(slots=True)
class ReplicaProgress:
    end_offset: int = 0  # the offset the replica last fetched from: all before it matches ours
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None  # its last fetch from our log end (DescribeQuorum)
    hw_told: int = -1  # the high watermark our last answer to it carried


@dataclass(slots=True)
class Leader(EpochState):
    role: ClassVar[Role] = R.LEADER
    epoch_start_offset: int = 0
    replicas: dict[int, ReplicaProgress] = field(default_factory=dict)
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)  # fetching non-voters
    # long polls: fetches with nothing to send, answered when there is (or at their deadline)
    parked: dict[int, tuple[object, object, int]] = field(default_factory=dict)
    check_quorum_deadline: int = 0
    begin_resend_at: int = 0


@dataclass(slots=True)
class Follower(EpochState):
    role: ClassVar[Role] = R.FOLLOWER
    fetch_deadline: int = 0  # no good answer from the leader by then: stand for election
    next_fetch_at: int = 0
    inflight: int | None = None  # correlation id of the fetch in flight
    inflight_sent_ms: int = 0
    # KIP-996: only a follower that has fetched from its leader in this role refuses pre-votes;
    # one that merely heard the leader named may be following a dead leader
    fetched_ok: bool = False
    snapshot: object | None = None  # (SnapshotId, position) while downloading one (KIP-630)


@dataclass(slots=True)
class Resigned(EpochState):
    role: ClassVar[Role] = R.RESIGNED
    election_deadline: int = 0
    unacked: set[int] = field(default_factory=set)  # voters yet to answer EndQuorumEpoch
    resend_at: int = 0
    preferred: tuple[int, ...] = ()


def check_transition(old: EpochState, new: EpochState, local_id: int) -> None:
    """Raise IllegalTransition unless old -> new is allowed by the table and the epoch rules."""

    def bad(why: str) -> IllegalTransition:
        return IllegalTransition(
            f"{old.role.value}@{old.epoch} -> {new.role.value}@{new.epoch}: {why}"
        )

    if new.role not in TRANSITIONS[old.role]:
        raise bad("not in the transition table")
    if new.epoch < old.epoch:
        raise bad("epoch goes back")
    if new.role is R.CANDIDATE and (new.epoch <= old.epoch or new.voted_for != local_id):
        raise bad("a candidate starts a new epoch voting for itself")
    if new.role is R.LEADER and (old.role is not R.CANDIDATE or new.epoch != old.epoch):
        raise bad("only the candidate of this epoch becomes its leader")
    if new.role is R.LEADER and new.leader_id != local_id:
        raise bad("a leader leads itself")
    if new.role is R.RESIGNED and (old.role is not R.LEADER or new.epoch != old.epoch):
        raise bad("only the leader of this epoch resigns it")
    if new.role is R.UNATTACHED and new.epoch == old.epoch:
        raise bad("unattached only with a new epoch")
    if new.role is R.FOLLOWER and new.leader_id in (None, local_id):
        raise bad("a follower follows another voter")
    if new.epoch == old.epoch:
        if old.voted_for is not None and new.voted_for != old.voted_for:
            raise bad(f"vote changes within the epoch ({old.voted_for} -> {new.voted_for})")
        if old.leader_id is not None and new.leader_id != old.leader_id:
            raise bad(f"leader changes within the epoch ({old.leader_id} -> {new.leader_id})")


class QuorumState:
    """The current role, persisted through the store before each transition takes effect."""

    def __init__(self, local_id: int, voters: frozenset[int], store: QuorumStateStore) -> None:
        self.local_id = local_id
        self.voters = voters
        self.store = store
        self.transitions = 0
        self.state: EpochState = self._restore(store.read())

    def _restore(self, saved: ElectionState) -> EpochState:
        # After a restart the volatile part of a role is gone. A leader that restarts cannot
        # take up its epoch again (its followers' progress is unknown): it comes back Resigned,
        # as in Kafka. Anything else resumes the promises it persisted.
        if saved.leader_id == self.local_id:
            return Resigned(saved.epoch, saved.voted_for, saved.leader_id)
        if saved.leader_id is not None:
            return Follower(saved.epoch, saved.voted_for, saved.leader_id)
        if saved.voted_for is not None:
            return Voted(saved.epoch, saved.voted_for)
        return Unattached(saved.epoch)

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def role(self) -> Role:
        return self.state.role

    def is_voter(self) -> bool:
        return self.local_id in self.voters

    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def transition_to(self, new: EpochState) -> EpochState:
        check_transition(self.state, new, self.local_id)
        if new.election() != self.state.election():
            self.store.write(new.election())
        self.state = new
        self.transitions += 1
        return new
