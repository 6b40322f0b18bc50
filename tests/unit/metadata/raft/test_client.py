"""RaftClient driven by hand, message by message, through the cases the simulation finds by
chance: an election, a vote that must survive a restart, a divergent tail, Raft's commit rule,
check-quorum, and pre-vote keeping a cut-off voter from disrupting the quorum."""

from __future__ import annotations

import random
from collections.abc import Callable

from odradek.metadata.raft import messages as m
from odradek.metadata.raft.client import RaftClient, RaftConfig
from odradek.metadata.raft.log import Entry, MemoryRaftLog
from odradek.metadata.raft.state import Role
from odradek.metadata.raft.store import ElectionState, MemoryQuorumStateStore

from .checker import InvariantChecker, InvariantViolation, NodeView, ObservedLog

VOTERS = frozenset({1, 2, 3})
# message by message: the leader answers every fetch at once (long polls have their own test)
NO_LONG_POLL = RaftConfig(fetch_max_wait_ms=0)


class Bus:
    def __init__(self) -> None:
        self.clients: dict[int, RaftClient] = {}
        self.logs: dict[int, MemoryRaftLog] = {}
        self.stores: dict[int, MemoryQuorumStateStore] = {}
        self.pending: list[m.Message] = []
        self.held: list[m.Message] = []  # what deliver() was told not to deliver yet

    def add(
        self,
        node: int,
        now: int,
        log: MemoryRaftLog | None = None,
        saved: ElectionState | None = None,
        durable: bool = True,
    ) -> RaftClient:
        self.logs[node] = log if log is not None else self.logs.get(node, ObservedLog())
        if node not in self.stores or saved is not None:
            self.stores[node] = MemoryQuorumStateStore(durable)
            if saved is not None:
                self.stores[node].write(saved)
        c = RaftClient(node, VOTERS, self.logs[node], self.stores[node], random.Random(node), now,
                       NO_LONG_POLL)
        self.clients[node] = c
        return c

    def poll(self, node: int, now: int) -> None:
        out, _ = self.clients[node].poll(now)
        self.pending += out

    def deliver(self, now: int, keep: Callable[[m.Message], bool] = lambda _: True) -> None:
        for _ in range(10_000):
            if not self.pending:
                return
            msg = self.pending.pop(0)
            if not keep(msg):
                self.held.append(msg)
            elif msg.dst in self.clients:
                self.clients[msg.dst].handle(msg, now)
                self.poll(msg.dst, now)

    def take(self, pred: Callable[[m.Message], bool]) -> list[m.Message]:
        got = [x for x in self.pending if pred(x)]
        self.pending = [x for x in self.pending if not pred(x)]
        return got


def entries(*epochs: int, tag: str = "") -> ObservedLog:
    log = ObservedLog()
    log.append_as_follower([Entry(i, e, f"{tag}{e}:{i}".encode()) for i, e in enumerate(epochs)])
    log.flush()
    return log


def test_a_single_voter_elects_itself_and_commits_at_once() -> None:
    log = MemoryRaftLog()
    c = RaftClient(1, {1}, log, MemoryQuorumStateStore(), random.Random(0), 0)
    # no election timeout to wait for: the only voter stands as it starts, as in Kafka
    assert (c.role, c.epoch) == (Role.LEADER, 1)
    assert log.entries[0].control and c.high_watermark == 1
    assert c.propose([b"a", b"b"], 0) == 2 and c.high_watermark == 3


def test_three_voters_elect_one_leader_and_replicate() -> None:
    bus = Bus()
    for n in VOTERS:
        bus.add(n, 0 if n == 2 else 5000)
    bus.poll(2, 2000)  # node 2's election timer has run out; the others' have not
    assert bus.clients[2].role is Role.PROSPECTIVE
    bus.deliver(2000)
    assert [bus.clients[n].role for n in (1, 2, 3)] == [Role.FOLLOWER, Role.LEADER, Role.FOLLOWER]
    assert bus.clients[2].epoch == 1 and bus.clients[1].leader_id == 2
    bus.clients[2].propose([b"x"], 2000)
    for t in (2100, 2200):
        for n in VOTERS:
            bus.poll(n, t)
        bus.deliver(t)
    assert all(bus.clients[n].high_watermark == 2 for n in VOTERS)
    assert bus.logs[1].entries == bus.logs[2].entries == bus.logs[3].entries


def _two_candidates_and_a_vote_for_the_first(durable: bool) -> Bus:
    """Nodes 1 and 2 both win the pre-vote and stand in epoch 1; node 3 votes for 1."""
    bus = Bus()
    bus.add(1, 0)
    bus.add(2, 0)
    bus.add(3, 5000, durable=durable)
    bus.poll(1, 2000)
    bus.poll(2, 2000)

    def pre_vote_via_3(x: m.Message) -> bool:
        return 3 in (x.src, x.dst) and getattr(x.body, "pre_vote", False)

    # only node 3 answers pre-votes, and it grants both (neither candidate knows of the other)
    bus.deliver(2000, keep=pre_vote_via_3)
    assert bus.clients[1].role is bus.clients[2].role is Role.CANDIDATE
    votes = [x for x in bus.held if isinstance(x.body, m.VoteRequest) and not x.body.pre_vote]
    bus.held.clear()
    bus.pending = [x for x in votes if (x.src, x.dst) == (1, 3)]
    # node 3 votes for node 1, which wins (its BeginQuorumEpoch is held back)
    bus.deliver(2000, keep=lambda x: 3 in (x.src, x.dst) and "Vote" in type(x.body).__name__)
    assert bus.clients[1].role is Role.LEADER and bus.stores[3].read().voted_for == 1
    bus.held.clear()
    bus.pending = [x for x in votes if (x.src, x.dst) == (2, 3)]
    return bus


def test_a_vote_survives_a_restart() -> None:
    bus = _two_candidates_and_a_vote_for_the_first(durable=True)
    bus.stores[3].crash()
    bus.add(3, 2100)  # restart: the vote for node 1 in epoch 1 is read back
    assert (bus.clients[3].role, bus.clients[3].state.voted_for) == (Role.VOTED, 1)
    bus.deliver(2100, keep=lambda x: x.dst == 3 or x.src == 3)
    assert bus.clients[2].role is Role.CANDIDATE


def test_a_forgotten_vote_elects_two_leaders_and_the_checker_says_so() -> None:
    bus = _two_candidates_and_a_vote_for_the_first(durable=False)
    checker = InvariantChecker()

    def check() -> None:
        checker.check(
            [
                NodeView(n, c.role, c.epoch, c.high_watermark, bus.logs[n])  # type: ignore[arg-type]
                for n, c in bus.clients.items()
            ]
        )

    check()
    bus.stores[3].crash()  # this store forgets: node 3 comes back in epoch 0
    bus.add(3, 2100)
    bus.deliver(2100, keep=lambda x: x.dst == 3 or x.src == 3)
    assert bus.clients[2].role is Role.LEADER and bus.clients[1].role is Role.LEADER
    try:
        check()
    except InvariantViolation as e:
        assert e.kind == "election-safety"
    else:
        raise AssertionError("the checker missed two leaders in epoch 1")


def test_a_divergent_tail_is_truncated_and_the_old_epoch_commits_only_with_the_new() -> None:
    bus = Bus()
    # node 1 led epoch 2 and wrote 3 entries nobody else has; node 2 led epoch 3 after it
    bus.add(1, 5000, log=entries(1, 1, 2, 2, 2, tag="a"), saved=ElectionState(3))
    bus.add(2, 0, log=entries(1, 1, 3, 3, tag="a"), saved=ElectionState(3))
    bus.add(3, 5000, log=entries(1, 1, 3, 3, tag="a"), saved=ElectionState(3))
    bus.poll(2, 2000)
    bus.deliver(2000, keep=lambda x: not isinstance(x.body, m.FetchRequest))
    fetches = {x.src: x for x in bus.held}
    leader = bus.clients[2]
    assert (leader.role, leader.epoch) == (Role.LEADER, 4)
    assert bus.logs[2].end_offset() == 5  # the LeaderChange record opens epoch 4
    # node 3 has fetched up to the end of epoch 3, not yet the LeaderChange record: a majority
    # holds offsets 0..3, but they are not of this epoch, so they do not commit yet
    leader.handle(m.Message(3, 2, 99, m.FetchRequest(4, 3, 4, 3)), 2000)
    assert leader.high_watermark == 0
    leader.handle(m.Message(3, 2, 100, m.FetchRequest(4, 3, 5, 4)), 2000)
    assert leader.high_watermark == 5
    # node 1 fetches from offset 5 with last epoch 2; the leader never had epoch 2
    assert fetches[1].body == m.FetchRequest(4, 1, 5, 2)
    bus.pending = [fetches[1]]
    bus.deliver(2000)
    assert [e.epoch for e in bus.logs[1].entries] == [1, 1, 3, 3, 4]
    assert bus.logs[1].entries == bus.logs[2].entries
    assert bus.clients[1].high_watermark == 5


def test_a_leader_that_hears_from_no_majority_resigns() -> None:
    bus = Bus()
    for n in VOTERS:
        bus.add(n, 0 if n == 2 else 5000)
    bus.poll(2, 2000)
    bus.deliver(2000, keep=lambda x: not isinstance(x.body, m.FetchRequest))
    leader = bus.clients[2]
    assert leader.role is Role.LEADER
    bus.pending.clear()
    leader.poll(2000 + 2999)
    assert leader.role is Role.LEADER
    out, _ = leader.poll(2000 + 3000)  # 1.5 x controller.quorum.fetch.timeout.ms
    assert leader.role is Role.RESIGNED
    assert {x.dst for x in out if isinstance(x.body, m.EndQuorumEpochRequest)} == {1, 3}


def test_pre_vote_keeps_a_cut_off_voter_from_disrupting_the_quorum() -> None:
    bus = Bus()
    for n in VOTERS:
        bus.add(n, 0 if n == 2 else 5000)
    bus.poll(2, 2000)
    bus.deliver(2000)
    assert bus.clients[2].role is Role.LEADER and bus.clients[1].role is Role.FOLLOWER
    # node 1 stops hearing from the leader (its fetches are lost) and stands after the fetch
    # timeout; node 3 still fetches, so it refuses the pre-vote and the epoch stays 1
    pre_votes_from_1 = 0
    for t in range(2100, 4200, 100):
        for n in VOTERS:
            bus.poll(n, t)
        pre_votes_from_1 += sum(
            1 for x in bus.pending if x.src == 1 and getattr(x.body, "pre_vote", False)
        )
        bus.deliver(t, keep=lambda x: x.src != 1 or not isinstance(x.body, m.FetchRequest))
    assert pre_votes_from_1 == 2  # it did stand (Prospective), once, to both other voters
    assert bus.clients[2].role is Role.LEADER and bus.clients[2].epoch == 1
    assert bus.clients[3].epoch == 1
    assert bus.clients[1].epoch == 1


def test_two_voters_cut_off_from_a_live_leader_elect_one_of_them() -> None:
    """The isolated leader is alive (it does not crash, it just cannot be reached): voters
    that grant each other's pre-vote while still naming it must not hand each other back to
    it, or the two would never elect (found by the loopback cluster test)."""
    bus = Bus()
    for n in VOTERS:
        bus.add(n, 0 if n == 1 else 5000)
    bus.poll(1, 2000)
    bus.deliver(2000)
    assert bus.clients[1].role is Role.LEADER
    # both followers fetch (they have heard the leader), node 3 last 700 ms after node 2,
    # so their fetch timeouts run out apart, as they do on real machines
    for n, t in ((1, 2000), (2, 2100), (1, 2100), (3, 2800), (1, 2800)):
        bus.poll(n, t)
        bus.deliver(t)
    assert bus.clients[2].state.fetched_ok and bus.clients[3].state.fetched_ok  # type: ignore[attr-defined]
    for t in range(2900, 30_000, 50):  # from now on node 1 is cut off
        for n in (2, 3):
            bus.poll(n, t)
        bus.deliver(t, keep=lambda x: 1 not in (x.src, x.dst))
        bus.held.clear()
        if Role.LEADER in (bus.clients[2].role, bus.clients[3].role):
            break
    roles = {bus.clients[2].role, bus.clients[3].role}
    assert roles == {Role.LEADER, Role.FOLLOWER}, roles


def test_a_voter_ahead_of_one_that_lost_the_leader_stands_at_once() -> None:
    """The leader dies. Node 2 (the longer log) times out first; node 3 still heard the
    leader, refuses and sends it back to the dead leader. When node 3 times out in turn, node 2
    refuses its pre-vote (node 3 is behind) and, having heard nothing from the leader since,
    stands at once: the quorum has a leader after the second fetch timeout, not a third."""
    bus = Bus()
    for n in VOTERS:
        bus.add(n, 0 if n == 1 else 5000)
    bus.poll(1, 2000)
    bus.deliver(2000)
    assert bus.clients[1].role is Role.LEADER
    bus.poll(3, 2100)  # node 3's next fetch is answered now, but the answer arrives at 2300
    bus.deliver(2100, keep=lambda x: x.dst != 3)
    late_to_3, bus.held = bus.held, []
    assert [type(x.body) for x in late_to_3] == [m.FetchResponse]
    bus.clients[1].propose([b"x"], 2100)
    bus.poll(2, 2100)
    bus.deliver(2100)  # node 2 fetches x
    assert bus.logs[2].end_offset() > bus.logs[3].end_offset()
    bus.pending = late_to_3
    bus.deliver(2300)
    assert bus.clients[3].state.fetched_ok  # type: ignore[attr-defined]

    def no_leader(x: m.Message) -> bool:  # node 1 is dead from now on
        return 1 not in (x.src, x.dst)

    for t in (4100, 4300):  # node 2's fetch timeout, then node 3's
        for n in (2, 3):
            bus.poll(n, t)
        bus.deliver(t, keep=no_leader)
        bus.held.clear()
    assert bus.clients[2].role is Role.LEADER and bus.clients[3].role is Role.FOLLOWER
    assert bus.clients[3].leader_id == 2


def test_two_voters_that_lose_the_leader_together_do_not_split_the_vote() -> None:
    """Same log, same moment: both stand as Prospective and each hears the other's pre-vote.
    Only the lower id goes on to stand, so the next epoch has a leader at once instead of two
    candidates splitting it and waiting an election timeout."""
    bus = Bus()
    for n in VOTERS:
        bus.add(n, 0 if n == 1 else 5000)
    bus.poll(1, 2000)
    bus.deliver(2000)
    assert bus.clients[1].role is Role.LEADER and bus.clients[1].epoch == 1
    assert bus.logs[2].end_offset() == bus.logs[3].end_offset()
    for n in (2, 3):  # node 1 dies; both fetch timeouts run out together
        bus.poll(n, 4500)
    assert bus.clients[2].role is bus.clients[3].role is Role.PROSPECTIVE
    bus.deliver(4500, keep=lambda x: 1 not in (x.src, x.dst))
    assert bus.clients[2].role is Role.LEADER and bus.clients[2].epoch == 2
    assert bus.clients[3].role is Role.FOLLOWER and bus.clients[3].leader_id == 2


def test_a_fetch_that_moves_the_high_watermark_is_answered_at_once() -> None:
    """Long polls on: the follower whose fetch commits a record learns the new high
    watermark from that fetch's answer, not when the long poll ends (what a broker's
    metadata waited for after every controller write)."""
    long_poll = RaftConfig(fetch_max_wait_ms=500)
    leader = RaftClient(1, {1, 2}, MemoryRaftLog(), MemoryQuorumStateStore(), random.Random(1),
                        0, long_poll)
    follower = RaftClient(2, {1, 2}, MemoryRaftLog(), MemoryQuorumStateStore(),
                          random.Random(2), 5000, long_poll)
    pending: list[m.Message] = []

    def run(now: int) -> None:  # deliver until nothing moves (held fetches stay held)
        while True:
            out = []
            for c in (leader, follower):
                out += c.poll(now)[0]
            out += pending
            pending.clear()
            if not out:
                return
            for msg in out:
                (leader if msg.dst == 1 else follower).handle(msg, now)

    run(2000)  # node 1 stands at its election timeout and wins with node 2's vote
    assert leader.role is Role.LEADER and follower.leader_id == 1
    run(2000)
    assert follower.high_watermark == leader.high_watermark == leader.log.end_offset()
    leader.propose([b"x"], 2100)
    run(2100)  # no time passes: every answer that comes is at once
    assert leader.high_watermark == leader.log.end_offset()
    assert follower.high_watermark == leader.high_watermark
    assert len(leader.state.parked) == 1  # type: ignore[attr-defined]  # and then it waits
