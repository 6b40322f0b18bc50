"""`RaftClient`: the KRaft quorum's sans-I/O state machine, as Kafka's KafkaRaftClient is shaped.

The driver (a transport in the node, a simulator in tests) calls `handle(message, now_ms)` for
each message that arrives and `poll(now_ms)` when time passes; `poll` returns the messages to
send and the time by which it wants to be polled again. Nothing here reads a clock, sleeps,
opens a socket or draws from a global random source: time comes in, the RNG is injected, the
log and the election state store are injected.

Elections use KIP-996's pre-vote: a voter that times out first becomes Prospective and asks for
pre-votes in epoch+1 without bumping its own epoch; only with a majority of pre-votes does it
become Candidate. A follower that still hears from its leader refuses pre-votes, so a voter
that was cut off cannot disrupt a healthy quorum when it comes back. The leader runs Kafka's
check-quorum: with no fetch from a majority for 1.5 x the fetch timeout, it resigns.

Two refinements of KIP-996 keep a dead leader's replacement to about one fetch timeout (they
change who stands and when, never what a vote means): of two Prospectives with the same log
only the lower id goes on to stand (two would split the next epoch's vote and wait a whole
election timeout more), and a voter that refuses a pre-vote for a shorter log while it has
not heard from its leader since it came back to it stands itself at once.
"""

from __future__ import annotations

import random
from typing import cast

from odradek.metadata.raft import messages as m
from odradek.metadata.raft.client_snapshots import SnapshotFetching
from odradek.metadata.raft.config import RaftConfig
from odradek.metadata.raft.control import leader_change_payload
from odradek.metadata.raft.log import RaftLog
from odradek.metadata.raft.state import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Prospective,
    QuorumState,
    ReplicaProgress,
    Resigned,
    Role,
    Unattached,
    Voted,
    _Election,
)
from odradek.metadata.raft.store import QuorumStateStore

__all__ = ["RaftClient", "RaftConfig", "leader_change_payload"]


class RaftClient(SnapshotFetching):
    def __init__(
        self,
        local_id: int,
        voters: frozenset[int] | set[int],
        log: RaftLog,
        store: QuorumStateStore,
        rng: random.Random,
        now_ms: int,
        config: RaftConfig | None = None,
    ) -> None:
        self.local_id = local_id
        self.voters = frozenset(voters)
        self.log = log
        self.rng = rng
        self.config = config or RaftConfig()
        self.quorum = QuorumState(local_id, self.voters, store)
        if log.last_epoch() > self.quorum.epoch:
            # the log has seen a later epoch than the stored state (a lost or old quorum-state
            # file): never stand or vote in an epoch older than our own entries, as Kafka does
            self.quorum.transition_to(Unattached(log.last_epoch()))
        # volatile: unknown after a restart until the leader says, but never below a snapshot
        snap = log.latest_snapshot()
        self.high_watermark = snap.end_offset if snap is not None else 0
        self.snapshots_installed = 0  # a follower's count of snapshots fetched (KIP-630)
        self._outbox: list[m.Message] = []
        self._next_cid = 0
        self._arm(self.quorum.state, now_ms)
        if self.voters == {local_id}:
            # the only voter: nobody to wait for, elect ourselves now (Kafka does the same)
            self._become_prospective(now_ms)

    # ---- what the driver sees -------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self.quorum.role

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int | None:
        """The leader this node vouches for: itself as leader, or the leader it follows. A
        node that lost its leader (Prospective, Resigned, a restarted ex-leader) names none,
        or voters would keep pointing each other back at a dead leader."""
        st = self.quorum.state
        return st.leader_id if st.role in (Role.LEADER, Role.FOLLOWER) else None

    @property
    def state(self) -> EpochState:
        return self.quorum.state

    def propose(self, payloads: list[bytes], now_ms: int) -> int | None:
        """Append records as leader; the offset of the last one, or None when not leader."""
        st = self.quorum.state
        if not isinstance(st, Leader) or not payloads:
            return None
        last = self.log.append_as_leader(st.epoch, list(payloads))
        self.log.flush()
        self._maybe_advance_hw(st)
        self._release_parked(st, now_ms)
        return last

    def poll(self, now_ms: int) -> tuple[list[m.Message], int]:
        self._run_timers(now_ms)
        out, self._outbox = self._outbox, []
        return out, self._next_deadline()

    def handle(self, msg: m.Message, now_ms: int) -> None:
        body = msg.body
        if isinstance(body, m.VoteRequest):
            self._on_vote_request(msg, body, now_ms)
        elif isinstance(body, m.VoteResponse):
            self._on_vote_response(msg, body, now_ms)
        elif isinstance(body, m.BeginQuorumEpochRequest):
            self._on_begin_request(msg, body, now_ms)
        elif isinstance(body, m.EndQuorumEpochRequest):
            self._on_end_request(msg, body, now_ms)
        elif isinstance(body, m.EndQuorumEpochResponse):
            self._on_end_response(msg, body, now_ms)
        elif isinstance(body, m.FetchRequest):
            self._on_fetch_request(msg, body, now_ms)
        elif isinstance(body, m.FetchResponse):
            self._on_fetch_response(msg, body, now_ms)
        elif isinstance(body, m.BeginQuorumEpochResponse):
            self._observe(body.leader_epoch, body.leader_id, now_ms)
        elif isinstance(body, m.FetchSnapshotRequest):
            self._on_fetch_snapshot_request(msg, body, now_ms)
        elif isinstance(body, m.FetchSnapshotResponse):
            self._on_fetch_snapshot_response(msg, body, now_ms)

    # ---- sending ----------------------------------------------------------------------------

    def _send(self, dst: int, body: m.Body) -> int:
        self._next_cid += 1
        self._outbox.append(m.Message(self.local_id, dst, self._next_cid, body))
        return self._next_cid

    def _reply(self, req: m.Message, body: m.Body) -> None:
        self._outbox.append(m.Message(self.local_id, req.src, req.correlation_id, body))

    def _others(self) -> list[int]:
        return sorted(self.voters - {self.local_id})

    # ---- timers -----------------------------------------------------------------------------

    def _election_timeout(self, now_ms: int) -> int:
        t = self.config.election_timeout_ms
        return now_ms + t + self.rng.randrange(t)

    def _election_backoff(self, now_ms: int, position: int = 0) -> int:
        cap = self.config.election_backoff_max_ms
        base = min(cap, self.config.retry_backoff_ms * (2**position))
        return now_ms + base + self.rng.randrange(max(1, base))

    def _arm(self, st: EpochState, now_ms: int) -> None:
        """Set the timers of a role just entered (or restored after a restart)."""
        if isinstance(st, Unattached) and not self.quorum.is_voter():
            st.election_deadline = now_ms  # an observer looks for the leader at once
        elif isinstance(st, (Unattached, Voted, _Election)):
            st.election_deadline = self._election_timeout(now_ms)
        elif isinstance(st, Follower):
            st.fetch_deadline = now_ms + self.config.fetch_timeout_ms
            st.next_fetch_at = now_ms
        elif isinstance(st, Resigned):
            st.election_deadline = self._election_timeout(now_ms)
            st.unacked = set(self._others())
            st.resend_at = now_ms
        elif isinstance(st, Leader):
            st.check_quorum_deadline = now_ms + self.config.check_quorum_ms
            st.begin_resend_at = now_ms

    def _next_deadline(self) -> int:
        st = self.quorum.state
        if isinstance(st, Leader):
            at = min(st.check_quorum_deadline, st.begin_resend_at)
            return min([at] + [p[2] for p in st.parked.values()])  # type: ignore[misc]
        if isinstance(st, Follower):
            at = st.fetch_deadline
            if st.inflight is None:
                return min(at, st.next_fetch_at)
            return min(at, st.inflight_sent_ms + self.config.request_timeout_ms)
        if isinstance(st, Resigned):
            return min(st.election_deadline, st.resend_at) if st.unacked else st.election_deadline
        return cast("Unattached", st).election_deadline

    def _run_timers(self, now: int) -> None:
        st = self.quorum.state
        if isinstance(st, Leader):
            if now >= st.check_quorum_deadline:
                self._check_quorum(st, now)
            st = self.quorum.state
            if isinstance(st, Leader) and now >= st.begin_resend_at:
                for v in self._others():
                    if st.replicas[v].last_fetch_ms is None:
                        self._send(v, m.BeginQuorumEpochRequest(st.epoch, self.local_id))
                st.begin_resend_at = now + self.config.election_timeout_ms // 2
            if isinstance(st, Leader):
                for src, (pmsg, preq, at) in list(st.parked.items()):
                    if now >= at:  # the long poll is over: answer with what there is
                        del st.parked[src]
                        self._answer_fetch(st, pmsg, preq)  # type: ignore[arg-type]
        elif isinstance(st, Follower):
            if now >= st.fetch_deadline:
                if self.quorum.is_voter():
                    self._become_prospective(now)
                else:
                    # an observer never stands: ask any voter who leads now
                    st.fetch_deadline = now + self.config.fetch_timeout_ms
                    st.inflight = None
                    self._send_fetch(st, now, self.rng.choice(sorted(self.voters)))
            elif (
                st.inflight is not None
                and now >= st.inflight_sent_ms + self.config.request_timeout_ms
            ):
                st.inflight = None  # lost: ask again
                self._send_fetch(st, now)
            elif st.inflight is None and now >= st.next_fetch_at:
                self._send_fetch(st, now)
        elif isinstance(st, Resigned):
            if now >= st.election_deadline:
                self._become_prospective(now)
            elif st.unacked and now >= st.resend_at:
                self._send_end_quorum(st, now)
        elif now >= cast("Unattached", st).election_deadline:
            # Unattached, Voted, Prospective (a new round) and Candidate (a new pre-vote) alike
            if self.quorum.is_voter():
                self._become_prospective(now)
            else:
                # an observer: a Fetch to any voter; its answer names the leader and epoch
                self._send(self.rng.choice(sorted(self.voters)), m.FetchRequest(
                    st.epoch, self.local_id, self.log.end_offset(), self.log.last_epoch()))
                cast("Unattached", st).election_deadline = now + min(
                    self.config.request_timeout_ms, self.config.election_timeout_ms) // 2

    # ---- transitions --------------------------------------------------------------------------

    def _go(self, new: EpochState, now_ms: int) -> EpochState:
        old = self.quorum.state
        self.quorum.transition_to(new)
        if isinstance(old, Leader) and old.parked:
            # held fetches are answered, not forgotten: the transport waits for every answer
            for pmsg, _preq, _at in old.parked.values():
                self._reply(pmsg, m.FetchResponse(  # type: ignore[arg-type]
                    m.NOT_LEADER_OR_FOLLOWER, new.epoch, self.leader_id, self.high_watermark))
            old.parked.clear()
        self._arm(new, now_ms)
        return new

    def _observe(self, epoch: int, leader_id: int | None, now_ms: int) -> None:
        """Adopt a newer epoch (and its leader, when named) learnt from any message."""
        st = self.quorum.state
        if epoch > st.epoch:
            if leader_id is not None and leader_id != self.local_id:
                self._go(Follower(epoch, None, leader_id), now_ms)
            else:
                self._go(Unattached(epoch), now_ms)
        elif (
            epoch == st.epoch
            and leader_id is not None
            and leader_id != self.local_id
            and st.role in (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE, Role.CANDIDATE)
            and (st.leader_id is None or st.leader_id == leader_id)
        ):
            # a leader named in our own epoch: follow it (a Prospective that had lost its leader
            # goes back to it when a voter that still hears from it refuses the pre-vote)
            self._go(Follower(epoch, st.voted_for, leader_id), now_ms)

    def _become_prospective(self, now_ms: int) -> None:
        st = self.quorum.state
        pro = cast(Prospective, self._go(Prospective(st.epoch, st.voted_for, st.leader_id), now_ms))
        pro.granted.add(self.local_id)
        for v in self._others():
            pro.round_ids.add(
                self._send(
                    v,
                    m.VoteRequest(
                        pro.epoch + 1,
                        self.local_id,
                        self.log.last_epoch(),
                        self.log.end_offset(),
                        True,
                    ),
                )
            )
        self._maybe_won(pro, now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        epoch = self.quorum.epoch + 1
        cand = cast(Candidate, self._go(Candidate(epoch, self.local_id), now_ms))
        cand.granted.add(self.local_id)
        for v in self._others():
            cand.round_ids.add(
                self._send(
                    v,
                    m.VoteRequest(
                        epoch, self.local_id, self.log.last_epoch(), self.log.end_offset()
                    ),
                )
            )
        self._maybe_won(cand, now_ms)

    def _maybe_won(self, st: _Election, now_ms: int) -> None:
        if len(st.granted) < self.quorum.majority():
            return
        if isinstance(st, Prospective):
            self._become_candidate(now_ms)
        else:
            self._become_leader(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        epoch = self.quorum.epoch
        granting = set(cast(Candidate, self.quorum.state).granted)
        start = self.log.end_offset()
        leader = Leader(epoch, self.local_id, self.local_id, epoch_start_offset=start)
        leader.replicas = {v: ReplicaProgress() for v in self._others()}
        self._go(leader, now_ms)
        # the first record of every epoch is the leader's own: once it commits, everything
        # before it is committed too (Raft commits earlier epochs' entries only this way)
        self.log.append_as_leader(
            epoch, [leader_change_payload(self.local_id, self.voters, granting)], control=True)
        self.log.flush()
        for v in self._others():
            self._send(v, m.BeginQuorumEpochRequest(epoch, self.local_id))
        leader.begin_resend_at = now_ms + self.config.election_timeout_ms // 2
        self._maybe_advance_hw(leader)

    def _check_quorum(self, st: Leader, now: int) -> None:
        window = self.config.check_quorum_ms
        need = self.quorum.majority() - 1  # besides ourselves
        if need <= 0:
            st.check_quorum_deadline = now + window
            return
        heard = sorted(
            (p.last_fetch_ms for p in st.replicas.values() if p.last_fetch_ms is not None),
            reverse=True,
        )
        if len(heard) >= need and heard[need - 1] + window > now:
            st.check_quorum_deadline = heard[need - 1] + window
            return
        # a majority has not fetched within the window: another leader may exist; step down
        self._resign(st, now)

    def resign(self, now: int) -> bool:
        """Give up leadership now (a clean shutdown): EndQuorumEpoch to the voters, so the
        best placed one stands at once. False when not the leader."""
        st = self.quorum.state
        if not isinstance(st, Leader):
            return False
        self._resign(st, now)
        return True

    def _resign(self, st: Leader, now: int) -> None:
        preferred = tuple(
            v for v, _ in sorted(st.replicas.items(), key=lambda kv: (-kv[1].end_offset, kv[0]))
        )
        res = cast(Resigned, self._go(Resigned(st.epoch, st.voted_for, self.local_id), now))
        res.preferred = preferred
        self._send_end_quorum(res, now)

    def _send_end_quorum(self, st: Resigned, now: int) -> None:
        # tell the voters at once, so the best placed one stands without waiting a fetch timeout
        for v in sorted(st.unacked):
            self._send(v, m.EndQuorumEpochRequest(st.epoch, self.local_id, st.preferred))
        st.resend_at = now + self.config.election_timeout_ms // 2

    # ---- votes --------------------------------------------------------------------------------

    def _log_ok(self, req: m.VoteRequest) -> bool:
        return (req.last_offset_epoch, req.last_offset) >= (
            self.log.last_epoch(),
            self.log.end_offset(),
        )

    def _log_equal(self, req: m.VoteRequest) -> bool:
        return (req.last_offset_epoch, req.last_offset) == (
            self.log.last_epoch(), self.log.end_offset())

    def _on_vote_request(self, msg: m.Message, req: m.VoteRequest, now: int) -> None:
        if req.candidate_id not in self.voters or not self.quorum.is_voter():
            self._reply(
                msg,
                m.VoteResponse(
                    m.INCONSISTENT_VOTER_SET, self.epoch, self.leader_id, False, req.pre_vote
                ),
            )
            return
        if req.pre_vote:
            st = self.quorum.state
            heard_leader = st.role is Role.LEADER or (isinstance(st, Follower) and st.fetched_ok)
            log_ok = self._log_ok(req)
            grant = req.candidate_epoch > st.epoch and not heard_leader and log_ok
            if grant and isinstance(st, Prospective) and self._log_equal(req) \
                    and req.candidate_id > self.local_id:
                # two voters that lost the leader together, with the same log: only the lower
                # id goes on to stand, or both would and split the vote (a whole election
                # timeout more); the other grants it and it has the votes it needs
                grant = False
            self._reply(msg, m.VoteResponse(m.NONE, st.epoch, self.leader_id, grant, True))
            if (not log_ok and isinstance(st, Follower) and not st.fetched_ok
                    and req.candidate_epoch > st.epoch):
                # a voter behind us lost the leader, and we have not heard from it since we
                # came back to it: only we can win, so stand now instead of after a whole
                # fetch timeout more (a pre-vote bumps no epoch; if the leader lives, the
                # voters that hear it refuse and send us back to it)
                self._become_prospective(now)
            return
        if req.candidate_epoch < self.epoch:
            self._reply(
                msg, m.VoteResponse(m.FENCED_LEADER_EPOCH, self.epoch, self.leader_id, False)
            )
            return
        if req.candidate_epoch > self.epoch:
            self._go(Unattached(req.candidate_epoch), now)
        st = self.quorum.state
        if st.voted_for is not None:
            grant = st.voted_for == req.candidate_id and st.role in (Role.VOTED, Role.PROSPECTIVE)
        elif st.leader_id is not None or st.role not in (Role.UNATTACHED, Role.PROSPECTIVE):
            grant = False
        else:
            grant = self._log_ok(req)
            if grant:
                # durable before the answer leaves: a restart must not vote again in this epoch
                self._go(Voted(st.epoch, req.candidate_id), now)
        self._reply(msg, m.VoteResponse(m.NONE, self.epoch, self.leader_id, grant))

    def _on_vote_response(self, msg: m.Message, resp: m.VoteResponse, now: int) -> None:
        # a voter that grants has said it no longer hears from the leader it may still name:
        # following that leader again would undo the election (two voters cut off from a
        # live but isolated leader would hand each other back to it forever)
        self._observe(resp.leader_epoch, None if resp.vote_granted else resp.leader_id, now)
        st = self.quorum.state
        if not isinstance(st, _Election) or msg.correlation_id not in st.round_ids:
            return
        if resp.pre_vote != isinstance(st, Prospective) or resp.error != m.NONE:
            return
        st.round_ids.discard(msg.correlation_id)
        if resp.vote_granted:
            st.granted.add(msg.src)
            self._maybe_won(st, now)
        else:
            st.rejected.add(msg.src)

    # ---- leadership messages -----------------------------------------------------------------

    def _on_begin_request(self, msg: m.Message, req: m.BeginQuorumEpochRequest, now: int) -> None:
        st = self.quorum.state
        if req.leader_id not in self.voters:
            self._reply(msg, m.BeginQuorumEpochResponse(
                m.INCONSISTENT_VOTER_SET, st.epoch, self.leader_id))
            return
        if req.leader_epoch < st.epoch:
            self._reply(
                msg, m.BeginQuorumEpochResponse(m.FENCED_LEADER_EPOCH, st.epoch, self.leader_id)
            )
            return
        if (
            req.leader_epoch == st.epoch
            and st.leader_id is not None
            and st.leader_id != req.leader_id
        ):
            self._reply(
                msg, m.BeginQuorumEpochResponse(m.INVALID_REQUEST, st.epoch, self.leader_id)
            )
            return
        if req.leader_epoch > st.epoch:
            self._go(Follower(req.leader_epoch, None, req.leader_id), now)
        elif not isinstance(st, Follower):
            self._go(Follower(st.epoch, st.voted_for, req.leader_id), now)
        self._reply(msg, m.BeginQuorumEpochResponse(m.NONE, self.epoch, self.leader_id))

    def _on_end_request(self, msg: m.Message, req: m.EndQuorumEpochRequest, now: int) -> None:
        st = self.quorum.state
        if req.leader_epoch < st.epoch:
            self._reply(
                msg, m.EndQuorumEpochResponse(m.FENCED_LEADER_EPOCH, st.epoch, self.leader_id)
            )
            return
        if req.leader_epoch > st.epoch:
            st = self._go(Unattached(req.leader_epoch), now)
        if isinstance(st, Follower) and st.leader_id == req.leader_id:
            # the leader gave up: stand for election soon, the best placed successor first
            pos = (
                req.preferred_successors.index(self.local_id)
                if self.local_id in req.preferred_successors
                else len(req.preferred_successors)
            )
            st.fetch_deadline = min(st.fetch_deadline, self._election_backoff(now, pos))
        self._reply(msg, m.EndQuorumEpochResponse(m.NONE, self.epoch, self.leader_id))

    def _on_end_response(self, msg: m.Message, resp: m.EndQuorumEpochResponse, now: int) -> None:
        st = self.quorum.state
        if isinstance(st, Resigned) and resp.leader_epoch <= st.epoch:
            st.unacked.discard(msg.src)
        self._observe(resp.leader_epoch, resp.leader_id, now)

    # ---- fetch: the leader's side ------------------------------------------------------------

    def _on_fetch_request(self, msg: m.Message, req: m.FetchRequest, now: int) -> None:
        st = self.quorum.state

        def answer(error: int, **kw: object) -> None:
            body = m.FetchResponse(error, st.epoch, self.leader_id, self.high_watermark, **kw)  # type: ignore[arg-type]
            self._reply(msg, body)

        if req.current_leader_epoch < st.epoch:
            answer(m.FENCED_LEADER_EPOCH)
            return
        if req.current_leader_epoch > st.epoch:
            answer(m.UNKNOWN_LEADER_EPOCH)
            return
        if not isinstance(st, Leader):
            answer(m.NOT_LEADER_OR_FOLLOWER)
            return
        start = self.log.start_offset()
        snapshot = self.log.latest_snapshot()
        if req.fetch_offset < start and snapshot is not None:
            # what the follower needs next is only in our snapshot (KIP-630)
            answer(m.NONE, snapshot_id=snapshot)
            return
        found, end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
        if (
            req.fetch_offset > self.log.end_offset()
            or found != req.last_fetched_epoch
            or end < req.fetch_offset
        ):
            if end < start and snapshot is not None:
                answer(m.NONE, snapshot_id=snapshot)
                return
            # the follower's log parts from ours: tell it where our history of that epoch ends
            answer(m.NONE, diverging_epoch=m.DivergingEpoch(found, end))
            return
        voter = st.replicas.get(req.replica_id)
        # observers fetch too; they are listed (DescribeQuorum) but do not count
        progress = voter if voter is not None else st.observers.setdefault(
            req.replica_id, ReplicaProgress())
        # the latest fetch, not the largest: a replica that lost its log must not count
        # for what it once had (the HW itself never goes back)
        progress.end_offset = req.fetch_offset
        progress.last_fetch_ms = now
        if req.fetch_offset >= self.log.end_offset():
            progress.last_caught_up_ms = now
        if voter is not None:
            self._maybe_advance_hw(st, now)
        if (
            req.max_wait_ms > 0
            and req.fetch_offset >= self.log.end_offset()
            and progress.hw_told >= self.high_watermark
        ):
            # nothing to send and nothing new to tell: hold the answer (a long poll). A fetch
            # whose own offset moved the HW is answered now, or that follower (a broker's
            # metadata) would learn the commit only when the long poll ends (KIP-1166's
            # point; we know what HW we last told each replica, so it needs no new field)
            old = st.parked.pop(msg.src, None)
            if old is not None:
                self._answer_fetch(st, old[0], old[1])  # type: ignore[arg-type]
            st.parked[msg.src] = (msg, req, now + min(req.max_wait_ms, self.config.fetch_max_wait_ms))
            return
        self._answer_fetch(st, msg, req)

    def _answer_fetch(self, st: Leader, msg: m.Message, req: m.FetchRequest) -> None:
        progress = st.replicas.get(req.replica_id) or st.observers.get(req.replica_id)
        if progress is not None:
            progress.hw_told = self.high_watermark
        records = self.log.read(req.fetch_offset, self.config.fetch_max_entries)
        self._reply(msg, m.FetchResponse(
            m.NONE, st.epoch, self.local_id, self.high_watermark, records=records))

    def _release_parked(self, st: Leader, now: int) -> None:
        for src in list(st.parked):
            pmsg, preq, _ = st.parked.pop(src)
            self._answer_fetch(st, pmsg, preq)  # type: ignore[arg-type]

    def _maybe_advance_hw(self, st: Leader, now: int = 0) -> None:
        offsets = sorted(
            [self.log.end_offset()] + [p.end_offset for p in st.replicas.values()], reverse=True
        )
        candidate = offsets[self.quorum.majority() - 1]
        # Raft's commit rule: count replicas only for an entry of this epoch; earlier entries
        # commit with it, never on their own
        if candidate > self.high_watermark and candidate > st.epoch_start_offset:
            self.high_watermark = candidate
            self._release_parked(st, now)  # held fetches learn the new high watermark now

    # ---- fetch: the follower's side ------------------------------------------------------------

    def _send_fetch(self, st: Follower, now: int, dst: int | None = None) -> None:
        assert st.leader_id is not None
        if st.snapshot is not None:
            sid, position = st.snapshot  # type: ignore[misc]
            body: m.Body = m.FetchSnapshotRequest(
                st.epoch, self.local_id, sid, position, self.config.fetch_max_bytes)
        else:
            body = m.FetchRequest(st.epoch, self.local_id, self.log.end_offset(),
                                  self.log.last_epoch(), self.config.fetch_max_wait_ms)
        st.inflight = self._send(st.leader_id if dst is None else dst, body)
        st.inflight_sent_ms = now

    def _on_fetch_response(self, msg: m.Message, resp: m.FetchResponse, now: int) -> None:
        self._observe(resp.leader_epoch, resp.leader_id, now)
        st = self.quorum.state
        if (
            not isinstance(st, Follower)
            or st.inflight != msg.correlation_id
            or msg.src != st.leader_id
        ):
            return  # stale, duplicated, or from a former leader
        st.inflight = None
        if resp.error != m.NONE or resp.leader_epoch != st.epoch:
            st.next_fetch_at = now + self.config.retry_backoff_ms
            return
        st.fetch_deadline = now + self.config.fetch_timeout_ms
        st.fetched_ok = True
        if resp.snapshot_id is not None:
            # our next offset is below the leader's log start: download its snapshot
            st.snapshot = (resp.snapshot_id, 0)
            self._send_fetch(st, now)
            return
        if resp.diverging_epoch is not None:
            div = resp.diverging_epoch
            _, ours = self.log.end_offset_for_epoch(div.epoch)
            # never below what we know committed: the leader's history holds all of it
            self.log.truncate_to(max(min(div.end_offset, ours), self.high_watermark))
            st.next_fetch_at = now
            return
        appended = self.log.append_as_follower(resp.records) if resp.records else 0
        if appended:
            self.log.flush()  # before the next Fetch reports the new end offset to the leader
        new_hw = min(resp.high_watermark, self.log.end_offset())
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
        idle = not appended and self.config.fetch_max_wait_ms <= 0
        st.next_fetch_at = now + self.config.fetch_idle_ms if idle else now
