"""A seeded, single-threaded simulation of a KRaft quorum: the RaftClient under faults.

Everything random comes from one `random.Random(seed)`, so a seed replays exactly. The network
delays each message by a random amount (so messages overtake each other), drops and duplicates
some, and partitions the voters into groups for a while. Nodes crash and restart.

The crash model (explicit, as the brief asks): a crash loses the node's volatile state (role,
timers, high watermark, messages in flight to and from it: its connections break) and the
unflushed tail of its log (`MemoryRaftLog.crash`; the client flushes after every append, before
anyone counts the new entries, so that tail is empty here unless the client breaks its rule).
The election state (epoch, vote, leader) survives, because the client writes it durably before
acting on it; `durable_votes=False` makes a crash forget it too, to show what breaks without.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from odradek.metadata.raft import messages as m
from odradek.metadata.raft.client import RaftClient, RaftConfig
from odradek.metadata.raft.state import Role
from odradek.metadata.raft.store import MemoryQuorumStateStore

from .checker import InvariantChecker, NodeView, ObservedLog


@dataclass
class SimConfig:
    voters: int = 3
    chaos_ms: int = 20_000  # faults happen during this much simulated time
    heal_bound_ms: int = 20_000  # after healing, a leader must commit within this
    loss: float = 0.05
    duplicate: float = 0.02
    delay_ms: tuple[int, int] = (1, 30)
    fault_every_ms: int = 1_500  # mean gap between faults
    crash_down_ms: tuple[int, int] = (50, 3_000)
    partition_ms: tuple[int, int] = (300, 4_000)
    propose_every_ms: tuple[int, int] = (20, 300)
    durable_votes: bool = True
    # a lost message stands for a broken connection, which a real client notices well before
    # Kafka's 2 s request timeout; without this every lost Fetch would cost an election
    raft: RaftConfig = field(
        default_factory=lambda: RaftConfig(request_timeout_ms=300, fetch_max_wait_ms=100))


class SimNode:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.log = ObservedLog()
        self.store: MemoryQuorumStateStore | None = None
        self.client: RaftClient | None = None
        self.incarnation = 0
        self.deadline = 0


class Simulation:
    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.cfg = config or SimConfig()
        self.rng = random.Random(seed)
        self.now = 0
        self.voters = frozenset(range(1, self.cfg.voters + 1))
        self.nodes = {i: SimNode(i) for i in self.voters}
        self.group = {i: 0 for i in self.voters}  # a partition puts nodes in different groups
        self.loss = self.cfg.loss
        self.duplicate = self.cfg.duplicate
        self.checker = InvariantChecker()
        self._queue: list[tuple[int, int, str, object]] = []
        self._seq = 0
        self.delivered = 0
        self.proposed = 0
        for node in self.nodes.values():
            node.store = MemoryQuorumStateStore(durable=self.cfg.durable_votes)
            self._start(node)

    # ---- scheduling -------------------------------------------------------------------------

    def _at(self, t: int, kind: str, data: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, data))

    def _start(self, node: SimNode) -> None:
        assert node.store is not None
        node.incarnation += 1
        node.client = RaftClient(
            node.node_id,
            self.voters,
            node.log,
            node.store,
            random.Random(self.rng.getrandbits(64)),
            self.now,
            self.cfg.raft,
        )
        self.checker.restarted(node.node_id)
        self._flush(node)

    def _flush(self, node: SimNode) -> None:
        """Poll the node now and put what it sends on the wire."""
        assert node.client is not None
        out, node.deadline = node.client.poll(self.now)
        for msg in out:
            self._send(msg)

    def _connected(self, a: int, b: int) -> bool:
        return self.group[a] == self.group[b]

    def _send(self, msg: m.Message) -> None:
        if not self._connected(msg.src, msg.dst) or self.rng.random() < self.loss:
            return
        copies = 2 if self.rng.random() < self.duplicate else 1
        stamp = (self.nodes[msg.src].incarnation, self.nodes[msg.dst].incarnation)
        for _ in range(copies):
            self._at(self.now + self.rng.randint(*self.cfg.delay_ms), "deliver", (msg, stamp))

    # ---- faults -----------------------------------------------------------------------------

    def _crash(self, node: SimNode) -> None:
        node.client = None
        node.log.crash()
        assert node.store is not None
        node.store.crash()
        self._at(self.now + self.rng.randint(*self.cfg.crash_down_ms), "restart", node.node_id)

    def _fault(self) -> None:
        kind = self.rng.choice(("crash", "partition", "partition", "crash-leader"))
        up = [n for n in self.nodes.values() if n.client is not None]
        if kind == "crash-leader":
            up = [n for n in up if n.client is not None and n.client.role is Role.LEADER] or up
        if kind.startswith("crash") and up:
            self._crash(self.rng.choice(up))
        elif kind == "partition":
            ids = sorted(self.voters)
            self.rng.shuffle(ids)
            cut = self.rng.randint(1, len(ids) - 1)
            for i in ids:
                self.group[i] = 1 if ids.index(i) < cut else 2
            self._at(self.now + self.rng.randint(*self.cfg.partition_ms), "heal-partition", None)

    def _heal(self) -> None:
        for i in self.voters:
            self.group[i] = 0
        self.loss = 0.0
        self.duplicate = 0.0
        for node in self.nodes.values():
            if node.client is None:
                self._start(node)

    # ---- the loop ---------------------------------------------------------------------------

    def _step(self) -> None:
        """Run the earliest event (a delivery, a timer, a fault), then check the invariants."""
        up = [n for n in self.nodes.values() if n.client is not None]
        timer = min(up, key=lambda n: (n.deadline, n.node_id), default=None)
        if timer is not None and (not self._queue or timer.deadline <= self._queue[0][0]):
            self.now = max(self.now, timer.deadline)
            self._flush(timer)
        else:
            t, _, kind, data = heapq.heappop(self._queue)
            self.now = max(self.now, t)
            self._event(kind, data)
        self._check()

    def _event(self, kind: str, data: object) -> None:
        if kind == "deliver":
            msg, stamp = data  # type: ignore[misc]
            dst, src = self.nodes[msg.dst], self.nodes[msg.src]
            if (
                dst.client is None
                or (src.incarnation, dst.incarnation) != stamp
                or not self._connected(msg.src, msg.dst)
            ):
                return  # the connection it travelled on is gone
            self.delivered += 1
            dst.client.handle(msg, self.now)
            self._flush(dst)
        elif kind == "restart":
            node = self.nodes[data]  # type: ignore[index]
            if node.client is None:
                self._start(node)
        elif kind == "heal-partition":
            for i in self.voters:
                self.group[i] = 0
        elif kind == "fault":
            self._fault()
            if self.now < self.cfg.chaos_ms:
                self._at(
                    self.now + int(self.rng.expovariate(1 / self.cfg.fault_every_ms)), "fault", None
                )
        elif kind == "propose":
            for node in self.nodes.values():
                if node.client is not None and node.client.role is Role.LEADER:
                    self.proposed += 1
                    node.client.propose([f"s{self.seed}-r{self.proposed}".encode()], self.now)
                    self._flush(node)
            if self.now < self.cfg.chaos_ms:
                self._at(self.now + self.rng.randint(*self.cfg.propose_every_ms), "propose", None)

    def _check(self) -> None:
        views = [
            NodeView(
                n.node_id,
                n.client.role if n.client else None,
                n.client.epoch if n.client else 0,
                n.client.high_watermark if n.client else 0,
                n.log,
            )
            for n in self.nodes.values()
        ]
        self.checker.check(views)

    def run_until(self, t: int) -> None:
        while self.now < t:
            self._step()

    def run(self) -> int:
        """Chaos, then heal; returns the simulated ms from healing to the first commit of a
        record proposed after it on every node (raises if not within heal_bound_ms)."""
        self._at(self.rng.randint(0, self.cfg.fault_every_ms), "fault", None)
        self._at(0, "propose", None)
        self.run_until(self.cfg.chaos_ms)
        healed = self.now
        self._heal()
        deadline = healed + self.cfg.heal_bound_ms
        target: tuple[int, int, int] | None = None  # (proposer, its epoch, offset)
        while self.now < deadline:
            self._step()
            leaders = [n for n in self.nodes.values() if n.client and n.client.role is Role.LEADER]
            if target is not None:
                proposer = self.nodes[target[0]].client
                if proposer is None or (proposer.role, proposer.epoch) != (Role.LEADER, target[1]):
                    target = None  # it lost its place before committing: ask the next leader
            if target is None and len(leaders) == 1:
                leader = leaders[0].client
                assert leader is not None
                offset = leader.propose([b"after-heal"], self.now)
                assert offset is not None
                target = (leaders[0].node_id, leader.epoch, offset)
                self._flush(leaders[0])
            if target is not None and all(
                n.client is not None
                and n.client.high_watermark > target[2]
                and n.log.epoch_at(target[2]) == target[1]
                for n in self.nodes.values()
            ):
                return self.now - healed
        raise AssertionError(
            f"seed {self.seed}: no leader committed within {self.cfg.heal_bound_ms} ms of healing"
        )


def main() -> None:
    import argparse

    p = argparse.ArgumentParser(description="replay or sweep seeded KRaft quorum simulations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=1, help="run seeds seed..seed+count-1")
    p.add_argument("--voters", type=int, default=3)
    p.add_argument("--harsh", action="store_true", help="frequent short crashes")
    p.add_argument("--no-durable-votes", action="store_true")
    args = p.parse_args()
    extra: dict[str, object] = (
        {"fault_every_ms": 500, "crash_down_ms": (1, 200)} if args.harsh else {}
    )
    failed = 0
    for seed in range(args.seed, args.seed + args.count):
        cfg = SimConfig(voters=args.voters, durable_votes=not args.no_durable_votes, **extra)  # type: ignore[arg-type]
        sim = Simulation(seed, cfg)
        try:
            healed_ms = sim.run()
        except AssertionError as e:
            failed += 1
            print(f"seed {seed}: FAIL at {sim.now} ms: {e}")
            continue
        print(
            f"seed {seed}: ok, {len(sim.checker.leaders)} epochs with a leader, "
            f"{len(sim.checker.committed)} committed, leader committing {healed_ms} ms after heal"
        )
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
