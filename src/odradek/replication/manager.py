"""The partitions this node hosts, kept in step with the metadata image.

Creating and deleting logs touches the disk, so `sync` does that work in a
thread and only registers or drops partitions on the event loop; the produce
append itself stays on the loop (a page-cache write).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from odradek.protocol.errors import ErrorCode, InvalidRecord, KafkaError, ProtocolError
from odradek.protocol.produce import MAX_PRODUCE_VERSION
from odradek.protocol.records import BatchHeader
from odradek.replication.alter_log_dirs import ReplicaAlterLogDirsManager
from odradek.replication.config import (
    RACK_AWARE_SELECTOR,
    AlterPartitionItem,
    AlterPartitionResult,
    ReplicationConfig,
)
from odradek.replication.fetch_params import (
    FetchIsolation,
    FetchParams,
    FetchTopic,
    FetchTopicResult,
)
from odradek.replication.fetcher import ReplicaFetcherManager
from odradek.replication.follower import FENCED
from odradek.replication.hw_checkpoints import HW_CHECKPOINT as HW_CHECKPOINT  # re-exported
from odradek.replication.hw_checkpoints import HighWatermarkCheckpoints
from odradek.replication.partition import Partition
from odradek.replication.planning import ImagePlanner, Plan, partitions_of, wanted_of
from odradek.replication.planning import Wanted as _Wanted
from odradek.replication.planning import iter_image_partitions as iter_image_partitions
from odradek.replication.purgatory import DelayedFetch, DelayedOperationPurgatory, DelayedProduce
from odradek.replication.reading import FetchErrorCounts, FetchReading
from odradek.storage.log_validator import validate_records

log = logging.getLogger(__name__)

# produce v0-v2: several batches per partition, no ZSTD (the node's own multi-batch writes)
_MULTI_BATCH_PRODUCE_VERSION = 2
_R = TypeVar("_R")


@dataclass(slots=True)
class AppendResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None
    last_offset: int = -1  # of the last batch appended (an acks=all produce waits past it)
    # the records at fault, (index in the batch, message): Produce v8+ names them (KIP-467)
    record_errors: tuple[tuple[int, str | None], ...] = ()


AlterPartition = Callable[[AlterPartitionItem], Awaitable[AlterPartitionResult]]


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager(FetchReading):
    def __init__(self, log_manager: Any, node_id: int, data_dir: Path,
                 log_config_for: Any, *, channels: Any = None,
                 alter_partition: AlterPartition | None = None,
                 broker_endpoint: Callable[[int], tuple[str, int] | None] | None = None,
                 config: ReplicationConfig | None = None,
                 broker_epoch: Callable[[], int] | None = None,
                 clock: Callable[[], int] = _now_ms, isr_expiration: bool = True,
                 channel_security: Any = None) -> None:
        """`log_config_for(topic) -> LogConfig` reads the topic's configs from the image.

        For a cluster: `channels` (odradek.network.Channels to the other brokers' inter-broker
        listener; built from `broker_endpoint` when not given), `alter_partition` (an
        AlterPartition round trip to the active controller), `config` (the replica.* settings),
        `broker_epoch()` (this broker's epoch, sent in follower fetches). All default to the
        single-node case, where every partition has one replica. `clock()` (ms) and
        `isr_expiration=False` let a simulation drive time and the ISR checks itself."""
        self.log_manager = log_manager
        self.node_id = node_id
        self.data_dir = Path(data_dir)
        self._log_config_for = log_config_for
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._sync_lock = asyncio.Lock()
        # producer id -> its current epoch at the transaction coordinator (set by the node
        # when it has one): tells a fenced zombie's unverified write from a misrouted one
        self.producer_epoch_of: Any = None
        # producer.id.expiration.ms for every hosted log (None: storage's default, 1 day)
        self.producer_id_expiration_ms: int | None = None
        # what checkpoint() last wrote (None: nothing yet): (LEO, log start) per log
        self._checkpointed_logs: dict[tuple[str, int], tuple[int, int]] | None = None
        self.hw_checkpoints = HighWatermarkCheckpoints(
            getattr(log_manager, "log_dirs", None) or [self.data_dir])
        # requests waiting on this node's partitions (Kafka's purgatories): long-polling
        # fetches; acks=all produces once followers exist (DelayedProduce)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch")
        self.fetch_errors = FetchErrorCounts()  # errors_total of Fetch, counted by the reads
        self.produce_purgatory = DelayedOperationPurgatory("Produce")
        self.config = config or ReplicationConfig()
        self.alter_partition = alter_partition
        # channels built here are closed by stop(); the node's own are the node's to close
        self._own_channels = channels is None and broker_endpoint is not None
        if self._own_channels:
            from odradek.network.channel import Channels
            # over the inter-broker listener as it is secured (network.ClientSecurity)
            channels = Channels(f"odradek-replica-{node_id}", broker_endpoint,
                                security=channel_security)
        self.channels = channels
        self.broker_endpoint = broker_endpoint
        self.fetchers = ReplicaFetcherManager(node_id, channels, self.config,
                                              broker_epoch or (lambda: -1))
        # broker id -> rack, from the image (KIP-392's rack-aware selector)
        self.racks: dict[int, str | None] = {}
        self._rack_aware = self.config.replica_selector_class == RACK_AWARE_SELECTOR
        self._isr_task: asyncio.Task[None] | None = None
        self.clock = clock
        self._isr_expiration_enabled = isr_expiration
        self._alters: set[asyncio.Task[None]] = set()
        self._hw_at_load: dict[tuple[str, int], int] = {}
        self._ineligible: set[int] = set()
        self._loading = False
        # set by stop(): the logs close next; a metadata change no longer changes anything
        self.stopped = False
        # () -> the node's current metadata image (set by the node): a partition it knows
        # but this node does not host (yet) answers NOT_LEADER_OR_FOLLOWER, as in Kafka
        self.image_of: Callable[[], Any] | None = None
        # partitions of the image this node cannot host while a log directory is offline
        # (their log may be on it): they answer KAFKA_STORAGE_ERROR, as Kafka's offline
        # partitions do
        self.offline_partitions: set[tuple[str, int]] = set()
        # replicas moving between this node's log directories (AlterReplicaLogDirs)
        self.alter_log_dirs = ReplicaAlterLogDirsManager(self)
        # what the image changed since the last sync: a change costs what it touched
        self._planner = ImagePlanner(node_id)

    # --- lookups ---------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    partition = get

    # --- following the image ---------------------------------------------

    def _plan(self, image: Any) -> Plan:
        # what the image changed since the last plan applied, plus the partitions a failed
        # log directory kept from opening (a later metadata change tries them again)
        return self._planner.plan(image, self.partitions, self.offline_partitions)

    def _open_logs(self, create: list[_Wanted], drop: list[Partition]) -> list[tuple[_Wanted, Any]]:
        # disk work: runs in a thread (or before the server starts)
        for part in drop:
            try:
                self.log_manager.delete(part.topic, part.index)
                log.info("deleted partition %s-%d", part.topic, part.index)
            except Exception:
                log.exception("deleting partition %s-%d failed", part.topic, part.index)
        opened = []
        for w in create:
            config = self._log_config_for(w.topic)
            existing = self.log_manager.get(w.topic, w.partition)
            if existing is not None and getattr(existing, "topic_id", w.topic_id) not in (None, w.topic_id):
                self.log_manager.delete(w.topic, w.partition)
                existing = None
            try:
                # Kafka's isNew: a partition just created (never changed since) has no log
                # anywhere yet, so an offline directory cannot hold one; at start every
                # partition may have its log on a directory that is offline now
                is_new = not self._loading and w.partition_epoch == 0
                the_log = existing or self.log_manager.create(w.topic, w.partition, w.topic_id,
                                                              config, is_new=is_new)
            except KafkaError as exc:
                if exc.code != ErrorCode.kafka_storage_error:
                    raise
                # a log directory is offline: this partition's log may be on it (JBOD);
                # not hosted until it is back (a later metadata change tries again)
                log.warning("%s-%d is not hosted: %s", w.topic, w.partition, exc.message)
                self.offline_partitions.add((w.topic, w.partition))
                continue
            self.offline_partitions.discard((w.topic, w.partition))
            opened.append((w, the_log))
        return opened

    def _register(self, opened: list[tuple[_Wanted, Any]], drop: list[Partition],
                  update: list[_Wanted]) -> None:
        for part in drop:
            if self.partitions.get((part.topic, part.index)) is part:
                del self.partitions[(part.topic, part.index)]
            self.fetchers.remove(part)
            part.make_follower(-1, part.leader_epoch, part.partition_epoch, [], [])
        now = self.clock()
        for w, the_log in opened:
            hw = self._hw_at_load.pop((w.topic, w.partition), None)
            # a new partition starts as a follower of nobody, then takes its role below
            part = Partition(w.topic, w.partition, w.topic_id, the_log, leader=-1,
                             leader_epoch=-1, replicas=w.replicas, isr=w.isr,
                             local_id=self.node_id, partition_epoch=w.partition_epoch,
                             high_watermark=hw if hw is not None else 0)
            part.alter_isr = self._alter_isr
            part.isr_eligible = self._isr_eligible
            part.lag_max_ms = self.config.replica_lag_time_max_ms
            self.partitions[(w.topic, w.partition)] = part
            if self.producer_id_expiration_ms is not None:
                the_log.producer_state.expiration_ms = self.producer_id_expiration_ms
            self._apply_role(part, w, now)
        for w in update:
            part = self.partitions[(w.topic, w.partition)]
            self._apply_role(part, w, now)
            self._apply_config(part)

    def _reconfigure(self, image: Any, plan: Plan) -> None:
        """The log config of the hosted partitions of the topics whose configs changed
        (every hosted partition's after a broker default changed)."""
        if plan.reconfigure is None:
            parts: Iterator[Partition] = iter(list(self.partitions.values()))
        else:
            topics = image.topics_by_name
            parts = (part for name in sorted(plan.reconfigure) if name in topics
                     for i in partitions_of(topics[name])
                     if (part := self.partitions.get((name, i))) is not None)
        for part in parts:
            self._apply_config(part)

    def _restart_fenced(self, image: Any) -> None:
        # a follower fenced by its leader (our epoch was stale) waits for a newer image; any
        # change restarts it, as the full replan did (the few fenced, not every partition)
        fenced = [state.partition for fetcher in list(self.fetchers.fetchers.values())
                  for state in fetcher.states.values() if state.state == FENCED]
        now = self.clock()
        for part in fenced:
            topic = image.topics_by_name.get(part.topic)
            p = None if topic is None else partitions_of(topic).get(part.index)
            if p is None or self.partitions.get((part.topic, part.index)) is not part:
                continue
            w = wanted_of(self.node_id, topic, p)
            if w is not None and w.topic_id == part.topic_id:
                self._apply_role(part, w, now)

    def _apply_role(self, part: Partition, w: _Wanted, now_ms: int) -> None:
        """Leader or follower as the image says (Kafka's makeLeader / makeFollower)."""
        if part.log.dir_state.offline and w.leader != self.node_id:
            # its log directory failed: nothing is fetched into it (Kafka's offline
            # partition); it follows nobody and answers as a follower would
            self.fetchers.remove(part)
            part.make_follower(-1, w.leader_epoch, w.partition_epoch, w.replicas, w.isr)
            return
        if w.leader == self.node_id:
            was_leader = part.is_leader
            if part.make_leader(w.leader_epoch, w.partition_epoch, w.replicas, w.isr, now_ms):
                if not was_leader:
                    self.fetchers.remove(part)
                log.debug("%s-%d: leader in epoch %d", part.topic, part.index, w.leader_epoch)
            if not part.solo:
                self._ensure_isr_task()
        elif part.make_follower(w.leader, w.leader_epoch, w.partition_epoch, w.replicas, w.isr):
            if w.leader >= 0 and self.channels is not None:
                self.fetchers.add(part)
            else:
                self.fetchers.remove(part)  # no leader (offline), or no network: wait
        elif w.leader >= 0 and self.channels is not None:
            state = self.fetchers.state_of(part.topic, part.index)
            if state is None or state.state == FENCED:
                self.fetchers.add(part)

    def take_dir_offline(self, directory: Path) -> list[tuple[str, int]]:
        """A log directory failed (on the loop): its partitions stop fetching (a follower
        would append into it) and stop moving their ISRs; the controller, told by the next
        heartbeat, moves their leaderships away. Returns those partitions."""
        hit = [key for key, part in self.partitions.items()
               if part.log.dir.parent == directory]
        for key in hit:
            part = self.partitions[key]
            self.fetchers.remove(part)
            if not part.is_leader:
                part.make_follower(-1, part.leader_epoch, part.partition_epoch,
                                   part.replicas, part.isr)
        if hit:
            log.warning("log directory %s failed: %d partitions offline here", directory,
                        len(hit))
        return hit

    # --- the ISR -----------------------------------------------------------

    def _alter_isr(self, part: Partition, isr: tuple[int, ...]) -> None:
        """Send a proposed ISR to the controller; its answer goes back to the partition."""
        if self.alter_partition is None:
            part.pending_isr = None  # no controller to ask (a single node): nothing changes
            return
        epochs = {r: s.broker_epoch for r, s in part.replica_states.items()}
        item = AlterPartitionItem(part.topic, part.topic_id, part.index, self.node_id,
                                  part.leader_epoch, part.partition_epoch, isr, epochs)
        task = asyncio.ensure_future(self._send_alter(part, item))
        self._alters.add(task)
        task.add_done_callback(self._alters.discard)

    async def _send_alter(self, part: Partition, item: AlterPartitionItem) -> None:
        assert self.alter_partition is not None
        try:
            result = await self.alter_partition(item)
        except Exception as exc:
            log.info("AlterPartition for %s-%d failed: %s", part.topic, part.index, exc)
            result = AlterPartitionResult(ErrorCode.request_timed_out)
        if self.partitions.get((part.topic, part.index)) is not part:
            return
        if part.on_alter_result(result.error, result.leader_epoch, result.partition_epoch,
                                list(result.isr)):
            log.info("%s-%d: ISR now %s (partition epoch %d)", part.topic, part.index,
                     list(result.isr), result.partition_epoch)
        elif result.error != ErrorCode.none:
            log.info("%s-%d: ISR change to %s refused: %s", part.topic, part.index,
                     list(item.new_isr), result.error.name.upper())

    def _ensure_isr_task(self) -> None:
        if not self._isr_expiration_enabled or self.stopped:
            return
        if self._isr_task is None or self._isr_task.done():
            try:
                self._isr_task = asyncio.get_running_loop().create_task(self._isr_expiration())
            except RuntimeError:  # not on a loop (load at start): the next sync starts it
                self._isr_task = None

    async def _isr_expiration(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2, drop the followers
        that fell behind from the ISR of every partition this node leads."""
        interval = max(0.01, self.config.replica_lag_time_max_ms / 2000)
        while True:
            await asyncio.sleep(interval)
            self.maybe_shrink_isrs(self.clock())

    def maybe_shrink_isrs(self, now_ms: int) -> int:
        n = 0
        for part in list(self.partitions.values()):
            if (part.is_leader and not part.solo and not part.log.dir_state.offline
                    and part.maybe_shrink_isr(now_ms)):
                n += 1
        return n

    async def stop(self) -> None:
        """Stop the fetchers and the ISR task (the node, at shutdown). Nothing appends to a
        log after this returns: a sync in flight (which may start fetchers) is waited for,
        and later ones do nothing."""
        self.stopped = True
        # first: the fetcher manager refuses new fetchers from here on
        await self.fetchers.shutdown()
        if self._isr_task is not None:
            self._isr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._isr_task
            self._isr_task = None
        async with self._sync_lock:
            pass
        await self.alter_log_dirs.stop()
        for task in list(self._alters):
            task.cancel()
        if self._own_channels and self.channels is not None:
            with contextlib.suppress(Exception):
                await self.channels.close()

    def _apply_config(self, part: Partition) -> None:
        config = self._log_config_for(part.topic)
        if part.log.config != config:
            part.log.update_config(config)

    def load(self, image: Any) -> None:
        """At start, before serving: recover every log and host the image's partitions."""
        self.log_manager.load(self._log_config_for)
        self._loading = True
        try:
            self._load_partitions(image)
        finally:
            self._loading = False

    def _load_partitions(self, image: Any) -> None:
        self._hw_at_load = self.read_hw_checkpoint()
        self._note_brokers(image)
        self._planner.forget()  # every partition of the image, every log on disk
        plan = self._plan(image)
        create, drop, update = plan.create, plan.drop, plan.update
        # logs of deleted topics go; logs the image does not know are renamed -stray and kept
        self.log_manager.reconcile({(w.topic, w.partition): w.topic_id for w in create},
                                   image.removed_topic_ids)
        self._register(self._open_logs(create, drop), drop, update)
        self._planner.followed(image)
        for part in self.partitions.values():
            part.refresh_high_watermark()
        log.info("hosting %d partitions", len(self.partitions))

    def _note_brokers(self, image: Any) -> None:
        brokers = getattr(image, "brokers", None) or {}
        self.racks = {int(b): getattr(reg, "rack", None) for b, reg in brokers.items()}
        # Kafka's isReplicaIsrEligible: a fenced broker, or one in controlled shutdown, does
        # not join an ISR (the controller would refuse it: INELIGIBLE_REPLICA)
        self._ineligible = {int(b) for b, reg in brokers.items()
                            if getattr(reg, "fenced", False)
                            or getattr(reg, "in_controlled_shutdown", False)}

    def _isr_eligible(self, broker_id: int) -> bool:
        return broker_id not in self._ineligible

    def _disk_logs(self) -> Iterator[tuple[str, int]]:
        logs = getattr(self.log_manager, "logs", None)
        if isinstance(logs, dict):
            yield from list(logs.keys())

    async def sync(self, image: Any) -> None:
        """Create/delete/update partitions so that they follow the image."""
        async with self._sync_lock:
            if self.stopped:
                return
            self._note_brokers(image)
            plan = self._plan(image)
            create, drop, update = plan.create, plan.drop, plan.update
            for part in drop:  # stop serving before the files go
                if self.partitions.get((part.topic, part.index)) is part:
                    del self.partitions[(part.topic, part.index)]
                self.fetchers.remove(part)
                part.make_follower(-1, part.leader_epoch, part.partition_epoch, [], [])
            opened = await asyncio.to_thread(self._open_logs, create, drop) if (create or drop) else []
            self._register(opened, [], update)
            self._reconfigure(image, plan)
            self._restart_fenced(image)
            # only now: a sync that failed above leaves the next one to look at it all again
            self._planner.followed(image)
            for w, _ in opened:
                log.debug("created partition %s-%d (leader epoch %d)", w.topic, w.partition,
                         w.leader_epoch)

    # --- produce ---------------------------------------------------------

    def append(self, topic: str, partition: int, records: memoryview | None, acks: int,
               single_batch: bool = True) -> AppendResult:
        """Validate and append records to (topic, partition); errors come back in the result.
        For the node's own writes (the coordinators): validated as the latest produce
        version does (`single_batch=False`: as produce v0-v2, several batches)."""
        part = self.partitions.get((topic, partition))
        if part is None:
            return AppendResult(self.missing_partition_error(topic, partition),
                                message=f"{topic}-{partition} is not hosted here")
        version = MAX_PRODUCE_VERSION if single_batch else _MULTI_BATCH_PRODUCE_VERSION
        return self.append_to(part, records, acks, version)

    def append_to(self, part: Partition, records: memoryview | None, acks: int,
                  produce_version: int) -> AppendResult:
        """Validate (storage's LogValidator, with what the request's version allows) and append
        a produce request's records to one partition, as leader."""
        part.produce_requests += 1
        if part.leader != part.local_id:
            part.failed_produce += 1
            return AppendResult(ErrorCode.not_leader_or_follower,
                                message=f"{part.topic}-{part.index} is led by {part.leader}")
        try:
            if records is None or len(records) == 0:
                raise InvalidRecord("produce request without records")
            part.check_acks(acks)
            batches, append_time = validate_records(records, part.log.config, produce_version,
                                                    part.topic, part.index)
            base = -1
            for batch, h in batches:
                # a retried idempotent batch comes back with its original offsets
                info = part.append_records_to_leader(batch, h,
                                                     append_time if append_time >= 0 else None)
                if base < 0:
                    base = info.first_offset
            part.messages_in += info.last_offset - base + 1
            part.bytes_in += len(records)
            return AppendResult(ErrorCode.none, base, append_time, part.log_start_offset, None,
                                info.last_offset)
        except KafkaError as exc:
            part.failed_produce += 1
            code = exc.code
            if code == ErrorCode.invalid_txn_state and self.producer_epoch_of is not None:
                code = self._fenced_or(code, records)
            return AppendResult(code, message=exc.message or None,
                                record_errors=getattr(exc, "record_errors", ()))
        except ProtocolError as exc:  # batch framing the validator could not follow
            part.failed_produce += 1
            return AppendResult(ErrorCode.corrupt_message, message=str(exc))

    def _fenced_or(self, code: ErrorCode, records: memoryview | None) -> ErrorCode:
        # a transactional batch the partition did not expect: from a fenced epoch, Kafka
        # answers INVALID_PRODUCER_EPOCH (its verification asks the coordinator)
        try:
            h = BatchHeader.parse(records)  # type: ignore[arg-type]
            current = self.producer_epoch_of(h.producer_id)
        except Exception:
            return code
        if current is not None and h.producer_epoch < current:
            return ErrorCode.invalid_producer_epoch
        return code

    # --- fetch -----------------------------------------------------------

    def fetch_messages(self, params: FetchParams, topics: list[FetchTopic],
                       respond: Callable[[list[FetchTopicResult]], _R]) -> _R | asyncio.Future[_R]:
        """Read what `topics` ask for, up to the bound `params` sets (log end for a follower,
        LSO for read_committed, HW else), and return `respond(results)`; or, when fewer than
        min_bytes were found and the fetch may wait, a future resolved with `respond(results)`
        of a second read once min_bytes arrived, max_wait_ms passed or the node stops (the
        fetch purgatory; callbacks, not a coroutine: no task per long poll).

        `topics`: (name or None for an unknown topic id, topic id, [(partition, fetch offset,
        partition max bytes, current leader epoch)]). `results`: (name or "", topic id,
        [FetchPartitionResponse]) in the same order. A partition's errors are in its response
        (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH, OFFSET_OUT_OF_RANGE); a fetch with an error never waits."""
        results, accumulated, errors, watched = self._read_from_log(params, topics)
        if (accumulated >= params.min_bytes or params.max_wait_ms <= 0 or errors
                or not watched):
            return respond(results)
        return self._delay_fetch(params, topics, respond, accumulated, watched)

    def _delay_fetch(self, params: FetchParams, topics: list[FetchTopic],
                     respond: Callable[[list[FetchTopicResult]], _R], accumulated: int,
                     watched: dict[Partition, int]) -> _R | asyncio.Future[_R]:
        # apart from fetch_messages: its closures would cost every fetch their cells
        # read_committed waits for the LSO to pass what was read, not for appends under it
        delayed = DelayedFetch(watched, params.min_bytes, accumulated,
                               read_committed=params.isolation == FetchIsolation.TXN_COMMITTED,
                               stable_offsets=watched, purgatory=self.fetch_purgatory,
                               log_end=params.isolation == FetchIsolation.LOG_END)
        fut: asyncio.Future[_R] = asyncio.get_running_loop().create_future()

        def complete() -> None:
            if fut.done():  # cancelled: the connection or the node went away
                return
            try:
                fut.set_result(respond(self._read_from_log(params, topics)[0]))
            except Exception as exc:  # reported by the server as a failed handler
                fut.set_exception(exc)

        if not delayed.start(params.max_wait_ms, complete):
            return respond(self._read_from_log(params, topics)[0])
        fut.add_done_callback(lambda _: delayed.cancel())  # a cancelled one stops waiting
        return fut

    def delay_produce(self, waits: list[tuple[Partition, int, int]], timeout_ms: int,
                      respond: Callable[[list[ErrorCode]], _R]) -> _R | asyncio.Future[_R]:
        """acks=all: `respond(errors)` once the HW of every (partition, required offset, leader
        epoch) passed its offset (NONE), leadership moved (NOT_LEADER_OR_FOLLOWER) or
        timeout_ms passed (REQUEST_TIMED_OUT); a Future when it has to wait (the produce
        purgatory)."""
        delayed = DelayedProduce(waits, self.produce_purgatory)
        fut: asyncio.Future[_R] = asyncio.get_running_loop().create_future()

        def complete() -> None:
            if fut.done():
                return
            try:
                fut.set_result(respond(delayed.errors()))
            except Exception as exc:
                fut.set_exception(exc)

        if not delayed.start(max(timeout_ms, 1), complete):
            return respond(delayed.errors())
        fut.add_done_callback(lambda _: delayed.cancel())
        return fut

    async def wait_for_hw(self, part: Partition, required_offset: int, timeout_ms: int
                          ) -> ErrorCode:
        """For the node's own acks=all writes (coordinators): wait until the HW passes
        `required_offset`; NONE, NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT."""
        if part.high_watermark >= required_offset:
            return ErrorCode.none
        result = self.delay_produce([(part, required_offset, part.leader_epoch)], timeout_ms,
                                    lambda errors: errors[0])
        if isinstance(result, asyncio.Future):
            return await result
        return result

    def complete_delayed_operations(self) -> int:
        """Answer every parked request now with what there is (shutdown, as Kafka's purgatories
        complete theirs): how many there were."""
        return self.fetch_purgatory.complete_all() + self.produce_purgatory.complete_all()

    # --- producer state --------------------------------------------------

    def set_producer_id_expiration(self, expiration_ms: int) -> None:
        """producer.id.expiration.ms for the hosted logs and those created later."""
        self.producer_id_expiration_ms = expiration_ms
        for part in list(self.partitions.values()):
            part.log.producer_state.expiration_ms = expiration_ms

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Kafka's periodic producer expiration check (producer.id.expiration.check.interval.ms):
        forget producers idle longer than producer.id.expiration.ms on every partition. A
        producer with an open transaction stays. Returns how many went."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        gone = 0
        for part in list(self.partitions.values()):
            the_log = part.log
            with the_log.lock:
                gone += the_log.producer_state.remove_expired(now)
        return gone

    # --- checkpoints -----------------------------------------------------

    def checkpoint(self) -> None:
        """Recovery points, log start offsets (LogManager) and high watermarks. Blocking.

        Runs in a thread every few seconds, and every bit of Python here holds the GIL
        against the event loop; so a file is rewritten only when what it would hold
        changed since this method last wrote it. The LogManager's two files are skipped
        when no log was created, dropped, appended to or had its start offset moved since
        the last write and every log is flushed to its end (then the files on disk already
        say exactly that: the flush before the last write took each recovery point to at
        least the log end offset seen before it)."""
        lm = self.log_manager
        logs = lm.logs
        state = {k: (lg.log_end_offset, lg.log_start_offset) for k, lg in logs.items()}
        futures = getattr(lm, "futures", {})
        for (topic, index), lg in futures.items():
            state[(f"{topic} (future)", index)] = (lg.log_end_offset, lg.log_start_offset)
        if state != self._checkpointed_logs or any(
                lg.recovery_point != lg.log_end_offset for lg in logs.values()):
            for lg in logs.values():
                if lg.recovery_point < lg.log_end_offset and not lg.dir_state.offline:
                    try:
                        lg.flush()  # fsyncs without the GIL
                    except KafkaError:
                        pass  # its directory is offline now (and said so); not the others
                    time.sleep(0)  # and let the loop in between logs
            lm.checkpoint()  # flushes whatever was appended meanwhile
            self._checkpointed_logs = state
        # each log directory's partitions in its own file (hw_checkpoints)
        self.hw_checkpoints.write((p.log.dir.parent, (p.topic, p.index), p.high_watermark)
                                  for p in list(self.partitions.values()))

    def read_hw_checkpoint(self) -> dict[tuple[str, int], int]:
        return self.hw_checkpoints.read()

