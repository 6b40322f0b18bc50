"""`KRaftQuorum`: the metadata quorum of a node, the sans-I/O `RaftClient` driven on asyncio.

- The log is `FileRaftLog` at `<data-dir>/__cluster_metadata-0/` (Kafka's batches, snapshots),
  the election state `quorum-state` (`FileQuorumStateStore`), and issue 22's commit marker
  `quorum-commit`, which holds the highest high watermark this node has seen: at start the log
  is recovered with it as a floor (damage below it stops the node, `MetadataLogDamaged`; a torn
  tail past it is cut).
- Timers: one task calls `client.poll(now)` at the deadline it asks for, or sooner when a
  message arrived. Outgoing requests go over `Channels` to the voters' controller listener;
  their answers are handed back to the client. Incoming requests come from the controller
  listener's handlers (`broker/handlers/raft.py`) through `handle_request`, which waits for
  the client's answer (a Fetch may be held: the leader's long poll).
- After every step: the marker follows the high watermark, commit listeners get the batches
  now committed (the snapshot first when one was loaded), appends waiting for those offsets
  return, leadership listeners hear a change, and a snapshot is written when
  `metadata.log.max.record.bytes.between.snapshots` bytes were committed since the last one
  (or `metadata.log.max.snapshot.interval.ms` passed) and a snapshot source is set.

`append` blocks its (worker) thread until the batch is committed and every commit listener ran
on the loop. Before `start()` (and in tests without a loop) a single-voter quorum runs
synchronously in the caller's thread, listeners included.

Blocking on the loop, knowingly: the log's fsync after an append or a fetched batch, and the
marker's fdatasync on a commit. Metadata batches are few and small; moving them to a thread
would reorder them against the client's state (what Kafka's raft IO thread avoids by being one
thread).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from odradek.metadata.quorum import (
    COMMIT_MARKER,
    METADATA_LOG_DIR,
    Apply,
    CommitListener,
    CommitMarker,
    LeadershipListener,
    MetadataLogDamaged,
    Quorum,
    QuorumDescription,
    ReplicaDescription,
    SnapshotLoaded,
)
from odradek.metadata.raft import messages as m
from odradek.metadata.raft.client import RaftClient, RaftConfig
from odradek.metadata.raft.file_log import FileRaftLog, metadata_log_config
from odradek.metadata.raft.log import SnapshotId
from odradek.metadata.raft.state import Leader, Role
from odradek.metadata.raft.store import FileQuorumStateStore
from odradek.metadata.raft.wire import request_entity, response_body
from odradek.metadata.records import MetadataRecord, decode_record, encode_record
from odradek.network import Channels
from odradek.network.channel import ChannelError
from odradek.protocol.errors import ErrorCode, KafkaError, ProtocolError
from odradek.protocol.records import decode_records, iter_batches
from odradek.storage.log import LogDamaged

__all__ = ["KRaftQuorum", "SnapshotSource"]

log = logging.getLogger(__name__)

SNAPSHOT_BYTES = 20 << 20  # metadata.log.max.record.bytes.between.snapshots
SNAPSHOT_INTERVAL_MS = 3_600_000  # metadata.log.max.snapshot.interval.ms

# fn() -> the metadata image as records, as of everything the commit listeners have heard
SnapshotSource = Any


def _mono_ms() -> int:
    return int(time.monotonic() * 1000)


class _Listener:
    __slots__ = ("cursor", "fn")

    def __init__(self, fn: CommitListener) -> None:
        self.fn = fn
        self.cursor = 0  # the next offset it has not heard


class KRaftQuorum(Quorum):
    def __init__(self, path: Path, node_id: int, voters: Mapping[int, tuple[str, int]],
                 raft_log: FileRaftLog, marker: CommitMarker, *, cluster_id: str | None,
                 config: RaftConfig, snapshot_bytes: int, snapshot_interval_ms: int) -> None:
        self.path = path
        self.node_id = node_id
        self.voter_addresses = dict(voters)
        self.cluster_id = cluster_id
        self.raft_log = raft_log
        self.marker = marker
        self.config = config
        self.snapshot_bytes = snapshot_bytes
        self.snapshot_interval_ms = snapshot_interval_ms
        self._wall_offset = int(time.time() * 1000) - _mono_ms()
        self.client = RaftClient(node_id, frozenset(voters), raft_log,
                                 FileQuorumStateStore(path), random.Random(), _mono_ms(), config)
        self._listeners: list[_Listener] = []
        self._leadership: list[LeadershipListener] = []
        self._told: tuple[bool, int] | None = None
        self._waiters: list[tuple[int, int, Any]] = []  # (offset, epoch, future or event box)
        self.commits = 0  # appends committed through _append, and their latency (metrics)
        self.commit_latency_sum_ms = 0.0
        self.commit_latency_max_ms = 0.0
        self._inbound: dict[int, asyncio.Future[m.Body]] = {}
        self._next_inbound = 0
        self._installed = self.client.snapshots_installed
        self._snapshot_source: SnapshotSource | None = None
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = _mono_ms()
        self._snapshotting = False
        self._snapshot_wanted = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._calls: set[asyncio.Future[None]] = set()
        self.channels: Channels | None = None
        # how the voters' controller listener is reached (network.ClientSecurity; None:
        # PLAINTEXT), set by the node before start
        self.channel_security: Any = None
        self._lock = threading.RLock()  # the synchronous mode (no loop) only
        self._closed = False
        self._after()

    # ---- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, data_dir: Path, node_id: int,
             voters: Mapping[int, tuple[str, int]] | None = None, *,
             cluster_id: str | None = None, config: RaftConfig | None = None,
             snapshot_bytes: int = SNAPSHOT_BYTES,
             snapshot_interval_ms: int = SNAPSHOT_INTERVAL_MS,
             segment_bytes: int = 1 << 30) -> KRaftQuorum:
        """Recover the metadata log (blocking: run it in a thread). `voters`: id -> (host,
        port) of each voter's controller listener; None makes this node the only voter."""
        path = Path(data_dir) / METADATA_LOG_DIR
        path.mkdir(parents=True, exist_ok=True)
        marker = CommitMarker(path / COMMIT_MARKER)
        has_marker = marker.load()
        floor = marker.end_offset if has_marker else None
        try:
            raft_log = FileRaftLog.open(path, floor, metadata_log_config(segment_bytes))
        except LogDamaged as exc:
            raise MetadataLogDamaged(
                f"metadata log damaged below its committed offset {floor}: {exc}. Nothing was "
                f"cut and no partition was touched. Restore {path} from a backup (or another "
                f"controller); `odradek storage verify --data-dir {data_dir}` lists the damage; "
                f"to start anyway, losing the metadata from offset {exc.offset} on, delete "
                f"{marker.path} (the node then cuts the log there and keeps unknown partition "
                f"directories as -stray)"
            ) from exc
        if not has_marker and raft_log.end_offset() > 0:
            log.warning("%s: no commit marker (%s); taking the recovered log, %d records, "
                        "as committed", path, COMMIT_MARKER, raft_log.end_offset())
        if voters is None:
            voters = {node_id: ("", 0)}
        return cls(path, node_id, voters, raft_log, marker, cluster_id=cluster_id,
                   config=config or RaftConfig(), snapshot_bytes=snapshot_bytes,
                   snapshot_interval_ms=snapshot_interval_ms)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        if set(self.voter_addresses) != {self.node_id}:
            self.channels = Channels(f"raft-{self.node_id}", self.voter_addresses.get,
                                     security=self.channel_security)
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if (self._task is not None and self.channels is not None
                and self.client.resign(self._now())):
            # a leader that stops says so (EndQuorumEpoch): the others elect at once instead
            # of after a fetch timeout; the answers are not waited for beyond a moment
            self._step_now()
            calls = [c for c in self._calls if not c.done()]
            if calls:
                await asyncio.wait(calls, timeout=self.config.request_timeout_ms / 4000)
        task, self._task = self._task, None
        if task is not None:
            if self._wake is not None:
                self._wake.set()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                # the task had died on its own (logged where it failed): the rest of the stop
                # still runs, so no waiter and no channel is left behind
                log.warning("metadata quorum: its task had failed; stopping the rest")
        for fut in list(self._calls):
            fut.cancel()
        for fut in self._inbound.values():
            if not fut.done():
                fut.cancel()
        self._inbound.clear()
        self._fail_waiters(KafkaError(ErrorCode.not_controller, "the quorum is stopping"))
        if self.channels is not None:
            await self.channels.close()
        self._loop = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._fail_waiters(KafkaError(ErrorCode.not_controller, "the quorum is closed"))
        self.raft_log.close()
        self.marker.close()

    # ---- the Quorum interface ------------------------------------------------------------------

    @property
    def leader_id(self) -> int | None:
        return self.client.leader_id

    @property
    def leader_epoch(self) -> int:
        return self.client.epoch

    @property
    def voters(self) -> list[int]:
        return sorted(self.voter_addresses)

    @property
    def is_leader(self) -> bool:
        st = self.client.state
        return isinstance(st, Leader) and self._heard_end() > st.epoch_start_offset

    @property
    def high_watermark(self) -> int:
        return max(self.client.high_watermark, self.marker.end_offset)

    @property
    def commit_offset(self) -> int:
        return self.high_watermark - 1

    @property
    def end_offset(self) -> int:
        return self.raft_log.end_offset()

    def add_commit_listener(self, fn: CommitListener) -> None:
        self._listeners.append(_Listener(fn))
        self._poke()

    def add_leadership_listener(self, fn: LeadershipListener) -> None:
        self._leadership.append(fn)
        self._told = None  # tell the newcomer (and the others, again) the current state
        self._poke()

    def set_snapshot_source(self, fn: SnapshotSource) -> None:
        """fn() -> the image as metadata records, as of what the commit listeners heard."""
        self._snapshot_source = fn

    def request_snapshot(self) -> None:
        """Write a snapshot at the next chance (all listeners caught up), whatever its size."""
        self._snapshot_wanted = True
        self._poke()

    def append(self, records: Sequence[MetadataRecord]) -> int:
        if not records:
            raise ValueError("nothing to append")
        loop = self._loop
        if loop is None:
            with self._lock:
                return self._append_sync(records)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            if set(self.voter_addresses) == {self.node_id}:
                # the only voter commits as it appends: nothing to wait for (today's
                # InitProducerId allocates a producer-id block on the loop)
                return self._append_sync(records)
            raise RuntimeError("Quorum.append blocks: call it from a worker thread")
        return asyncio.run_coroutine_threadsafe(self._append(records), loop).result()

    def _propose(self, records: Sequence[MetadataRecord]) -> tuple[int, int]:
        if not self.is_leader:
            leader = self.client.leader_id
            raise KafkaError(ErrorCode.not_controller,
                             f"node {self.node_id} is not the active controller"
                             + (f" (node {leader} is)" if leader is not None else ""))
        offset = self.client.propose([encode_record(r) for r in records], self._now())
        assert offset is not None
        return offset, self.client.epoch

    def _append_sync(self, records: Sequence[MetadataRecord]) -> int:
        offset, _ = self._propose(records)
        self._step()
        if self._heard_end() <= offset:
            raise KafkaError(ErrorCode.not_controller, "not committed: no loop drives the quorum")
        return offset

    async def _append(self, records: Sequence[MetadataRecord]) -> int:
        began = time.monotonic()
        offset, epoch = self._propose(records)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, epoch, fut))
        self._step_now()
        committed = await fut
        # raft-metrics commit-latency-avg/max: proposed to committed, as Kafka's leader sees it
        took_ms = (time.monotonic() - began) * 1000
        self.commits += 1
        self.commit_latency_sum_ms += took_ms
        self.commit_latency_max_ms = max(self.commit_latency_max_ms, took_ms)
        return committed

    def replay(self, apply: Apply, from_offset: int = 0) -> int:
        offset = from_offset
        snap = self.raft_log.latest_snapshot()
        if snap is not None and offset < snap.end_offset:
            for record in self.raft_log.snapshots.load(snap):
                apply(snap.end_offset - 1, record)
            offset = snap.end_offset
        offset = max(offset, self.raft_log.start_offset())
        end = self.high_watermark
        while offset < end:
            progressed = False
            for header, batch in iter_batches(self.raft_log.read(offset), strict=True):
                if header.base_offset >= end:
                    break
                if not header.is_control:
                    for rec in decode_records(header, batch):
                        if rec.offset >= offset and rec.value is not None:
                            apply(rec.offset, decode_record(rec.value))
                offset = header.last_offset + 1
                progressed = True
            if not progressed:
                break
        return offset

    def describe(self) -> QuorumDescription:
        st = self.client.state
        now = self._now()
        wall = self._wall

        def desc(rid: int, p: Any) -> ReplicaDescription:
            return ReplicaDescription(rid, p.end_offset, wall(p.last_fetch_ms),
                                      wall(p.last_caught_up_ms))

        if isinstance(st, Leader):
            me = ReplicaDescription(self.node_id, self.end_offset, wall(now), wall(now))
            voters = [me] + [desc(v, p) for v, p in sorted(st.replicas.items())]
            observers = [desc(o, p) for o, p in sorted(st.observers.items())]
        else:
            voters = [ReplicaDescription(v, -1) for v in self.voters]
            observers = []
        leader = self.client.leader_id
        return QuorumDescription(-1 if leader is None else leader, self.client.epoch,
                                 self.client.high_watermark, tuple(voters), tuple(observers),
                                 isinstance(st, Leader))

    # ---- incoming requests (the controller listener's handlers) -----------------------------

    async def handle_request(self, src: int, body: m.Body) -> m.Body:
        """Hand a request received from `src` to the client; its answer (a Fetch may wait
        for the leader's long poll)."""
        loop = asyncio.get_running_loop()
        self._next_inbound -= 1  # our own requests' ids are positive: never the same
        cid = self._next_inbound
        fut: asyncio.Future[m.Body] = loop.create_future()
        self._inbound[cid] = fut
        try:
            self.client.handle(m.Message(src, self.node_id, cid, body), self._now())
            self._step_now()
            return await fut
        finally:
            self._inbound.pop(cid, None)

    # ---- the driver --------------------------------------------------------------------------

    def _now(self) -> int:
        return _mono_ms()

    def _wall(self, mono: int | None) -> int:
        return -1 if mono is None else mono + self._wall_offset

    def _poke(self) -> None:
        if self._loop is None:
            with self._lock:
                self._after()
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            # at once: a listener added on the loop has heard the history when this returns
            # (and this node, if it leads, may append again right away)
            self._step_now()
        elif self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        try:
            await self._drive()
        except Exception as exc:
            # nothing commits any more: an append waiting for its commit (a controller call in
            # a worker thread, holding the controller's lock) must hear it now, or every
            # controller call and then the node's shutdown waits behind it (finding 11)
            self._fail_waiters(KafkaError(ErrorCode.not_controller,
                                          f"the metadata quorum failed: {exc}"))
            raise

    async def _drive(self) -> None:
        wake, loop = self._wake, self._loop
        assert wake is not None and loop is not None
        while self._task is not None:
            deadline = self._step()
            delay = max(0.0, (deadline - self._now()) / 1000)
            wake.clear()
            # a timer and an Event, not asyncio.wait_for: on 3.11 wait_for can swallow a
            # cancel that races with the event being set, and the task would never stop
            timer = loop.call_later(min(delay, 1.0), wake.set)
            try:
                await wake.wait()
            finally:
                timer.cancel()

    def _step(self) -> int:
        """Poll the client, send what it says, deliver what is committed; its next deadline."""
        try:
            out, deadline = self.client.poll(self._now())
            self._dispatch(out)
            self._after()
        except Exception:
            log.exception("metadata quorum step failed")
            raise
        return deadline

    def _step_now(self) -> None:
        """A step outside the timer task (a message arrived): the task re-reads its deadline."""
        self._step()
        if self._wake is not None:
            self._wake.set()

    def _dispatch(self, out: list[m.Message]) -> None:
        for msg in out:
            fut = self._inbound.get(msg.correlation_id) if msg.correlation_id < 0 else None
            if fut is not None:
                if not fut.done():
                    fut.set_result(msg.body)
            elif msg.correlation_id > 0 and self.channels is not None and self._loop is not None:
                call = asyncio.ensure_future(self._call(msg))
                self._calls.add(call)
                call.add_done_callback(self._calls.discard)

    async def _call(self, msg: m.Message) -> None:
        assert self.channels is not None
        timeout = self.config.request_timeout_ms / 1000
        try:
            entity = request_entity(msg.body, msg.dst, self.cluster_id)
            resp = await self.channels.request(msg.dst, entity, timeout)
            body = response_body(msg.body, resp)
        except (ChannelError, ProtocolError, OSError, TimeoutError) as exc:
            log.debug("raft request to %d failed: %s", msg.dst, exc)
            body = self._failed(msg.body)
            if body is None:
                return
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        if self._task is None:
            return  # stopped meanwhile
        self.client.handle(m.Message(msg.dst, self.node_id, msg.correlation_id, body),
                           self._now())
        self._step_now()

    def _failed(self, req: m.Body) -> m.Body | None:
        """A fetch that could not be sent comes back as an error, so the follower asks again
        after its back-off instead of its request timeout; other requests are just lost."""
        if isinstance(req, m.FetchRequest):
            return m.FetchResponse(m.NOT_LEADER_OR_FOLLOWER, req.current_leader_epoch, None, -1)
        if isinstance(req, m.FetchSnapshotRequest):
            return m.FetchSnapshotResponse(m.NOT_LEADER_OR_FOLLOWER, req.current_leader_epoch,
                                           None, req.snapshot_id)
        return None

    # ---- after every step: marker, listeners, waiters, leadership, snapshots ----------------

    def _heard_end(self) -> int:
        """Every listener has heard everything below this offset."""
        hw = self.client.high_watermark
        if not self._listeners:
            return hw
        return min(min(lst.cursor for lst in self._listeners), hw)

    def _after(self) -> None:
        hw = self.client.high_watermark
        if hw > self.marker.end_offset:
            # the floor recovery never cuts below: what we have seen committed is flushed
            self.marker.write(hw, self.client.epoch)
        if self.client.snapshots_installed != self._installed:
            self._installed = self.client.snapshots_installed
            self._bytes_since_snapshot = 0
        self._deliver(hw)
        heard = self._heard_end()
        role, epoch = self.client.role, self.client.epoch
        keep = []
        for offset, wepoch, fut in self._waiters:
            if fut.done():
                continue
            if heard > offset:
                fut.set_result(offset)
            elif wepoch != epoch or role is not Role.LEADER:
                fut.set_exception(KafkaError(
                    ErrorCode.not_controller, f"leadership of epoch {wepoch} lost before commit"))
            else:
                keep.append((offset, wepoch, fut))
        self._waiters = keep
        now_told = (self.is_leader, epoch)
        if now_told != self._told:
            self._told = now_told
            if now_told[0]:  # one line per won election: the fault checker reads it (issue 15)
                log.info("raft: node %d became leader of epoch %d", self.node_id, epoch)
            for fn in list(self._leadership):
                try:
                    fn(*now_told)
                except Exception:
                    log.exception("leadership listener %r failed", fn)
        self._maybe_snapshot()

    def _deliver(self, hw: int) -> None:
        snap = self.raft_log.latest_snapshot()
        start_offset = self.raft_log.start_offset()
        for lst in self._listeners:
            if snap is not None and lst.cursor < start_offset and lst.cursor < snap.end_offset:
                # what it has not heard is only in the snapshot: the image starts over from it
                records = tuple(self.raft_log.snapshots.load(snap))
                self._tell(lst, [(snap.end_offset - 1,
                                  SnapshotLoaded(snap.end_offset, snap.epoch, records))])
                lst.cursor = snap.end_offset
        if not self._listeners:
            return
        start = min(lst.cursor for lst in self._listeners)
        while start < hw:
            data = self.raft_log.read(start)
            moved = False
            for header, batch in iter_batches(data):
                if header.base_offset >= hw:
                    break
                end = header.last_offset + 1
                moved = True
                if min(lst.cursor for lst in self._listeners) <= header.base_offset:
                    self._bytes_since_snapshot += len(batch)
                items: list[tuple[int, Any]] = []
                if not header.is_control:
                    items = [(r.offset, decode_record(r.value))
                             for r in decode_records(header, batch) if r.value is not None]
                for lst in self._listeners:
                    if lst.cursor <= header.base_offset:
                        if items:
                            self._tell(lst, items)
                        lst.cursor = end
                start = end
            if not moved:
                break

    def _tell(self, lst: _Listener, batch: list[tuple[int, Any]]) -> None:
        try:
            lst.fn(batch)
        except Exception:  # a listener's bug must not stop the quorum
            log.exception("commit listener %r failed at offset %d", lst.fn, batch[0][0])

    def _maybe_snapshot(self) -> None:
        source = self._snapshot_source
        if source is None or self._snapshotting or self._loop is None:
            return
        hw = self.client.high_watermark
        snap = self.raft_log.latest_snapshot()
        if hw <= (snap.end_offset if snap is not None else 0) or self._heard_end() < hw:
            return
        due = (self._snapshot_wanted or self._bytes_since_snapshot >= self.snapshot_bytes
               or (self._bytes_since_snapshot > 0 and self.snapshot_interval_ms > 0  # 0: off
                   and self._now() - self._last_snapshot_ms >= self.snapshot_interval_ms))
        if not due:
            return
        epoch = self.raft_log.epoch_at(hw - 1)
        if epoch is None:
            return
        sid = SnapshotId(hw, epoch)
        try:
            records = list(source())
        except Exception:
            log.exception("snapshot source failed")
            return
        self._snapshotting = True
        self._snapshot_wanted = False
        task = asyncio.ensure_future(self._write_snapshot(sid, records))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _write_snapshot(self, sid: SnapshotId, records: list[MetadataRecord]) -> None:
        try:
            await asyncio.to_thread(self.raft_log.snapshots.write, sid, records,
                                    self._wall(self._now()))
            self.raft_log.snapshot_taken(sid)
            self._bytes_since_snapshot = 0
            self._last_snapshot_ms = self._now()
            log.info("metadata snapshot %s written (%d records)", sid, len(records))
        except Exception:
            log.exception("writing metadata snapshot %s failed", sid)
        finally:
            self._snapshotting = False

    def _fail_waiters(self, exc: Exception) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            if not fut.done():
                fut.set_exception(exc)
