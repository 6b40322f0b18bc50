"""The partitions this node hosts, kept in step with the metadata image.

Creating and deleting logs touches the disk, so `sync` does that work in a
thread and only registers or drops partitions on the event loop; the produce
append itself stays on the loop (a page-cache write).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crc32c import crc32c

from odradek.protocol.errors import ErrorCode, InvalidRecord, KafkaError, ProtocolError
from odradek.protocol.produce import validate_produce_batch
from odradek.protocol.records import (
    ATTR_TIMESTAMP_TYPE,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    BatchHeader,
    validate_batches,
)
from odradek.replication.partition import Partition
from odradek.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offsets, write_offsets
from odradek.storage.cleaner.log_cleaner import has_keyless_record

log = logging.getLogger(__name__)

HW_CHECKPOINT = REPLICATION_OFFSET_CHECKPOINT


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

    # --- lookups ---------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    partition = get

    def read(self, topic: str, partition: int, offset: int, max_bytes: int,
             read_committed: bool = False, min_one_batch: bool = True) -> Any:
        """Batches up to the HW (LSO when read_committed): storage's LogReadResult.
        Raises KafkaError (UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE)."""
        part = self.partitions.get((topic, partition))
        if part is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition}")
        limit = part.last_stable_offset if read_committed else part.high_watermark
        return part.log.read(offset, max_bytes, limit, min_one_batch)

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
        """Validate and append records to (topic, partition); errors come back in the result."""
        part = self.partitions.get((topic, partition))
        if part is None:
            return AppendResult(ErrorCode.unknown_topic_or_partition,
                                message=f"{topic}-{partition} is not hosted here")
        return self.append_to(part, records, acks, single_batch)

    def append_to(self, part: Partition, records: memoryview | None, acks: int,
                  single_batch: bool) -> AppendResult:
        """Validate and append a produce request's records to one partition."""
        try:
            if records is None or len(records) == 0:
                raise InvalidRecord("produce request without records")
            part.check_acks(acks)
            # produce v3+ carries one batch per partition: the fast path checks it as
            # validate_batches would (same errors), with one header unpack
            headers = (validate_produce_batch(records) if single_batch
                       else validate_batches(records))
            config = part.log.config
            # the policy is a list of "compact"/"delete": a substring test is the same test
            if "compact" in config.cleanup_policy:
                # Kafka's LogValidator: the only place produce looks at keys
                pos = 0
                for h in headers:
                    if has_keyless_record(records[pos:pos + h.size], h):
                        raise InvalidRecord(
                            "Compacted topic cannot accept message without key in topic "
                            f"partition {part.topic}-{part.index}.")
                    pos += h.size
            max_bytes = config.max_message_bytes
            for h in headers:
                if h.size > max_bytes:
                    raise KafkaError(ErrorCode.message_too_large,
                                     f"batch of {h.size} bytes exceeds max.message.bytes {max_bytes}")
            append_time = (int(time.time() * 1000)
                           if config.message_timestamp_type == "LogAppendTime" else None)
            base = -1
            pos = 0
            for h in headers:
                batch = records if len(headers) == 1 else records[pos:pos + h.size]
                pos += h.size
                if h.producer_id >= 0:
                    # idempotence: a retried batch gets its original offset back
                    dup = part.log.producer_state.check(h.producer_id, h.producer_epoch,
                                                        h.base_sequence, h.last_offset_delta,
                                                        h.attributes)
                    if dup is not None:
                        if base < 0:
                            base = dup
                        continue
                if append_time is not None:
                    batch, h = stamp_log_append_time(batch, append_time)
                info = part.append(batch, h, append_time)
                if base < 0:
                    base = info.first_offset
            return AppendResult(ErrorCode.none, base,
                                append_time if append_time is not None else -1,
                                part.log_start_offset)
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


def stamp_log_append_time(batch: memoryview, now_ms: int) -> tuple[memoryview, BatchHeader]:
    """A copy of the batch marked LogAppendTime with max timestamp `now_ms`, CRC redone.

    The one place the produce path copies a batch: topics with
    message.timestamp.type=LogAppendTime, as Kafka rewrites them too.
    """
    buf = bytearray(batch)
    attrs = struct.unpack_from(">h", buf, ATTRIBUTES_OFFSET)[0] | ATTR_TIMESTAMP_TYPE
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, attrs)
    struct.pack_into(">q", buf, MAX_TIMESTAMP_OFFSET, now_ms)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    view = memoryview(buf)
    return view, BatchHeader.parse(view)
