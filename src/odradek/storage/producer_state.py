"""Per-partition producer state: idempotence and the transactions open on a partition.

For each producer id the partition remembers its epoch and the sequence ranges (with
their offsets) of its last 5 batches, as Kafka's ProducerStateManager does. A retried
batch that matches one of those is a duplicate and gets the original offsets back; a
gap in sequences is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.

Everything here works from the fixed 61-byte batch header: a few integer comparisons per
batch on the produce path, no record decoding (control batches excepted: their one record
key is read to tell a commit from an abort).

The state is snapshotted as `<offset>.snapshot` files in Kafka's format (at segment roll
and at clean shutdown) and rebuilt at open from the newest snapshot plus a scan of the
batches written after it. As in Kafka, a log with no producer still takes its snapshots (an
empty state is a state): after a clean shutdown the newest snapshot stands at the log end
offset and start-up reads no batch at all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    H_ATTRS,
    H_LAST_DELTA,
    H_MAX_TS,
    H_PEPOCH,
    H_PID,
    H_SEQ,
    control_marker,
)
from odradek.storage.checkpoints import atomic_write
from odradek.storage.log_dir_failure import RateLimitedLog
from odradek.storage.txn_index import AbortedTxn, TxnIndex

log = logging.getLogger(__name__)
_snapshot_failures = RateLimitedLog(log)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
NO_SEQUENCE = -1
NO_EPOCH = -1
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_SNAPSHOT_VERSION = 1
_SNAP_HEAD = struct.Struct(">hI")
_SNAP_COUNT = struct.Struct(">i")
# producer id, epoch, last sequence, last offset, offset delta, timestamp,
# coordinator epoch, current transaction first offset (Kafka's snapshot entry, v1)
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")


class OutOfOrderSequence(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.out_of_order_sequence_number, message)


class InvalidProducerEpoch(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_producer_epoch, message)


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    # (first seq, last seq, first offset, last offset), oldest first, at most 5
    batches: deque[tuple[int, int, int, int]] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1][3] if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> int | None:
        if epoch != self.epoch:
            return None
        for f_seq, l_seq, f_off, _ in self.batches:
            if f_seq == first_seq and l_seq == last_seq:
                return f_off
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _last_seq(base_seq: int, last_delta: int) -> int:
    # sequences wrap at Int32.MAX as in Kafka's DefaultRecordBatch.incrementSequence
    s = base_seq + last_delta
    return s - INT32_MAX - 1 if s > INT32_MAX else s


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class Verification:
    """One transaction's verification on a partition: asked for (`verified` False) or
    confirmed by the coordinator."""

    __slots__ = ("epoch", "verified")

    def __init__(self, epoch: int, verified: bool = False) -> None:
        self.epoch = epoch
        self.verified = verified


class ProducerStateManager:
    """The producers of one partition. Not thread-safe: the log's lock covers it."""

    def __init__(self, directory: Path, expiration_ms: int = 86400000) -> None:
        self.dir = Path(directory)
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction on this partition
        self.ongoing: dict[int, int] = {}
        self.last_snapshot_offset = -1
        # what the last load_producer_state walked: batches and their bytes (0 after a clean
        # shutdown: the proof that start-up read no record data for this state)
        self.scanned_batches = 0
        self.scanned_bytes = 0
        # where the state stands: every batch below this offset has been applied
        self.map_end_offset = 0
        # producer id -> the verification of its next transaction here (KIP-890): a
        # transaction's first batch on the partition must be expected by its coordinator
        self.verifications: dict[int, Verification] = {}
        # aborted transactions of this log (.txnindex files), filled by the abort markers
        self.txn_index = TxnIndex(self.dir)

    # ------------------------------------------------------------ validation

    def check(self, producer_id: int, epoch: int, base_seq: int, last_delta: int,
              attributes: int) -> int | None:
        """Validate a client batch before it is appended. Returns the original first offset
        when the batch duplicates one of the producer's last 5; raises KafkaError for a stale
        epoch or a sequence gap; None when the batch is to be appended."""
        if producer_id < 0:
            return None
        entry = self.producers.get(producer_id)
        is_txn = bool(attributes & ATTR_TRANSACTIONAL)
        if entry is not None and epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"producer {producer_id}: epoch {epoch} is older than the current {entry.epoch}")
        if is_txn and producer_id not in self.ongoing and not self.is_verified(producer_id, epoch):
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"producer {producer_id} epoch {epoch}: partition not added to "
                             "the transaction")
        if entry is None:
            return None  # unknown producer (new, or expired): any sequence is accepted
        if is_txn and epoch > entry.epoch and producer_id in self.ongoing:
            # a newer epoch while an older one's transaction is open here: that one never got
            # its marker (a hanging transaction); as in Kafka the new batches join it, and
            # its marker will end both. Verification exists so that this never happens
            log.warning("%s: producer %d epoch %d writes while its epoch %d transaction from "
                        "offset %d is still open here (a hanging transaction)", self.dir,
                        producer_id, epoch, entry.epoch, self.ongoing[producer_id])
        last_seq = _last_seq(base_seq, last_delta)
        if epoch == entry.epoch:
            dup = entry.find_duplicate(epoch, base_seq, last_seq)
            if dup is not None:
                return dup
            current = entry.last_seq
            if current != NO_SEQUENCE and not _in_sequence(current, base_seq):
                raise OutOfOrderSequence(
                    f"producer {producer_id} epoch {epoch}: sequence {base_seq} after {current}")
        elif base_seq != 0 and entry.epoch != NO_EPOCH:
            raise OutOfOrderSequence(
                f"producer {producer_id}: new epoch {epoch} must start at sequence 0, "
                f"not {base_seq}")
        if not is_txn and producer_id in self.ongoing:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"producer {producer_id} has an open transaction; "
                             "non-transactional batch refused")
        return None

    # ----------------------------------------------------------- verification

    def is_verified(self, producer_id: int, epoch: int) -> bool:
        """The coordinator confirmed this partition in the producer's open transaction of
        `epoch`, and no marker or leader change came since."""
        v = self.verifications.get(producer_id)
        return v is not None and v.verified and v.epoch == epoch

    def begin_verification(self, producer_id: int, epoch: int) -> Verification:
        """The guard of a verification about to be asked of the coordinator (Kafka's
        VerificationGuard): its answer counts only while the guard is still the producer's
        (a marker or a leader change meanwhile drops it)."""
        v = self.verifications.get(producer_id)
        if v is None or v.epoch != epoch:
            v = self.verifications[producer_id] = Verification(epoch)
        return v

    def complete_verification(self, producer_id: int, guard: Verification) -> bool:
        """The coordinator said yes to the verification `guard` began: the producer's next
        transactional batch is expected, if the guard still stands."""
        if self.verifications.get(producer_id) is not guard:
            return self.is_verified(producer_id, guard.epoch)
        guard.verified = True
        return True

    def mark_verified(self, producer_id: int, epoch: int) -> None:
        """The coordinator, on this node, committed the partition into the producer's
        transaction of `epoch`."""
        self.verifications[producer_id] = Verification(epoch, True)

    def clear_verifications(self) -> None:
        """The partition's leadership changed: what was verified before is not trusted."""
        self.verifications.clear()

    # ----------------------------------------------------------------- update

    def on_append(self, producer_id: int, epoch: int, base_seq: int, last_delta: int,
                  attributes: int, first_offset: int, last_offset: int, timestamp: int,
                  control_type: int = -1, coordinator_epoch: int = -1) -> CompletedTxn | None:
        """Record an appended batch. For a transaction marker (control batch) returns the
        transaction it completes, for the aborted-transaction index and the LSO."""
        if last_offset + 1 > self.map_end_offset:
            self.map_end_offset = last_offset + 1
        if producer_id < 0:
            return None
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_timestamp = timestamp
        if attributes & ATTR_CONTROL:
            if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
                return None
            entry.coordinator_epoch = coordinator_epoch
            # the transaction is over here: the next one must be verified again
            self.verifications.pop(producer_id, None)
            first = self.ongoing.pop(producer_id, None)
            entry.current_txn_first_offset = -1
            if first is None:
                return None
            return CompletedTxn(producer_id, first, last_offset, control_type == CONTROL_ABORT)
        if base_seq >= 0:
            entry.batches.append((base_seq, _last_seq(base_seq, last_delta), first_offset,
                                  last_offset))
        if attributes & ATTR_TRANSACTIONAL and producer_id not in self.ongoing:
            self.ongoing[producer_id] = first_offset
            entry.current_txn_first_offset = first_offset
            # the verification is spent on the transaction's first batch (Kafka clears its
            # guard there): the open transaction admits the rest
            self.verifications.pop(producer_id, None)
        return None

    def note_batch(self, batch: memoryview | bytes, header: object, first_offset: int,
                   last_offset: int, timestamp: int, segment_base: int) -> None:
        """Log.append's hook, after the batch is written (a producer's batch or a marker)."""
        h = header
        attrs = h.attributes  # type: ignore[attr-defined]
        ctype = coord = -1
        if attrs & ATTR_CONTROL:
            ctype, coord = control_marker(batch)
        done = self.on_append(h.producer_id, h.producer_epoch, h.base_sequence,  # type: ignore[attr-defined]
                              h.last_offset_delta, attrs, first_offset, last_offset,  # type: ignore[attr-defined]
                              timestamp, ctype, coord)
        if done is not None and done.is_aborted:
            self.index_abort(done, segment_base)

    def index_abort(self, done: CompletedTxn, segment_base: int) -> None:
        first_unstable = self.first_unstable_offset()
        lso = done.last_offset + 1 if first_unstable is None else first_unstable
        self.txn_index.append(segment_base, AbortedTxn(done.producer_id, done.first_offset,
                                                       done.last_offset, lso))

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (the LSO bound), or None."""
        return min(self.ongoing.values()) if self.ongoing else None

    def remove_expired(self, now_ms: int | None = None) -> int:
        """Forget producers idle longer than producer.id.expiration.ms (never one with an
        open transaction). Returns how many went."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        gone = [pid for pid, e in self.producers.items()
                if pid not in self.ongoing and now - e.last_timestamp >= self.expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # --------------------------------------------------------------- snapshots

    def encode_snapshot(self) -> bytes:
        body = bytearray(_SNAP_COUNT.pack(len(self.producers)))
        for e in self.producers.values():
            if e.batches:
                _, l_seq, f_off, l_off = e.batches[-1]
            else:
                l_seq = NO_SEQUENCE
                f_off = l_off = -1
            body += _SNAP_ENTRY.pack(e.producer_id, e.epoch, l_seq, l_off,
                                     max(0, l_off - f_off), e.last_timestamp,
                                     e.coordinator_epoch, e.current_txn_first_offset)
        return _SNAP_HEAD.pack(_SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)

    def take_snapshot(self, offset: int | None = None) -> Path | None:
        """Write `<offset>.snapshot` (default: where the state stands)."""
        offset = self.map_end_offset if offset is None else offset
        if offset == self.last_snapshot_offset:
            return None
        # producer.id.expiration.ms: idle producers leave with the next snapshot
        self.remove_expired()
        # Taken even for a log that never saw a producer id (Kafka does too): without it the
        # next start would scan the whole log to learn that there is nothing to learn.
        path = snapshot_path(self.dir, offset)
        try:
            atomic_write(path, self.encode_snapshot())
        except OSError as exc:
            # one line per failure kind per interval, no traceback: a full disk fails them all
            _snapshot_failures.warning(f"snapshot:{exc.errno}", "%s: writing producer state "
                                       "snapshot %s failed: %s", self.dir, path.name, exc)
            return None
        self.last_snapshot_offset = offset
        return path

    def load_snapshot(self, data: bytes) -> None:
        """Replace the state by a snapshot's. Raises ValueError on a damaged file."""
        if len(data) < _SNAP_HEAD.size + _SNAP_COUNT.size:
            raise ValueError("snapshot too short")
        version, crc = _SNAP_HEAD.unpack_from(data, 0)
        if version != _SNAPSHOT_VERSION:
            raise ValueError(f"snapshot version {version}")
        body = data[_SNAP_HEAD.size:]
        if crc32c(body) != crc:
            raise ValueError("snapshot CRC mismatch")
        (count,) = _SNAP_COUNT.unpack_from(body, 0)
        if count < 0 or _SNAP_COUNT.size + count * _SNAP_ENTRY.size != len(body):
            raise ValueError(f"snapshot declares {count} entries in {len(body)} bytes")
        producers: dict[int, ProducerEntry] = {}
        ongoing: dict[int, int] = {}
        for pid, epoch, l_seq, l_off, delta, ts, coord, txn_first in _SNAP_ENTRY.iter_unpack(
                body[_SNAP_COUNT.size:]):
            e = ProducerEntry(pid, epoch, last_timestamp=ts, coordinator_epoch=coord,
                              current_txn_first_offset=txn_first)
            if l_seq >= 0 and l_off >= 0:
                f_seq = l_seq - delta if l_seq - delta >= 0 else l_seq - delta + INT32_MAX + 1
                e.batches.append((f_seq, l_seq, l_off - delta, l_off))
            producers[pid] = e
            if txn_first >= 0:
                ongoing[pid] = txn_first
        self.producers = producers
        self.ongoing = ongoing

    def snapshot_offsets(self) -> list[int]:
        out = []
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.dir):
                m = _SNAPSHOT_FILE.match(entry.name)
                if m:
                    out.append(int(m.group(1)))
        return sorted(out)

    def load_latest(self, log_end_offset: int, log_start_offset: int = 0) -> int:
        """Load the newest readable snapshot at or below the log end offset; snapshots above
        it (the log was truncated in a crash) are deleted. Returns the offset the state
        stands at (where a scan must resume), log_start_offset when there is none."""
        self.producers, self.ongoing = {}, {}
        offsets = self.snapshot_offsets()
        for off in offsets:
            if off > log_end_offset:
                with contextlib.suppress(FileNotFoundError):
                    snapshot_path(self.dir, off).unlink()
        for off in reversed([o for o in offsets if o <= log_end_offset]):
            try:
                self.load_snapshot(snapshot_path(self.dir, off).read_bytes())
            except (OSError, ValueError) as exc:
                log.warning("%s: producer snapshot %d unreadable (%s); dropping it", self.dir,
                            off, exc)
                with contextlib.suppress(FileNotFoundError):
                    snapshot_path(self.dir, off).unlink()
                self.producers, self.ongoing = {}, {}
                continue
            self.last_snapshot_offset = off
            self.map_end_offset = off
            return off
        self.map_end_offset = log_start_offset
        return log_start_offset

    def truncate_snapshots(self, offset: int) -> None:
        """Delete snapshots above `offset` (the log is being truncated there)."""
        for off in self.snapshot_offsets():
            if off > offset:
                with contextlib.suppress(FileNotFoundError):
                    snapshot_path(self.dir, off).unlink()
        if self.last_snapshot_offset > offset:
            self.last_snapshot_offset = -1

    def delete_snapshots_below(self, offset: int, keep: Iterable[int] = ()) -> None:
        """Drop snapshots older than the oldest segment still in the log (the newest is kept)."""
        offsets = self.snapshot_offsets()
        keep_set = set(keep) | ({offsets[-1]} if offsets else set())
        for off in offsets:
            if off < offset and off not in keep_set:
                with contextlib.suppress(FileNotFoundError):
                    snapshot_path(self.dir, off).unlink()


# ------------------------------------------------------------------ log glue

# control_marker (imported above, re-exported) reads a marker's type and coordinator epoch;
# HEADER tuples are indexed by protocol.records' H_* field indexes.


def rebuild(state: ProducerStateManager, the_log: object, start: int) -> int:
    """Apply the batches of `the_log` from offset `start` to its end (recovery after the
    newest snapshot). Returns how many batches were applied; `state.scanned_bytes` grows by
    their size."""
    applied = 0
    for seg in the_log.segments:  # type: ignore[attr-defined]
        if seg.next_offset <= start:
            continue
        pos = 0
        if seg.base_offset < start:
            hit = seg.find_batch(start)
            if hit is None:
                continue
            pos = hit[0]
        for p, h in seg.headers(pos):
            base = h[0]
            last = base + h[H_LAST_DELTA]
            if last < start:
                continue
            attrs = h[H_ATTRS]
            pid = h[H_PID]
            ctype = coord = -1
            if pid >= 0 and attrs & ATTR_CONTROL:
                ctype, coord = control_marker(seg.read_bytes(p, min(h[1] + 12, 4096)))
            done = state.on_append(pid, h[H_PEPOCH], h[H_SEQ], h[H_LAST_DELTA], attrs, base,
                                   last, h[H_MAX_TS], ctype, coord)
            if done is not None and done.is_aborted:
                state.index_abort(done, seg.base_offset)
            applied += 1
            state.scanned_bytes += h[1] + 12
    state.scanned_batches += applied
    return applied


def load_producer_state(the_log: object, expiration_ms: int | None = None) -> ProducerStateManager:
    """The producer state of an opened log: newest snapshot plus the batches after it."""
    old = getattr(the_log, "producer_state", None)
    state = ProducerStateManager(the_log.dir, expiration_ms or 86400000)  # type: ignore[attr-defined]
    if old is not None:
        state.expiration_ms = old.expiration_ms
        state.verifications = old.verifications
    leo = the_log.log_end_offset  # type: ignore[attr-defined]
    start = state.load_latest(leo, the_log.log_start_offset)  # type: ignore[attr-defined]
    state.txn_index = TxnIndex.load(state.dir)
    # the markers from `start` on are met again by the scan
    state.txn_index.truncate_from(start)
    if start < leo:
        n = rebuild(state, the_log, start)
        if n:
            log.info("%s: producer state rebuilt from offset %d (%d batches, %d bytes)",
                     state.dir, start, n, state.scanned_bytes)
    state.map_end_offset = leo
    return state
