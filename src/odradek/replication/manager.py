"""The partitions this node hosts, kept in step with the metadata image.

Creating and deleting logs touches the disk, so `sync` does that work in a
thread and only registers or drops partitions on the event loop; the produce
append itself stays on the loop (a page-cache write).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from odradek.protocol.errors import ErrorCode, InvalidRecord, KafkaError, ProtocolError
from odradek.protocol.fetch import FetchPartitionResponse
from odradek.protocol.produce import MAX_PRODUCE_VERSION
from odradek.protocol.records import BatchHeader
from odradek.replication.fetch_params import (
    INLINE_READ_BYTES,
    FetchIsolation,
    FetchParams,
    FetchTopic,
    FetchTopicResult,
)
from odradek.replication.partition import Partition
from odradek.replication.purgatory import DelayedFetch, DelayedOperationPurgatory
from odradek.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offsets, write_offsets
from odradek.storage.log_validator import validate_records

log = logging.getLogger(__name__)

HW_CHECKPOINT = REPLICATION_OFFSET_CHECKPOINT
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


@dataclass(frozen=True, slots=True)
class _Wanted:
    topic: str
    partition: int
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


def iter_image_partitions(image: Any) -> Iterator[tuple[Any, Any]]:
    """(topic image, partition image) for every partition in the image."""
    for topic in image.topics_by_name.values():
        parts = topic.partitions
        for p in (parts.values() if isinstance(parts, dict) else parts):
            yield topic, p


class ReplicaManager:
    def __init__(self, log_manager: Any, node_id: int, data_dir: Path,
                 log_config_for: Any) -> None:
        """`log_config_for(topic) -> LogConfig` reads the topic's configs from the image."""
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
        # what checkpoint() last wrote (None: nothing yet): (LEO, log start) per log, HWs
        self._checkpointed_logs: dict[tuple[str, int], tuple[int, int]] | None = None
        self._checkpointed_hws: dict[tuple[str, int], int] | None = None
        # requests waiting on this node's partitions (Kafka's purgatories): long-polling
        # fetches; acks=all produces once followers exist (DelayedProduce)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch")
        self.produce_purgatory = DelayedOperationPurgatory("Produce")

    # --- lookups ---------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    partition = get

    # --- following the image ---------------------------------------------

    def _wanted(self, image: Any) -> dict[tuple[str, int], _Wanted]:
        wanted: dict[tuple[str, int], _Wanted] = {}
        for topic, p in iter_image_partitions(image):
            if self.node_id in p.replicas:
                wanted[(topic.name, p.partition)] = _Wanted(
                    topic.name, p.partition, topic.topic_id, p.leader, p.leader_epoch,
                    list(p.replicas), list(p.isr))
        return wanted

    def _plan(self, image: Any) -> tuple[list[_Wanted], list[Partition], list[_Wanted]]:
        wanted = self._wanted(image)
        create: list[_Wanted] = []
        update: list[_Wanted] = []
        drop: list[Partition] = []
        for key, part in self.partitions.items():
            w = wanted.get(key)
            if w is None or w.topic_id != part.topic_id:
                drop.append(part)
        for key, w in wanted.items():
            part = self.partitions.get(key)
            if part is None or part.topic_id != w.topic_id:
                create.append(w)
            else:
                update.append(w)
        return create, drop, update

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
            the_log = existing or self.log_manager.create(w.topic, w.partition, w.topic_id, config)
            opened.append((w, the_log))
        return opened

    def _register(self, opened: list[tuple[_Wanted, Any]], drop: list[Partition],
                  update: list[_Wanted]) -> None:
        for part in drop:
            if self.partitions.get((part.topic, part.index)) is part:
                del self.partitions[(part.topic, part.index)]
        for w, the_log in opened:
            self.partitions[(w.topic, w.partition)] = Partition(
                w.topic, w.partition, w.topic_id, the_log, leader=w.leader,
                leader_epoch=w.leader_epoch, replicas=w.replicas, isr=w.isr)
            self._note_epoch(the_log, w.leader_epoch)
            if self.producer_id_expiration_ms is not None:
                the_log.producer_state.expiration_ms = self.producer_id_expiration_ms
        for w in update:
            part = self.partitions[(w.topic, w.partition)]
            part.leader, part.replicas, part.isr = w.leader, w.replicas, w.isr
            if part.leader_epoch != w.leader_epoch:
                part.leader_epoch = w.leader_epoch
                self._note_epoch(part.log, w.leader_epoch)
            self._apply_config(part)

    def _note_epoch(self, the_log: Any, epoch: int) -> None:
        epochs = getattr(the_log, "epochs", None)
        if epochs is not None and epoch >= 0:
            try:
                epochs.assign(epoch, the_log.log_end_offset)
            except Exception:
                log.exception("recording leader epoch %d failed", epoch)

    def _apply_config(self, part: Partition) -> None:
        config = self._log_config_for(part.topic)
        if part.log.config != config:
            part.log.update_config(config)

    def load(self, image: Any) -> None:
        """At start, before serving: recover every log and host the image's partitions."""
        self.log_manager.load(self._log_config_for)
        create, drop, update = self._plan(image)
        # logs of deleted topics go; logs the image does not know are renamed -stray and kept
        self.log_manager.reconcile({(w.topic, w.partition): w.topic_id for w in create},
                                   image.removed_topic_ids)
        self._register(self._open_logs(create, drop), drop, update)
        for part in self.partitions.values():
            part.refresh_high_watermark()
        log.info("hosting %d partitions", len(self.partitions))

    def _disk_logs(self) -> Iterator[tuple[str, int]]:
        logs = getattr(self.log_manager, "logs", None)
        if isinstance(logs, dict):
            yield from list(logs.keys())

    async def sync(self, image: Any) -> None:
        """Create/delete/update partitions so that they follow the image."""
        async with self._sync_lock:
            create, drop, update = self._plan(image)
            for part in drop:  # stop serving before the files go
                if self.partitions.get((part.topic, part.index)) is part:
                    del self.partitions[(part.topic, part.index)]
            opened = await asyncio.to_thread(self._open_logs, create, drop) if (create or drop) else []
            self._register(opened, [], update)
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
            return AppendResult(ErrorCode.unknown_topic_or_partition,
                                message=f"{topic}-{partition} is not hosted here")
        version = MAX_PRODUCE_VERSION if single_batch else _MULTI_BATCH_PRODUCE_VERSION
        return self.append_to(part, records, acks, version)

    def append_to(self, part: Partition, records: memoryview | None, acks: int,
                  produce_version: int) -> AppendResult:
        """Validate (storage's LogValidator, with what the request's version allows) and append
        a produce request's records to one partition, as leader."""
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
            return AppendResult(ErrorCode.none, base, append_time, part.log_start_offset)
        except KafkaError as exc:
            code = exc.code
            if code == ErrorCode.invalid_txn_state and self.producer_epoch_of is not None:
                code = self._fenced_or(code, records)
            return AppendResult(code, message=exc.message or None)
        except ProtocolError as exc:  # batch framing the validator could not follow
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
                               stable_offsets=watched, purgatory=self.fetch_purgatory)
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

    def complete_delayed_operations(self) -> int:
        """Answer every parked request now with what there is (shutdown, as Kafka's purgatories
        complete theirs): how many there were."""
        return self.fetch_purgatory.complete_all() + self.produce_purgatory.complete_all()

    def _read_from_log(self, params: FetchParams, topics: list[FetchTopic]
                       ) -> tuple[list[FetchTopicResult], int, bool, dict[Partition, int]]:
        """The results, bytes read, whether any partition failed, and the partitions a long
        poll watches with the LSO each was read at (Kafka's readFromLog)."""
        isolation = params.isolation
        committed = isolation == FetchIsolation.TXN_COMMITTED
        to_log_end = isolation == FetchIsolation.LOG_END
        aborted: list[tuple[int, int]] | None = [] if committed else None
        remaining = params.max_bytes
        min_one = True
        accumulated = 0
        errors = False
        watched: dict[Partition, int] = {}
        partitions = self.partitions
        out: list[FetchTopicResult] = []
        for name, tid, parts in topics:
            results = []
            for index, offset, part_max, leader_epoch in parts:
                part = partitions.get((name, index)) if name is not None else None
                if part is None:
                    code = (ErrorCode.unknown_topic_id if params.topic_ids and name is None
                            else ErrorCode.unknown_topic_or_partition)
                    results.append(FetchPartitionResponse(index, code, -1, -1, -1, None, -1,
                                                          None))
                    errors = True
                    continue
                hw = part.high_watermark
                lso = part.last_stable_offset
                if leader_epoch >= 0 and leader_epoch != part.leader_epoch:
                    results.append(FetchPartitionResponse(
                        index, part.leader_epoch_error(leader_epoch), hw, lso,
                        part.log_start_offset, None, -1, None))
                    errors = True
                    continue
                lg = part.log
                start = lg.log_start_offset
                leo = lg.log_end_offset
                upper = leo if to_log_end else lso if committed else hw
                if start <= offset <= leo and offset >= (upper if upper < leo else leo):
                    # a consumer at the tail (the common case of a long poll): what Log.read
                    # answers for it, without its lock and segment lookup
                    region = None
                    size = 0
                else:
                    limit = min(part_max, remaining) if remaining > 0 else 0
                    try:
                        res = lg.read(offset, max(limit, 0), upper, min_one)
                    except KafkaError as exc:
                        results.append(FetchPartitionResponse(
                            index, exc.code, hw, lso, lg.log_start_offset, None, -1, None))
                        errors = True
                        continue
                    region = res.region
                    size = region.size if region is not None else 0
                    start = lg.log_start_offset
                if size:
                    remaining -= size
                    accumulated += size
                    min_one = False
                watched[part] = lso
                # the clients drop the aborted transactions' records themselves
                txns = part.aborted_transactions(offset, lso) if committed and size else aborted
                records: Any = region if size else None
                if 0 < size <= INLINE_READ_BYTES:
                    try:
                        data = os.pread(region.fd, size, region.position)  # type: ignore[union-attr]
                    except OSError:  # the segment went away: the region path reports it
                        data = b""
                    if len(data) == size:
                        records = data
                results.append(FetchPartitionResponse(index, ErrorCode.none, hw, lso, start,
                                                       txns, -1, records))
            out.append((name or "", tid, results))
        return out, accumulated, errors, watched

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
        if state != self._checkpointed_logs or any(
                lg.recovery_point != lg.log_end_offset for lg in logs.values()):
            for lg in logs.values():
                if lg.recovery_point < lg.log_end_offset:
                    lg.flush()  # fsyncs without the GIL
                    time.sleep(0)  # and let the loop in between logs
            lm.checkpoint()  # flushes whatever was appended meanwhile
            self._checkpointed_logs = state
        entries = {(p.topic, p.index): p.high_watermark for p in list(self.partitions.values())}
        if entries != self._checkpointed_hws:
            write_offsets(self.data_dir / HW_CHECKPOINT, entries)
            self._checkpointed_hws = entries

    def read_hw_checkpoint(self) -> dict[tuple[str, int], int]:
        return read_offsets(self.data_dir / HW_CHECKPOINT)

