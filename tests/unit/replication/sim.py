"""A deterministic simulation of partition replication: one partition, three nodes, each a
real ReplicaManager over real logs in a temp dir, in one process under a seeded scheduler.

The network delays and drops messages (fetches, OffsetForLeaderEpoch, AlterPartition, produce
requests and metadata images); a tiny controller model decides leaders and ISRs (clean
elections from the ISR, AlterPartition checked against leader and partition epochs, fencing of
crashed or isolated nodes); nodes crash and restart, losing their unflushed tail or not, are
isolated for a while (a paused leader that keeps taking writes), and links between two nodes
are cut (a follower falls out of the ISR while the controller still sees it). The followers run the real
`FollowerFetchState`; leaders the real fetch path, ISR rules and produce purgatory.

After every step: logs match up to each node's HW (against the one committed history), a
node's HW never goes back while it runs, and every acks=all record acknowledged in epoch <= E
is in the log of the leader of epoch E. At the end the network heals and every replica must
converge to the same bytes.

Run many seeds: `python -m tests.unit.replication.sim --seeds 0:5000` (a failing seed prints
itself; `--seeds 1234` replays it exactly, `-v` narrates).

Kept out on purpose: a power loss of the last ISR member (Kafka needs KIP-966's unclean-shutdown
handling to keep acknowledged records then), and more than one node down at once (with
min.insync.replicas=2 and RF=3, Kafka promises nothing then either).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import random
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch import FileRegion
from odradek.protocol.records import (
    BatchHeader,
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
)
from odradek.replication.config import (
    AlterPartitionItem,
    AlterPartitionResult,
    ReplicationConfig,
)
from odradek.replication.fetch_params import FetchParams
from odradek.replication.follower import FETCHING, TRUNCATING, FollowerFetchState
from odradek.replication.manager import ReplicaManager
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager

TOPIC = "t"
TID = uuid.UUID(int=99)
NODES = (1, 2, 3)
CONTROLLER = 0
BASE_TS = 1_700_000_000_000
PRODUCER_ID = 1000
TXN_PRODUCER_ID = 2000
LOG_CONFIG = replace(LogConfig(), min_insync_replicas=2, segment_bytes=2048)
CONFIG = ReplicationConfig(replica_lag_time_max_ms=300, replica_fetch_backoff_ms=30,
                           replica_fetch_max_bytes=700)
REQUEST_TIMEOUT_MS = 150


class InvariantBroken(AssertionError):
    pass


@dataclass
class Acked:
    offset: int
    value: bytes
    epoch: int


@dataclass
class Node:
    id: int
    dir: Path
    rm: ReplicaManager | None = None
    incarnation: int = 0
    down: bool = False
    isolated_until: int = -1
    fetch: FollowerFetchState | None = None
    inflight: int = 0  # id of the fetcher's request in flight (0: none)
    next_fetch_at: int = 0
    last_hw: int = 0
    checked_to: int = 0  # offset below which the log was compared with the committed history
    verified: tuple[int, int, int] = (-1, -1, 0)  # (incarnation, epoch, acked checked)


@dataclass
class ControllerModel:
    leader: int = 1
    epoch: int = 1
    pepoch: int = 0
    isr: list[int] = field(default_factory=lambda: list(NODES))
    fenced: set[int] = field(default_factory=set)

    def image(self) -> MetadataImage:
        p = PartitionImage(0, NODES, tuple(self.isr), self.leader, self.epoch, self.pepoch)
        topic = TopicImage(TOPIC, TID, {0: p})
        return MetadataImage(topics_by_name={TOPIC: topic}, topics_by_id={TID: topic})


class Sim:
    def __init__(self, seed: int, root: Path, verbose: bool = False,
                 chaos_ms: int = 1500, calm_ms: int = 3000) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.root = root
        self.verbose = verbose
        self.chaos_ms = chaos_ms
        self.calm_ms = calm_ms
        self.now = 0
        self._seq = 0
        self._queue: list[tuple[int, int, Callable[[], Any]]] = []
        self.nodes = {n: Node(n, root / f"node{n}") for n in NODES}
        self.ctl = ControllerModel()
        self.acked: list[Acked] = []
        self.committed: list[tuple[int, int, int]] = []  # (base, last, crc) below any HW
        self.values = 0
        self.steps = 0
        self.calm = False
        self._image_at: dict[int, int] = {}
        self.isr_changes = 0
        self.cut: set[frozenset[int]] = set()  # links between two nodes that drop everything
        # one idempotent producer (acks=all, one batch in flight, retried until acknowledged)
        self.seq = 0
        self.inflight: tuple[bytes, int, int, bytes] | None = None  # raw, seq, count, value
        self.inflight_sent = 0
        # one transactional producer as transaction.version 2 runs it (KIP-890): batches of
        # epoch E acks=all one at a time (one not acknowledged in time: abort), then markers
        # of the bumped epoch E+1 written by the "coordinator" to the current leader until one
        # is committed there; the next transaction is E+1
        self.txn_epoch = 0
        self.txn_seq = 0
        self.txn_open = False
        self.txn_batches = 0
        self.txn_ending: bool | None = None  # None: not ending; else commit?
        self.txn_busy_until = 0
        self.txn_unacked = False
        self.txns_done = 0

    # --- scheduler -----------------------------------------------------------

    def at(self, delay: int, fn: Callable[[], Any]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (self.now + max(0, delay), self._seq, fn))

    def say(self, msg: str) -> None:
        if self.verbose:
            print(f"[{self.now:5d}] {msg}")

    def reachable(self, n: int) -> bool:
        if n == CONTROLLER:
            return True
        node = self.nodes[n]
        return not node.down and node.isolated_until <= self.now

    def send(self, src: int, dst: int, deliver: Callable[[], Any], ordered: bool = False) -> None:
        """Deliver after a random delay, unless lost, or either end is down or cut off (then or
        at delivery), or the destination restarted meanwhile."""
        link = frozenset((src, dst))
        if not (self.reachable(src) and self.reachable(dst)) or link in self.cut:
            return
        if not self.calm and not ordered and self.rng.random() < 0.03:
            return
        inc = self.nodes[dst].incarnation if dst != CONTROLLER else 0
        delay = self.rng.randint(1, 15)
        if ordered:  # metadata: in order per node (it is a log)
            when = max(self.now + delay, self._image_at.get(dst, 0) + 1)
            self._image_at[dst] = when
            delay = when - self.now

        def arrive() -> Any:
            if not (self.reachable(src) and self.reachable(dst)) or link in self.cut:
                return None
            if dst != CONTROLLER and self.nodes[dst].incarnation != inc:
                return None
            return deliver()

        self.at(delay, arrive)
        if not self.calm and not ordered and self.rng.random() < 0.02:
            self.at(delay + self.rng.randint(0, 20), arrive)  # delivered twice

    # --- nodes ---------------------------------------------------------------

    async def start_node(self, node: Node) -> None:
        node.incarnation += 1
        node.down = False
        node.fetch = None
        node.inflight = 0
        node.last_hw = 0
        node.checked_to = 0
        node.verified = (-1, -1, 0)
        rm = ReplicaManager(LogManager(node.dir, LOG_CONFIG), node.id, node.dir,
                            lambda t: LOG_CONFIG, channels=None,
                            alter_partition=self._alter_for(node), config=CONFIG,
                            clock=lambda: self.now, isr_expiration=False)
        # the batches carry timestamps of 2023 (fixed, so that a seed's bytes replay exactly):
        # no producer may expire for being idle since then
        rm.set_producer_id_expiration(1 << 50)
        # the node's metadata is caught up before it serves (the controller's image)
        await asyncio.to_thread(rm.load, self.ctl.image())
        node.rm = rm
        await self.apply_image(node, self.ctl.image())

    def part(self, node: Node) -> Any:
        return node.rm.get(TOPIC, 0) if node.rm is not None and not node.down else None

    async def apply_image(self, node: Node, img: MetadataImage) -> None:
        if node.rm is None or node.down:
            return
        before = self.part(node)
        was = (before.leader, before.leader_epoch) if before is not None else None
        await node.rm.sync(img)
        part = self.part(node)
        if part is None:
            return
        if part.is_leader:
            node.fetch = None
        elif (part.leader, part.leader_epoch) != was or node.fetch is None \
                or node.fetch.state == "fenced":
            node.fetch = FollowerFetchState(part)
            node.inflight = 0

    async def crash(self, node: Node, lose_tail: bool) -> None:
        rm = node.rm
        assert rm is not None
        self.say(f"crash node {node.id}{' losing its unflushed tail' if lose_tail else ''}")
        for op in list(rm.produce_purgatory):
            op.cancel()  # no answer ever leaves a dead process
        await rm.stop()
        part = rm.get(TOPIC, 0)
        if part is not None and lose_tail:
            log = part.log
            log.truncate_to(log.recovery_point)
        # a kill: no checkpoint files written; the next start recovers from the last ones
        for log in list(rm.log_manager.logs.values()):
            log.close()
        node.rm = None
        node.down = True
        node.fetch = None
        self.fence(node.id)

    def _alter_for(self, node: Node) -> Callable[[AlterPartitionItem], Any]:
        async def alter(item: AlterPartitionItem) -> AlterPartitionResult:
            fut: asyncio.Future[AlterPartitionResult] = \
                asyncio.get_running_loop().create_future()

            def answer(result: AlterPartitionResult) -> None:
                if not fut.done():
                    fut.set_result(result)

            def at_controller() -> None:
                result = self.controller_alter(item)
                self.send(CONTROLLER, node.id, lambda: answer(result))

            self.send(node.id, CONTROLLER, at_controller)
            self.at(REQUEST_TIMEOUT_MS,
                    lambda: answer(AlterPartitionResult(ErrorCode.request_timed_out)))
            return await fut

        return alter

    # --- the controller model -----------------------------------------------

    def publish(self) -> None:
        img = self.ctl.image()
        self.say(f"image: leader {self.ctl.leader} epoch {self.ctl.epoch} isr {self.ctl.isr} "
                 f"pepoch {self.ctl.pepoch}")
        for n in NODES:
            node = self.nodes[n]
            self.send(CONTROLLER, n, lambda node=node: self.apply_image(node, img), ordered=True)

    def controller_alter(self, item: AlterPartitionItem) -> AlterPartitionResult:
        c = self.ctl
        if item.leader_id != c.leader or item.leader_epoch != c.epoch:
            return AlterPartitionResult(ErrorCode.fenced_leader_epoch)
        if item.partition_epoch != c.pepoch:
            return AlterPartitionResult(ErrorCode.invalid_update_version)
        if c.leader not in item.new_isr or any(r in c.fenced for r in item.new_isr):
            return AlterPartitionResult(ErrorCode.ineligible_replica)
        c.isr = list(item.new_isr)
        c.pepoch += 1
        self.isr_changes += 1
        self.publish()
        return AlterPartitionResult(ErrorCode.none, c.leader, c.epoch, c.pepoch, tuple(c.isr))

    def fence(self, n: int) -> None:
        c = self.ctl
        c.fenced.add(n)
        changed = False
        if n in c.isr and len(c.isr) > 1:
            c.isr.remove(n)
            changed = True
        if c.leader == n:
            self.elect()
            changed = False
        if changed:
            c.pepoch += 1
            self.publish()

    def unfence(self, n: int) -> None:
        c = self.ctl
        c.fenced.discard(n)
        if c.leader < 0:
            self.elect()
        else:
            self.publish()  # the returning node catches up on metadata

    def elect(self, prefer: int | None = None) -> None:
        """A clean election from the ISR (unclean election stays off)."""
        c = self.ctl
        live = [r for r in c.isr if r not in c.fenced and r != c.leader]
        if prefer is not None:
            live = [prefer] if prefer in live else []
        if not live and c.leader >= 0 and c.leader not in c.fenced:
            return
        c.leader = live[0] if live else -1
        c.epoch += 1
        c.pepoch += 1
        self.publish()

    # --- the follower side ---------------------------------------------------

    def fetch_tick(self, node: Node) -> None:
        self.at(5, lambda: self.fetch_tick(node))
        part = self.part(node)
        fs = node.fetch
        if part is None or fs is None or node.inflight or self.now < node.next_fetch_at:
            return
        if part.leader < 0 or not fs.ready(self.now):
            return
        self._seq += 1
        rid = node.inflight = self._seq
        leader = self.nodes.get(part.leader)
        if leader is None:
            return
        self.at(REQUEST_TIMEOUT_MS, lambda: self._timed_out(node, fs, rid))
        if fs.state == TRUNCATING:
            req = fs.epoch_request()
            if req is None:
                node.inflight = 0
                return
            cur, epoch = req

            def at_leader() -> None:
                lp = self.part(leader)
                answer = (lp.last_offset_for_leader_epoch(cur, epoch) if lp is not None
                          else (ErrorCode.not_leader_or_follower, -1, -1))
                self.send(leader.id, node.id, lambda: self._epoch_answer(node, fs, rid, answer))

            self.send(node.id, leader.id, at_leader)
            return
        offset, cur, _last_epoch, _ = fs.fetch_position()

        def at_leader_fetch() -> None:
            resp = self._serve_fetch(leader, node.id, offset, cur)
            self.send(leader.id, node.id, lambda: self._fetch_answer(node, fs, rid, offset, resp))

        self.send(node.id, leader.id, at_leader_fetch)

    def _serve_fetch(self, leader: Node, replica: int, offset: int, epoch: int) -> Any:
        if leader.rm is None:
            return None
        params = FetchParams(replica, 0, 1, 1 << 20, 0, False, None)
        resp = leader.rm.fetch_messages(
            params, [(TOPIC, TID, [(0, offset, CONFIG.replica_fetch_max_bytes, epoch)])],
            lambda results: results[0][2][0])
        records = resp.records
        if isinstance(records, FileRegion):
            lp = self.part(leader)
            records = lp.log.read_bytes(records) if lp is not None else None
        return resp._replace(records=bytes(records) if records else None)

    def _timed_out(self, node: Node, fs: FollowerFetchState, rid: int) -> None:
        if node.inflight == rid and node.fetch is fs:
            node.inflight = 0
            fs.on_error(ErrorCode.request_timed_out, self.now, CONFIG.replica_fetch_backoff_ms)

    def _epoch_answer(self, node: Node, fs: FollowerFetchState, rid: int,
                      answer: tuple[ErrorCode, int, int]) -> None:
        if node.inflight != rid or node.fetch is not fs:
            return
        node.inflight = 0
        before = fs.partition.log.log_end_offset
        fs.on_epoch_response(answer[0], answer[1], answer[2], self.now,
                             CONFIG.replica_fetch_backoff_ms)
        after = fs.partition.log.log_end_offset
        if after < before:
            self.say(f"node {node.id} truncates {before} -> {after}")

    def _fetch_answer(self, node: Node, fs: FollowerFetchState, rid: int, offset: int,
                      resp: Any) -> None:
        if node.inflight != rid or node.fetch is not fs:
            return
        node.inflight = 0
        if resp is None or fs.state != FETCHING or fs.partition.log.log_end_offset != offset:
            return
        n = fs.on_fetch_response(ErrorCode(resp.error_code), resp.high_watermark,
                                 resp.log_start_offset, resp.records, self.now,
                                 CONFIG.replica_fetch_backoff_ms)
        if not n:
            node.next_fetch_at = self.now + 10  # replica.fetch.wait.max.ms, shortened

    # --- clients -------------------------------------------------------------

    def produce_tick(self) -> None:
        if self.calm:
            return
        self.at(self.rng.randint(2, 12), self.produce_tick)
        target = self.ctl.leader
        if target < 0:
            return
        if self.rng.random() < 0.3:
            self.idempotent_tick(target)
            return
        self.values += 1
        value = b"v%d" % self.values
        count = self.rng.randint(1, 3)
        acks = -1 if self.rng.random() < 0.7 else 1
        raw = build_batch([Record(-1, BASE_TS + self.now, None, value)] * count)
        node = self.nodes[target]
        self.send(CONTROLLER, target, lambda: self._produce_at(node, raw, acks, value))

    def txn_tick(self) -> None:
        self.at(self.rng.randint(5, 25), self.txn_tick)
        if self.now < self.txn_busy_until:
            return
        target = self.ctl.leader
        if self.txn_ending is None:
            if self.calm:
                if self.txn_open:
                    self.txn_ending = False  # end what is open: abort
                return
            if not self.txn_open:
                self.txn_open, self.txn_batches, self.txn_seq = True, 0, 0
            if self.txn_unacked:
                self.txn_ending = False  # a batch's fate is unknown: abort
                return
            if self.txn_batches >= 3 or self.rng.random() < 0.25:
                self.txn_ending = self.rng.random() < 0.6
                return
            if target < 0:
                return
            self.txn_batches += 1
            self.values += 1
            value = b"x%d" % self.values
            count = self.rng.randint(1, 2)
            raw = build_batch([Record(-1, BASE_TS + self.now, None, value)] * count,
                              producer_id=TXN_PRODUCER_ID, producer_epoch=self.txn_epoch,
                              base_sequence=self.txn_seq, transactional=True)
            epoch, seq = self.txn_epoch, self.txn_seq
            self.txn_busy_until = self.now + 80  # not acknowledged by then: abort
            self.txn_unacked = True

            def acked() -> None:
                if self.txn_epoch == epoch and self.txn_seq == seq and self.txn_unacked:
                    self.txn_seq += count
                    self.txn_unacked = False
                    self.txn_busy_until = self.now

            node = self.nodes[target]

            def at_leader() -> None:
                part = self.part(node)
                if part is not None and part.is_leader and self.txn_epoch == epoch \
                        and self.txn_ending is None:
                    # AddPartitionsToTxn's verification (KIP-890): only while it is open
                    part.log.producer_state.mark_verified(TXN_PRODUCER_ID, epoch)
                self._produce_at(node, raw, -1, value, acked)

            self.send(CONTROLLER, target, at_leader)
            return
        if target < 0:
            return
        commit = self.txn_ending and self.txn_seq > 0
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        marker = build_control_batch(kind, TXN_PRODUCER_ID, self.txn_epoch + 1,
                                     timestamp=BASE_TS + self.now)
        epoch = self.txn_epoch
        self.txn_busy_until = self.now + 80
        node = self.nodes[target]

        def done(errors: list[ErrorCode]) -> None:
            if errors[0] == ErrorCode.none and self.txn_epoch == epoch and \
                    self.txn_ending is not None:
                self.txn_ending, self.txn_open, self.txn_unacked = None, False, False
                self.txn_epoch += 1
                self.txns_done += 1
                self.txn_busy_until = self.now

        def write_marker() -> None:
            part = self.part(node)
            if part is None or not part.is_leader or node.rm is None:
                return
            view = memoryview(marker)
            info = part.append(view, BatchHeader.parse(view), None)
            node.rm.delay_produce([(part, info.last_offset + 1, part.leader_epoch)], 10**9,
                                  done)

        self.send(CONTROLLER, target, write_marker)

    def idempotent_tick(self, target: int) -> None:
        if self.inflight is None:
            self.values += 1
            value = b"i%d" % self.values
            count = self.rng.randint(1, 3)
            raw = build_batch([Record(-1, BASE_TS + self.now, None, value)] * count,
                              producer_id=PRODUCER_ID, producer_epoch=0,
                              base_sequence=self.seq)
            self.inflight = (raw, self.seq, count, value)
        elif self.now - self.inflight_sent < 60:
            return  # wait for the answer before retrying
        raw, seq, count, value = self.inflight
        self.inflight_sent = self.now
        node = self.nodes[target]

        def acked() -> None:
            if self.inflight is not None and self.inflight[1] == seq:
                self.seq += count
                self.inflight = None

        self.send(CONTROLLER, target, lambda: self._produce_at(node, raw, -1, value, acked))

    def _produce_at(self, node: Node, raw: bytes, acks: int, value: bytes,
                    on_ack: Callable[[], None] | None = None) -> None:
        part = self.part(node)
        rm = node.rm
        if part is None or rm is None:
            return
        leo = part.log_end_offset
        r = rm.append_to(part, memoryview(raw), acks, 9)
        if r.error == ErrorCode.not_enough_replicas and part.log_end_offset != leo:
            raise InvariantBroken("NOT_ENOUGH_REPLICAS but the batch was appended")
        if r.error != ErrorCode.none or acks != -1:
            return
        epoch = part.leader_epoch
        first = r.base_offset

        def done(errors: list[ErrorCode]) -> None:
            if errors[0] == ErrorCode.none:
                if part.high_watermark <= r.last_offset:
                    raise InvariantBroken("acks=all answered below the HW")
                self.acked.append(Acked(first, value, epoch))
                if on_ack is not None:
                    on_ack()

        result = rm.delay_produce([(part, r.last_offset + 1, epoch)], 10**9, done)
        if not isinstance(result, asyncio.Future):
            return

    # --- faults --------------------------------------------------------------

    async def fault_tick(self) -> None:
        if self.calm:
            return
        self.at(self.rng.randint(20, 120), self.fault_tick)
        r = self.rng.random()
        down = [n for n in self.nodes.values() if n.down or n.isolated_until > self.now]
        live = [n for n in self.nodes.values() if not n.down]
        if r < 0.35:
            node = self.rng.choice(live)
            if node.rm is not None:
                await asyncio.to_thread(node.rm.checkpoint)  # flush + HW checkpoint
        elif r < 0.5 and not down:
            node = self.rng.choice(live)
            last_isr = self.ctl.isr == [node.id]
            lose = self.rng.random() < 0.5 and not last_isr
            await self.crash(node, lose)
            self.at(self.rng.randint(50, 400), lambda node=node: self.restart(node))
        elif r < 0.6 and not down:
            node = self.rng.choice(live)
            until = self.now + self.rng.randint(30, 400)
            node.isolated_until = until
            self.say(f"isolate node {node.id} until {until}")
            # its heartbeats stop: fenced after a session timeout
            self.at(self.rng.randint(20, 60), lambda node=node: self._fence_isolated(node))
            self.at(until - self.now, lambda node=node: self._heal(node))
        elif r < 0.78:
            a, b = self.rng.sample(NODES, 2)
            link = frozenset((a, b))
            self.cut.add(link)
            self.say(f"cut the link {a}-{b}")
            self.at(self.rng.randint(50, 500), lambda: self.cut.discard(link))
        elif r < 0.85:
            c = self.ctl
            others = [x for x in c.isr if x not in c.fenced and x != c.leader]
            if others and c.leader >= 0:
                prefer = self.rng.choice(others)
                self.say(f"leadership moves to {prefer}")
                self.elect(prefer)

    def _fence_isolated(self, node: Node) -> None:
        if node.isolated_until > self.now:
            self.fence(node.id)

    def _heal(self, node: Node) -> None:
        if node.down:
            return
        self.say(f"heal node {node.id}")
        node.isolated_until = -1
        if node.id in self.ctl.fenced:
            self.unfence(node.id)
        else:
            self.publish()

    async def restart(self, node: Node) -> None:
        if not node.down:
            return  # already back (the calm restarted it)
        self.say(f"restart node {node.id}")
        await self.start_node(node)
        self.unfence(node.id)

    # --- invariants ----------------------------------------------------------

    def check(self) -> None:
        for node in self.nodes.values():
            part = self.part(node)
            if part is None:
                continue
            hw = part.high_watermark
            if hw < node.last_hw:
                raise InvariantBroken(f"node {node.id}: HW went back {node.last_hw} -> {hw}")
            node.last_hw = hw
            if hw > node.checked_to:
                self._compare_committed(node, part, hw)
            if part.is_leader:
                self._check_acked(node, part)

    def _compare_committed(self, node: Node, part: Any, hw: int) -> None:
        log = part.log
        offset = node.checked_to
        while offset < hw:
            res = log.read(offset, 1 << 20, max_offset=hw)
            if res.region is None:
                break
            for h, _ in iter_batches(log.read_bytes(res.region)):
                entry = (h.base_offset, h.base_offset + h.last_offset_delta, h.crc)
                i = self._committed_index(h.base_offset)
                if i < len(self.committed):
                    if self.committed[i] != entry:
                        raise InvariantBroken(
                            f"node {node.id}: batch {entry} below HW {hw} differs from the "
                            f"committed {self.committed[i]}")
                else:
                    if self.committed and self.committed[-1][1] + 1 != entry[0]:
                        raise InvariantBroken(f"node {node.id}: gap before {entry}")
                    self.committed.append(entry)
                offset = entry[1] + 1
        node.checked_to = offset

    def _committed_index(self, base: int) -> int:
        lo, hi = 0, len(self.committed)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.committed[mid][0] < base:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _check_acked(self, node: Node, part: Any) -> None:
        epoch = part.leader_epoch
        inc, ep, done = node.verified
        if (inc, ep) != (node.incarnation, epoch):
            done = 0
        log = part.log
        for a in self.acked[done:]:
            if a.epoch > epoch:
                continue
            if a.offset >= log.log_end_offset:
                raise InvariantBroken(f"leader {node.id} of epoch {epoch} lacks acknowledged "
                                      f"offset {a.offset} ({a.value!r}, epoch {a.epoch})")
            res = log.read(a.offset, 1)
            found = False
            if res.region is not None:
                data = log.read_bytes(res.region)
                for h, b in iter_batches(data):
                    for rec in decode_records(h, b):
                        if rec.offset == a.offset:
                            found = rec.value == a.value
                    break
            if not found:
                raise InvariantBroken(f"leader {node.id} of epoch {epoch} has another record "
                                      f"at acknowledged offset {a.offset} ({a.value!r})")
        node.verified = (node.incarnation, epoch, len(self.acked))

    # --- the run -------------------------------------------------------------

    async def run(self) -> dict[str, int]:
        for node in self.nodes.values():
            await self.start_node(node)
            self.at(node.id, lambda node=node: self.fetch_tick(node))
            self.at(25 + node.id, lambda node=node: self.shrink_tick(node))
        self.at(1, self.produce_tick)
        self.at(3, self.txn_tick)
        self.at(30, self.fault_tick)
        self.at(self.chaos_ms, self.calm_down)
        end = self.chaos_ms + self.calm_ms
        while self._queue and self.now <= end:
            when, _, fn = heapq.heappop(self._queue)
            self.now = when
            out = fn()
            if asyncio.iscoroutine(out):
                await out
            for _ in range(3):
                await asyncio.sleep(0)  # AlterPartition tasks, purgatory completions
            self.steps += 1
            self.check()
        self.final_check()
        for node in self.nodes.values():
            if node.rm is not None:
                await node.rm.stop()
                node.rm.log_manager.close()
        return {"steps": self.steps, "acked": len(self.acked), "values": self.values,
                "txns": self.txns_done, "isr_changes": self.isr_changes,
                "epoch": self.ctl.epoch, "committed": len(self.committed)}

    def shrink_tick(self, node: Node) -> None:
        self.at(50, lambda: self.shrink_tick(node))
        if node.rm is not None and not node.down:
            node.rm.maybe_shrink_isrs(self.now)

    async def calm_down(self) -> None:
        self.say("calm: the network heals, clients stop")
        self.calm = True
        self.cut.clear()
        for node in self.nodes.values():
            if node.down:
                await self.restart(node)
            elif node.isolated_until > self.now:
                node.isolated_until = -1
                if node.id in self.ctl.fenced:
                    self.unfence(node.id)
        self.publish()

    def final_check(self) -> None:
        parts = {n: self.part(node) for n, node in self.nodes.items()}
        leader = parts.get(self.ctl.leader)
        if leader is None or not leader.is_leader:
            raise InvariantBroken(f"no leader at the end (controller says {self.ctl.leader})")
        want = leader.log.log_end_offset
        for n, part in parts.items():
            if part is None or part.log.log_end_offset != want or part.high_watermark != want:
                got = None if part is None else (part.log.log_end_offset, part.high_watermark)
                raise InvariantBroken(f"node {n} did not converge: (LEO, HW) {got}, leader "
                                      f"LEO {want}")
        ref = _all_bytes(leader.log)
        for n, part in parts.items():
            if _all_bytes(part.log) != ref:
                raise InvariantBroken(f"node {n}'s log differs from the leader's")
        self._check_acked(self.nodes[self.ctl.leader], leader)
        # the idempotent producer's batches: each sequence exactly once, in order, up to
        # at least everything acknowledged (a follower turned leader continued them)
        expected = 0
        for h, _ in iter_batches(ref):
            if h.producer_id == PRODUCER_ID:
                if h.base_sequence != expected:
                    raise InvariantBroken(f"idempotent batch at offset {h.base_offset} has "
                                          f"sequence {h.base_sequence}, expected {expected}")
                expected += h.last_offset_delta + 1
        if expected < self.seq:
            raise InvariantBroken(f"acknowledged idempotent sequences up to {self.seq}, the log "
                                  f"has {expected}")
        # transactions: every one ended; the markers and the aborted-transaction index
        # are the same on every replica, and nothing is left open (LSO = HW)
        if self.txn_open or self.txn_ending is not None:
            raise InvariantBroken("the last transaction never ended")
        aborted = leader.aborted_transactions(0, want)
        for n, part in parts.items():
            if part.last_stable_offset != part.high_watermark:
                raise InvariantBroken(f"node {n}: LSO {part.last_stable_offset} below HW "
                                      f"{part.high_watermark} with no transaction open")
            if part.aborted_transactions(0, want) != aborted:
                raise InvariantBroken(f"node {n}: aborted transactions "
                                      f"{part.aborted_transactions(0, want)} != the leader's "
                                      f"{aborted}")


def _all_bytes(log: Any) -> bytes:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        res = log.read(offset, 1 << 20)
        if res.region is None:
            break
        data = log.read_bytes(res.region)
        out.append(data)
        last = None
        for h, _ in iter_batches(data):
            last = h
        assert last is not None
        offset = last.base_offset + last.last_offset_delta + 1
    return b"".join(out)


def run_seed(seed: int, verbose: bool = False, **kw: Any) -> dict[str, int]:
    # fsync is most of a seed's time on a disk; tmpfs when there is one
    shm = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(prefix=f"odradek-sim-{seed}-",
                                 dir=shm if shm.is_dir() else None))
    try:
        return asyncio.run(Sim(seed, root, verbose, **kw).run())
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _seeds(spec: str) -> range:
    if ":" in spec:
        a, b = spec.split(":")
        return range(int(a), int(b))
    return range(int(spec), int(spec) + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0:1000", help="N or A:B (half-open)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    failed = 0
    seeds = _seeds(args.seeds)
    for seed in seeds:
        try:
            stats = run_seed(seed, args.verbose)
        except Exception as exc:
            failed += 1
            print(f"seed {seed} FAILED: {type(exc).__name__}: {exc}")
            print(f"  replay: python -m tests.unit.replication.sim --seeds {seed} -v")
            continue
        if args.verbose or seed % 100 == 0:
            print(f"seed {seed}: {stats}")
    print(f"{len(seeds) - failed}/{len(seeds)} seeds passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
