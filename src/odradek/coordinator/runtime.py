"""The coordinator runtime (Kafka's CoordinatorRuntime): what the group and the transaction
coordinator share.

- Ownership of internal-topic partitions. A coordinator serves the keys (group ids,
  transactional ids) of the partitions of its topic this node leads and has replayed.
  `on_become_leader(topic, partition, epoch)` marks the partition loading (requests get
  COORDINATOR_LOAD_IN_PROGRESS), replays it in a thread and then owns it;
  `on_resign(topic, partition, epoch)` drops its state and timers (requests get
  NOT_COORDINATOR). Epochs order the two as Kafka does: an event older than the last one
  seen for the partition is ignored.
- Writes of coordinator records (page-cache appends through the replica manager, the only
  disk work on the event loop) and the replay of a partition's committed batches.
- Internal-topic creation (`ensure_internal_topic`).
- One scheduler for every timer: periodic jobs (session sweeps, offset expiry, transaction
  timeouts, producer-id expiry) and one-shot timers tied to a partition, cancelled when
  the partition is unloaded.

A coordinator plugs in as a `CoordinatorShard`: it replays one partition's records into
memory, forgets one partition's state, and may act once a partition is loaded.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from odradek.metadata.controller_requests import CreatableTopic
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import BatchHeader, Record, build_batch, iter_batches

log = logging.getLogger(__name__)

E = ErrorCode
REPLAY_CHUNK_BYTES = 4 * 1024 * 1024
# a partition never led here: any leader epoch of a real election is newer
NO_EPOCH = -1
# how long a request's coordinator writes may wait for the ISR (Kafka's
# offsets.commit.timeout.ms default); then the request fails instead of being acknowledged
WRITE_TIMEOUT_MS = 5000

# (partition, offset the HW must reach, leader epoch of the write) of the coordinator writes
# made while one request is handled (`CoordinatorRuntime.durably`): its answer waits for
# them; and futures a coordinator resolves once it has acted on a write's commit (its
# error code: NONE, or why the write is lost), which the answer waits for too
_WRITES: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "coordinator_writes", default=None)


class _Soon:
    """A future a request's answer waits for without depending on it (`note_soon`)."""

    __slots__ = ("done",)

    def __init__(self, done: asyncio.Future[Any]) -> None:
        self.done = done


class WriteNotReplicated(Exception):
    """A coordinator write of the request did not reach the ISR (leadership moved, or the
    timeout passed): the request must not be acknowledged. `code` is what Kafka's
    coordinators answer then: NOT_COORDINATOR when the partition is no longer led here,
    COORDINATOR_NOT_AVAILABLE when it is but the ISR did not take the write."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.coordinator_not_available
                 ) -> None:
        super().__init__(message)
        self.code = code


def _note_write(part: Any, last_offset: int) -> None:
    writes = _WRITES.get()
    if writes is not None and not part.solo:
        writes.append((part, last_offset + 1, part.leader_epoch))


class CoordinatorShard(Protocol):
    """What a coordinator gives the runtime for the partitions of its internal topic."""

    def replay_partition(self, partition: int) -> int:
        """Read the partition's records into memory; how many. Blocking (runs in a thread
        when a partition is loaded while the node serves)."""
        ...

    def unload_partition(self, partition: int) -> None:
        """Forget every key of the partition (Kafka's onResignation)."""
        ...

    def partition_loaded(self, partition: int) -> None:
        """On the loop, once the partition is owned: finish what its replay found undone."""
        ...


# --------------------------------------------------------------------------- timers


class Timer:
    """A one-shot timer of the scheduler; `cancel()` is safe at any time."""

    __slots__ = ("_handle", "_owner", "key")

    def __init__(self, owner: Scheduler, key: Any) -> None:
        self._owner = owner
        self.key = key
        self._handle: asyncio.TimerHandle | None = None

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._owner._forget(self)

    def cancelled(self) -> bool:
        return self._handle is None


class Scheduler:
    """Every coordinator timer of the node: periodic jobs by name, and one-shot timers keyed
    by the (topic, partition) whose state they act on, so an unload cancels them at once."""

    def __init__(self) -> None:
        self._jobs: dict[str, tuple[float, float, Callable[[], Any]]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._timers: dict[Any, set[Timer]] = {}
        self.running = False

    # periodic jobs

    def every(self, name: str, interval_s: float, job: Callable[[], Any],
              first_delay_s: float | None = None) -> None:
        """Run `job()` every `interval_s` seconds, the first time after `first_delay_s`
        (default: one interval), replacing a job of that name; exceptions are logged, the
        job keeps running."""
        self.cancel_job(name)
        interval = max(0.01, interval_s)
        self._jobs[name] = (interval, interval if first_delay_s is None else first_delay_s, job)
        if self.running:
            self._start_job(name)

    def cancel_job(self, name: str) -> None:
        self._jobs.pop(name, None)
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()

    def jobs(self) -> list[str]:
        return sorted(self._jobs)

    def _start_job(self, name: str) -> None:
        interval, first, job = self._jobs[name]
        self._tasks[name] = asyncio.ensure_future(self._run_job(name, interval, first, job))

    @staticmethod
    async def _run_job(name: str, interval: float, first: float, job: Callable[[], Any]) -> None:
        delay = first
        while True:
            await asyncio.sleep(delay)
            delay = interval
            try:
                job()
            except Exception:
                log.exception("coordinator timer %s failed", name)

    # one-shot timers

    def call_later(self, key: Any, delay_s: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """`fn(*args)` after `delay_s` seconds on the loop, unless cancelled (by hand or by
        `cancel_all(key)`)."""
        timer = Timer(self, key)

        def fire() -> None:
            timer._handle = None
            self._forget(timer)
            fn(*args)

        timer._handle = asyncio.get_running_loop().call_later(max(0.0, delay_s), fire)
        self._timers.setdefault(key, set()).add(timer)
        return timer

    def pending(self, key: Any) -> int:
        return len(self._timers.get(key, ()))

    def cancel_all(self, key: Any) -> int:
        timers = self._timers.pop(key, set())
        for t in list(timers):
            if t._handle is not None:
                t._handle.cancel()
                t._handle = None
        return len(timers)

    def _forget(self, timer: Timer) -> None:
        timers = self._timers.get(timer.key)
        if timers is not None:
            timers.discard(timer)
            if not timers:
                del self._timers[timer.key]

    # life

    def start(self) -> None:
        self.running = True
        for name in self._jobs:
            if name not in self._tasks:
                self._start_job(name)

    async def stop(self) -> None:
        self.running = False
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        for key in list(self._timers):
            self.cancel_all(key)


# --------------------------------------------------------------------------- ownership


@dataclass
class _TopicState:
    shard: CoordinatorShard
    num_partitions: int
    owned: set[int] = field(default_factory=set)
    loading: set[int] = field(default_factory=set)
    epochs: dict[int, int] = field(default_factory=dict)


class CoordinatorRuntime:
    def __init__(self, replica_manager: Any) -> None:
        self.rm = replica_manager
        self.scheduler = Scheduler()
        self._topics: dict[str, _TopicState] = {}
        # topic -> (on loaded, on unloaded) callbacks of a second coordinator keeping state
        # in another's topic (share-group membership in __consumer_offsets)
        self._watchers: dict[str, list[tuple[Callable[[int], None],
                                             Callable[[int], None]]]] = {}

    def watch(self, topic: str, loaded: Callable[[int], None],
              unloaded: Callable[[int], None]) -> None:
        """Call `loaded(p)` on the loop once a partition of `topic` is owned after a
        leadership change, `unloaded(p)` when it is dropped."""
        self._watchers.setdefault(topic, []).append((loaded, unloaded))

    def register(self, topic: str, num_partitions: int, shard: CoordinatorShard) -> None:
        """`shard` coordinates the keys of `topic`, hashed over `num_partitions`."""
        self._topics[topic] = _TopicState(shard, num_partitions)

    def _state(self, topic: str) -> _TopicState:
        return self._topics[topic]

    def num_partitions(self, topic: str) -> int:
        return self._state(topic).num_partitions

    def owned(self, topic: str) -> set[int]:
        """Partitions loaded and served (the live set)."""
        return self._state(topic).owned

    def loading(self, topic: str) -> set[int]:
        """Partitions led here whose replay has not finished (the live set)."""
        return self._state(topic).loading

    def epoch(self, topic: str, partition: int) -> int:
        return self._state(topic).epochs.get(partition, NO_EPOCH)

    def error_for(self, topic: str, partition: int) -> ErrorCode:
        """COORDINATOR_LOAD_IN_PROGRESS while replaying, NOT_COORDINATOR when not owned."""
        st = self._state(topic)
        if partition in st.loading:
            return E.coordinator_load_in_progress
        if partition not in st.owned:
            return E.not_coordinator
        return E.none

    def led_partitions(self, topic: str) -> set[int]:
        """The partitions of `topic` hosted and led by this node."""
        out = set()
        for p in range(self.num_partitions(topic)):
            part = self.rm.get(topic, p)
            if part is not None and part.leader == self.rm.node_id:
                out.add(p)
        return out

    def begin_loading(self, topic: str, partitions: Iterable[int]) -> None:
        self._state(topic).loading.update(partitions)

    def load(self, topic: str, partitions: Iterable[int]) -> int:
        """Replay the partitions into the shard; each is owned afterwards, unless it was
        unloaded meanwhile (then what was replayed is dropped again). Blocking."""
        st = self._state(topic)
        ps = sorted(set(partitions))
        st.loading.update(ps)
        count = 0
        for p in ps:
            count += st.shard.replay_partition(p)
        for p in ps:
            if p in st.loading:
                st.loading.discard(p)
                st.owned.add(p)
            else:
                st.shard.unload_partition(p)
        return count

    def unload(self, topic: str, partitions: Iterable[int]) -> None:
        """Stop serving the partitions: cancel their timers and forget their state."""
        st = self._state(topic)
        for p in set(partitions):
            st.owned.discard(p)
            st.loading.discard(p)
            self.scheduler.cancel_all((topic, p))
            st.shard.unload_partition(p)
            for _, unloaded in self._watchers.get(topic, ()):
                unloaded(p)

    async def on_become_leader(self, topic: str, partition: int, epoch: int) -> bool:
        """This node leads the partition from `epoch`: replay it (in a thread), then serve
        it. False when the event is stale (an older epoch than one already seen)."""
        st = self._state(topic)
        if epoch < st.epochs.get(partition, NO_EPOCH):
            return False
        st.epochs[partition] = epoch
        if partition in st.owned:
            # owned already (a re-election of this node): the state in memory is current
            return True
        began = time.monotonic()
        st.loading.add(partition)
        count = await asyncio.to_thread(self.load, topic, [partition])
        if partition not in st.owned:
            return False  # resigned while replaying
        log.debug("loaded %s-%d (epoch %d): %d records in %.2f s", topic, partition, epoch,
                 count, time.monotonic() - began)
        st.shard.partition_loaded(partition)
        for loaded, _ in self._watchers.get(topic, ()):
            loaded(partition)
        return True

    async def on_resign(self, topic: str, partition: int, epoch: int | None = None) -> bool:
        """This node no longer leads the partition (a deletion passes no epoch): unload it.
        False when the event is stale."""
        st = self._state(topic)
        if epoch is not None:
            if epoch < st.epochs.get(partition, NO_EPOCH):
                return False
            st.epochs[partition] = epoch
        if partition in st.owned or partition in st.loading:
            log.debug("unloading %s-%d (epoch %s)", topic, partition, epoch)
        self.unload(topic, [partition])
        return True

    async def follow_leadership(self) -> None:
        """Load what this node now leads and unload what it no longer leads, for every
        registered topic, at the partitions' leader epochs: what a metadata change calls."""
        for topic in list(self._topics):
            st = self._state(topic)
            for p in range(st.num_partitions):
                part = self.rm.get(topic, p)
                led = part is not None and part.leader == self.rm.node_id
                epoch = int(part.leader_epoch) if part is not None else None
                if led and p not in st.owned and p not in st.loading:
                    await self.on_become_leader(topic, p, epoch if epoch is not None else 0)
                elif not led and (p in st.owned or p in st.loading):
                    await self.on_resign(topic, p, epoch)

    # ------------------------------------------------------------------ records

    def replay(self, topic: str, partition: int) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every batch of the partition from its log start to its log end,
        control batches included (nothing when the partition is not hosted). Blocking."""
        part = self.rm.get(topic, partition)
        if part is None:
            return iter(())
        return committed_batches(part)

    def append(self, topic: str, partition: int, records: list[tuple[bytes, bytes | None]],
               timestamp: int | None = None) -> Any:
        """Append (key, value) records in one batch, validated like a produce with
        acks=all; the replica manager's AppendResult."""
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        batch = build_batch([Record(-1, ts, k, v) for k, v in records])
        result = self.rm.append(topic, partition, memoryview(batch), -1, True)
        if result.error == E.none:
            part = self.rm.get(topic, partition)
            if part is not None:
                _note_write(part, result.last_offset)
        return result

    def append_transactional(self, topic: str, partition: int, batch: bytes) -> Any:
        """Append a transactional batch the coordinator built (its producer id and epoch
        are the client's); the partition's append info, or None when not hosted."""
        part = self.rm.get(topic, partition)
        if part is None:
            return None
        view = memoryview(batch)
        info = part.append(view, BatchHeader.parse(view), None)
        _note_write(part, info.last_offset)
        return info

    def note_write(self, part: Any, last_offset: int) -> None:
        """A write of the node's own the current request's answer must wait for (a
        transaction marker appended by a coordinator)."""
        _note_write(part, last_offset)

    @staticmethod
    def note_soon(done: asyncio.Future[Any]) -> None:
        """The current request's answer waits, after everything else, for `done` too, but
        at most the write timeout and whatever its outcome: work that follows a committed
        decision (a transaction's markers and completion), which a client's next request
        would otherwise find in progress."""
        writes = _WRITES.get()
        if writes is not None:
            writes.append(_Soon(done))

    @staticmethod
    def note_settled(settled: asyncio.Future[ErrorCode]) -> None:
        """The current request's answer waits, after its writes' commit, for `settled`: the
        coordinator acting on that commit (so a client's next request finds it done)."""
        writes = _WRITES.get()
        if writes is not None:
            writes.append(settled)

    # ------------------------------------------------------------------ acks=all

    def durably(self, call: Callable[[], Any], timeout_ms: int = WRITE_TIMEOUT_MS) -> Any:
        """Run a request handler `call()` so that its answer goes out only once the
        coordinator records it wrote are in the ISR (the high watermark passed them), as
        Kafka's CoordinatorRuntime completes a write only at its commit. A handler answering
        at once gets a coroutine when it wrote to a replicated partition; a coroutine
        handler gets wrapped. A write that does not reach the ISR raises
        WriteNotReplicated from the coroutine: the answer is never sent."""
        writes: list[Any] = []
        token = _WRITES.set(writes)
        try:
            result = call()
        finally:
            _WRITES.reset(token)
        if asyncio.iscoroutine(result):
            return self._durable_coroutine(result, timeout_ms)
        if not writes:
            return result
        return self._answer_when_replicated(writes, result, timeout_ms)

    async def _durable_coroutine(self, coro: Any, timeout_ms: int) -> Any:
        writes: list[Any] = []
        token = _WRITES.set(writes)  # this task's own context: only its writes land here
        try:
            result = await coro
        finally:
            _WRITES.reset(token)
        if writes:
            await self.wait_replicated(writes, timeout_ms)
        return result

    async def _answer_when_replicated(self, writes: list[Any], result: Any,
                                      timeout_ms: int) -> Any:
        await self.wait_replicated(writes, timeout_ms)
        return result

    async def wait_replicated(self, writes: list[Any], timeout_ms: int) -> None:
        """Wait until the high watermark of each written partition passed its write, under
        the leader epoch it was written in; WriteNotReplicated otherwise."""
        needed: dict[Any, tuple[int, int]] = {}
        settles = []
        soon = []
        for w in writes:
            if isinstance(w, asyncio.Future):
                settles.append(w)
                continue
            if isinstance(w, _Soon):
                soon.append(w.done)
                continue
            part, offset, epoch = w
            have = needed.get(part)
            needed[part] = (max(offset, have[0]) if have else offset, epoch)
        for part, (offset, epoch) in needed.items():
            if part.leader_epoch != epoch or not part.is_leader:
                raise WriteNotReplicated(f"{part.topic}-{part.index}: leadership moved",
                                         E.not_coordinator)
            error = await self.rm.wait_for_hw(part, offset, timeout_ms)
            if error != E.none or part.leader_epoch != epoch:
                moved = (error in (E.none, E.not_leader_or_follower) or not part.is_leader
                         or part.leader_epoch != epoch)
                name = "LEADERSHIP_MOVED" if error == E.none else ErrorCode(error).name.upper()
                raise WriteNotReplicated(
                    f"{part.topic}-{part.index} offset {offset - 1}: {name}",
                    E.not_coordinator if moved else E.coordinator_not_available)
        for settled in settles:
            try:
                code = await asyncio.wait_for(asyncio.shield(settled), timeout_ms / 1000)
            except TimeoutError:
                raise WriteNotReplicated("the coordinator did not act on its committed "
                                         "write in time") from None
            if code != E.none:
                raise WriteNotReplicated(f"write lost: {ErrorCode(code).name.upper()}",
                                         ErrorCode(code))
        if soon:
            await asyncio.wait(soon, timeout=timeout_ms / 1000)

    # ------------------------------------------------------------------ life

    def start(self) -> None:
        self.scheduler.start()

    async def stop(self) -> None:
        await self.scheduler.stop()


def committed_batches(part: Any) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a hosted partition from its log start to its log end, control batches
    included: what a coordinator replays when it becomes the leader. As Kafka's
    CoordinatorLoaderImpl it reads to the log end offset, not to the high watermark: a new
    leader's HW trails the old one's until the followers fetch from it, and what lies between
    (records the old leader had committed, offsets acknowledged to clients) is the
    partition's history from now on; the followers truncate to this log. Blocking."""
    the_log = part.log
    offset, end = the_log.log_start_offset, the_log.log_end_offset
    while offset < end:
        result = the_log.read(offset, REPLAY_CHUNK_BYTES, end)
        if result.region is None:
            return
        data = the_log.read_bytes(result.region)
        moved = False
        for header, view in iter_batches(data):
            if header.last_offset < offset:
                continue
            moved = True
            offset = header.last_offset + 1
            yield header, view
        if not moved:
            return


# --------------------------------------------------------------------------- topics


def internal_topic_spec(name: str, partitions: int, wanted_rf: int, live_brokers: int,
                        configs: dict[str, str]) -> CreatableTopic:
    """A compacted internal topic with replication factor min(wanted, live brokers): Kafka
    refuses to create it with fewer live brokers than its factor (default 3), which on a
    single node would leave no coordinator at all."""
    rf = min(wanted_rf, max(1, live_brokers))
    return CreatableTopic(name, partitions, rf,
                          configs={"cleanup.policy": "compact", **configs})


CreateTopics = Callable[[list[CreatableTopic]], Awaitable[list[Any]]]


async def ensure_internal_topic(image: Callable[[], Any], create: CreateTopics,
                                spec: CreatableTopic) -> int:
    """Create the internal topic unless it exists; its partition count (the one it has wins
    over a changed config, as the key -> partition mapping must hold), or the spec's when
    it could not be created."""
    if spec.name not in image().topics_by_name:
        [result] = await create([spec])
        if result.error_code not in (E.none, E.topic_already_exists):
            log.error("cannot create %s: %s %s", spec.name, ErrorCode(result.error_code).name,
                      result.error_message or "")
        else:
            log.debug("created %s with %d partitions (replication factor %d)", spec.name,
                     spec.num_partitions, spec.replication_factor)
    topic = image().topics_by_name.get(spec.name)
    return len(topic.partitions) if topic is not None else spec.num_partitions
