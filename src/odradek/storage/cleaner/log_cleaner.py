"""The log cleaner: compaction of `cleanup.policy=compact` logs in a background thread.

One pass over a log (Kafka's LogCleaner.doClean):

1. The dirty section is [first dirty offset, first uncleanable offset): the first dirty offset
   comes from `cleaner-offset-checkpoint`; the first uncleanable one is the active segment's
   base, or the first segment younger than `min.compaction.lag.ms`, or the caller's upper bound
   (the last stable offset). The log with the highest dirty ratio above its
   `min.cleanable.dirty.ratio` is cleaned first; one whose dirty data is older than
   `max.compaction.lag.ms` is cleaned regardless of its ratio.
2. The offset map (bounded by `log.cleaner.dedupe.buffer.size`) gets the newest offset of each
   key in the dirty section; when it fills up the pass ends at the offset reached.
3. Every segment below that end, grouped up to `segment.bytes`, is rewritten: a record stays
   when no newer record of its key exists; tombstones stay until the delete horizon
   (`delete.retention.ms` after the pass that first saw them, stored in the batch as in
   KIP-534) and are then dropped. Records keep their offsets, batches their base and last
   offsets, producer fields and codec (changed batches are recompressed with it); batches that
   lose nothing are copied byte for byte.
4. Each cleaned segment is swapped in crash-safely (see `swap`), under the log's lock only for
   the renames and the list update.

Transactions: control batches are always kept; records of transactional batches never enter
the offset map (the batch may belong to an aborted transaction: the aborted-transaction index
arrives with transactions) and their tombstones are kept, but records they hold that a newer
non-transactional record supersedes are removed, which is right whether they committed or not.
Open transactions lie beyond the last stable offset, which the caller's upper bound keeps out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from odradek.protocol.records import (
    ATTR_DELETE_HORIZON,
    BatchHeader,
    decode_records,
)
from odradek.storage.checkpoints import CheckpointError, fsync_dir, read_offsets, write_offsets
from odradek.storage.cleaner.batches import (
    _Batches,
    _Scanned,
    batch_body,
    empty_batch,
    encode_batch,
    rebuild_batch,
    scan_records,
)
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.swap import CLEANED, SWAP, stem
from odradek.storage.config import LogConfig
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.log import Log
from odradek.storage.log_dir_failure import channel_for
from odradek.storage.segment import INT32_MAX, Segment

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _yield_gil() -> None:
    """Let a waiting thread (the node's event loop) have the GIL between two batches rather
    than after the interpreter's 5 ms switch interval: keeps produce latency down."""
    time.sleep(0)


@dataclass(frozen=True)
class CleanerConfig:
    """Kafka's `log.cleaner.*` broker settings."""

    enabled: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 134_217_728
    io_buffer_load_factor: float = 0.9
    backoff_ms: int = 15_000


class CleanAborted(Exception):
    """The log changed under the pass (deleted, truncated, retention) or the cleaner stops."""


@dataclass
class CleanStats:
    topic: str
    partition: int
    first_dirty: int
    end_offset: int
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_removed: int = 0
    map_entries: int = 0
    segments_in: int = 0
    segments_out: int = 0
    elapsed_s: float = 0.0
    # the earliest delete horizon of tombstones still in the log (None: none pending)
    pending_horizon: int | None = None

    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class LogToClean:
    log: Log
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool = False
    segments: list[Segment] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def is_compacted(config: LogConfig) -> bool:
    return "compact" in config.cleanup_policy.split(",")


def cleanable_range(
    lg: Log, checkpoint: int | None, now: int, upper_bound: int | None = None
) -> LogToClean:
    """Kafka's LogCleanerManager.cleanableOffsets and dirty-ratio inputs for one log."""
    with lg.lock:
        segments = lg.segments
        start = lg.log_start_offset
        leo = lg.log_end_offset
    cfg = lg.config
    first_dirty = start if checkpoint is None or checkpoint < start or checkpoint > leo else checkpoint
    inactive = segments[:-1]
    uncleanable = segments[-1].base_offset
    if upper_bound is not None:
        uncleanable = min(uncleanable, upper_bound)
    dirty_segments = [s for s in inactive if s.next_offset > first_dirty]
    if cfg.min_compaction_lag_ms > 0:
        for s in dirty_segments:
            if s.max_timestamp > now - cfg.min_compaction_lag_ms:
                uncleanable = min(uncleanable, s.base_offset)
                break
    uncleanable = max(uncleanable, first_dirty)
    clean_bytes = sum(s.size for s in inactive if s.next_offset <= first_dirty)
    dirty_bytes = sum(s.size for s in dirty_segments if s.base_offset < uncleanable)
    must = False
    if cfg.max_compaction_lag_ms < (1 << 62) and dirty_bytes:
        first = dirty_segments[0].first_batch_timestamp
        must = first is not None and first >= 0 and now - first > cfg.max_compaction_lag_ms
    return LogToClean(lg, first_dirty, uncleanable, clean_bytes, dirty_bytes, must, segments)


class _CleanedWriter:
    """Writes `<base>.log.cleaned` and its indexes the way a Segment indexes its appends."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig) -> None:
        self.directory = directory
        self.base = base_offset
        name = stem(base_offset)
        self.log_path = directory / f"{name}.log{CLEANED}"
        self.fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.offset_index = OffsetIndex(
            directory / f"{name}.index{CLEANED}", config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            directory / f"{name}.timeindex{CLEANED}", config.segment_index_bytes
        )
        self.offset_index.reset()
        self.time_index.reset()
        self.interval = config.index_interval_bytes
        self.size = 0
        self.max_ts = -1
        self.offset_of_max = -1
        self.since_index = 0

    def paths(self) -> list[Path]:
        return [self.offset_index.path, self.time_index.path, self.log_path]

    def write(self, data: bytes | memoryview, last_offset: int, max_ts: int) -> None:
        pos = self.size
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        if max_ts > self.max_ts:
            self.max_ts, self.offset_of_max = max_ts, last_offset
        if self.since_index > self.interval:
            self.offset_index.append(last_offset - self.base, pos)
            self.time_index.maybe_append(self.max_ts, self.offset_of_max - self.base)
            self.since_index = 0
        self.since_index += len(data)
        self.size = pos + len(data)

    def finish(self) -> None:
        if self.max_ts >= 0:
            self.time_index.maybe_append(
                self.max_ts, self.offset_of_max - self.base, skip_full_check=True
            )
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        self.offset_index.flush()
        self.time_index.flush()
        self.offset_index.close()
        self.time_index.close()

    def abandon(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.offset_index.close()
        self.time_index.close()
        for path in self.paths():
            for p in (path, path.with_name(path.name.replace(CLEANED, SWAP))):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()


def _swap_name(path: Path) -> Path:
    return path.with_name(path.name[: -len(CLEANED)] + SWAP)


def _plain_name(path: Path) -> Path:
    return path.with_name(path.name[: -len(SWAP)])


class LogCleaner:
    """Compacts the logs `logs()` returns, from a background thread (`start`/`stop`) or one
    pass at a time (`clean_once`, for tests and the benchmark)."""

    def __init__(
        self,
        checkpoint_dir: Path | Sequence[Path],
        logs: Callable[[], Iterable[Log]],
        config: CleanerConfig | None = None,
        clock: Callable[[], int] = _now_ms,
        upper_bound: Callable[[Log], int | None] | None = None,
    ) -> None:
        # one cleaner-offset-checkpoint per log directory (JBOD), each naming only its own
        # logs as Kafka keeps them: a failed directory takes only its own entries with it
        self.checkpoint_dirs = ([Path(checkpoint_dir)] if isinstance(checkpoint_dir, (str, Path))
                                else [Path(d) for d in checkpoint_dir])
        self.checkpoint_path = self.checkpoint_dirs[0] / CHECKPOINT_FILE
        self._written: dict[Path, dict[tuple[str, int], int]] = {}
        # held: a directory's failure state lives as long as someone holds its channel
        self._dir_states = [channel_for(d) for d in self.checkpoint_dirs]
        self._logs = logs
        self.config = config or CleanerConfig()
        self.clock = clock
        self._upper_bound = upper_bound
        self._checkpoints = self._read_checkpoint()
        self._horizons: dict[tuple[str, int], int] = {}
        self._uncleanable: set[Log] = set()
        self._cond = threading.Condition()
        self._in_progress: Log | None = None
        self._aborting: set[Log] = set()
        self._stop = threading.Event()
        self._woken = False  # wake() or stop() during a pass: skip the next back-off
        self._thread: threading.Thread | None = None
        self.last_stats: CleanStats | None = None
        self._producer_last: dict[int, int] = {}
        self.passes = 0

    # ------------------------------------------------------------- checkpoint

    def _read_checkpoint(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for directory in self.checkpoint_dirs:  # the first (older single file) first
            if channel_for(directory).offline:
                continue
            path = directory / CHECKPOINT_FILE
            try:
                out.update(read_offsets(path))
            except FileNotFoundError:
                continue
            except (CheckpointError, OSError) as exc:
                # Losing it only makes the next passes rescan: the whole log counts as dirty.
                log.warning("ignoring unreadable %s: %s", path, exc)
        return out

    def _write_checkpoint(self) -> None:
        where = {(lg.topic, lg.partition): lg.dir.parent for lg in self._logs()}
        self._checkpoints = {k: v for k, v in self._checkpoints.items() if k in where}
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.checkpoint_dirs}
        for key, offset in self._checkpoints.items():
            by_dir.setdefault(where[key], {})[key] = offset
        for directory, entries in by_dir.items():
            if self._written.get(directory) == entries or channel_for(directory).offline:
                continue
            if write_offsets(directory / CHECKPOINT_FILE, entries):
                self._written[directory] = entries

    def checkpoint_of(self, topic: str, partition: int) -> int | None:
        return self._checkpoints.get((topic, partition))

    # -------------------------------------------------------------- thread

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="log-cleaner", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self.wake()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        self._thread = None

    def wake(self) -> None:
        """End the current back-off sleep: the thread looks for work at once."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def reconfigure(self, config: CleanerConfig) -> None:
        """Take new `log.cleaner.*` settings (Kafka's dynamic broker configs): the next pass
        sizes its offset map by them, and a back-off sleep starts over with the new length."""
        if config != self.config:
            self.config = config
            self.wake()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stats = self.clean_once()
            except Exception:
                log.exception("log cleaner pass failed")
                stats = None
            if stats is None:
                # read each time: log.cleaner.backoff.ms may have changed (reconfigure)
                with self._cond:
                    if not self._woken:
                        self._cond.wait(max(self.config.backoff_ms, 1) / 1000)
                    self._woken = False

    def abort(self, lg: Log) -> None:
        """Stop cleaning `lg` (it is being deleted) and wait until its pass has let go."""
        with self._cond:
            self._aborting.add(lg)
            while self._in_progress is lg:
                self._cond.wait(0.2)
            self._aborting.discard(lg)
        self._uncleanable.discard(lg)

    def _check_abort(self, lg: Log) -> None:
        if self._stop.is_set() and threading.current_thread() is self._thread:
            raise CleanAborted("cleaner stopping")
        if lg in self._aborting or lg.is_closed:
            raise CleanAborted(f"{lg.dir.name} is going away")

    # ----------------------------------------------------------- selection

    def grab_filthiest(self, now: int | None = None) -> LogToClean | None:
        now = self.clock() if now is None else now
        best: LogToClean | None = None
        expired: LogToClean | None = None
        for lg in list(self._logs()):
            if lg.is_closed or lg in self._uncleanable or not is_compacted(lg.config):
                continue
            bound = self._upper_bound(lg) if self._upper_bound is not None else None
            ltc = cleanable_range(lg, self._checkpoints.get((lg.topic, lg.partition)), now, bound)
            if ltc.dirty_bytes > 0 and (ltc.must_clean or ltc.ratio > lg.config.min_cleanable_dirty_ratio):
                if best is None or (ltc.must_clean, ltc.ratio) > (best.must_clean, best.ratio):
                    best = ltc
            elif expired is None:
                horizon = self._horizons.get((lg.topic, lg.partition))
                if horizon is not None and horizon <= now and ltc.clean_bytes > 0:
                    expired = ltc
        return best or expired

    def clean_once(self, now: int | None = None) -> CleanStats | None:
        """Clean the dirtiest log, if any qualifies. Returns the pass's stats."""
        now = self.clock() if now is None else now
        with self._cond:
            ltc = self.grab_filthiest(now)
            if ltc is None or ltc.log in self._aborting:
                return None
            self._in_progress = ltc.log
        lg = ltc.log
        try:
            stats = self.clean(ltc, now)
        except CleanAborted as exc:
            log.info("cleaning %s aborted: %s", lg.dir.name, exc)
            return None
        except Exception:
            log.exception("cleaning %s failed; it is left alone until restart", lg.dir.name)
            self._uncleanable.add(lg)
            return None
        finally:
            with self._cond:
                self._in_progress = None
                self._cond.notify_all()
        self.last_stats = stats
        self.passes += 1
        return stats

    def clean_log(self, lg: Log, now: int | None = None) -> CleanStats:
        """Clean one log now, whatever its dirty ratio (tests, benchmark)."""
        now = self.clock() if now is None else now
        bound = self._upper_bound(lg) if self._upper_bound is not None else None
        ltc = cleanable_range(lg, self._checkpoints.get((lg.topic, lg.partition)), now, bound)
        with self._cond:
            self._in_progress = lg
        try:
            return self.clean(ltc, now)
        finally:
            with self._cond:
                self._in_progress = None
                self._cond.notify_all()

    # ---------------------------------------------------------------- pass

    def clean(self, ltc: LogToClean, now: int) -> CleanStats:
        lg = ltc.log
        began = time.monotonic()
        stats = CleanStats(lg.topic, lg.partition, ltc.first_dirty, ltc.first_dirty)
        key = (lg.topic, lg.partition)
        if key not in self._checkpoints:
            # Named in the checkpoint before its first swap: from then on the log may have
            # offset gaps, which recovery must accept even if the topic stops being compacted.
            self._checkpoints[key] = ltc.first_dirty
            self._write_checkpoint()
        self._producer_last = _last_offsets_of_producers(lg)
        memory = max(self.config.dedupe_buffer_size // max(self.config.threads, 1), 96)
        omap = OffsetMap(memory, self.config.io_buffer_load_factor)
        end = self._build_offset_map(ltc, omap, stats)
        stats.end_offset = end
        stats.map_entries = len(omap)
        inactive = ltc.segments[:-1]
        to_clean = [s for s in inactive if s.base_offset < end]
        horizon: int | None = None
        for group in self._groups(to_clean, lg.config, end):
            h = self._clean_group(lg, group, omap, end, now, stats)
            if h is not None and (horizon is None or h < horizon):
                horizon = h
        if horizon is None:
            self._horizons.pop(key, None)
        else:
            self._horizons[key] = horizon
        stats.pending_horizon = horizon
        self._checkpoints[key] = end
        self._write_checkpoint()
        stats.elapsed_s = time.monotonic() - began
        log.info(
            "cleaned %s: offsets [%d, %d), %d segments -> %d, %.1f MB -> %.1f MB, "
            "%d of %d records kept, %.1f MB/s",
            lg.dir.name, ltc.first_dirty, end, stats.segments_in, stats.segments_out,
            stats.bytes_read / 1e6, stats.bytes_written / 1e6, stats.records_kept,
            stats.records_read, stats.mb_per_s(),
        )
        return stats

    def _dup_fds(self, lg: Log, segments: list[Segment]) -> list[int]:
        """Private fds of `segments` taken under the log's lock, after checking they are still
        the log's: retention or a swap may close the log's own fds at any time."""
        with lg.lock:
            live = {id(s) for s in lg.segments}
            if lg.is_closed or any(id(s) not in live or s.fd < 0 for s in segments):
                raise CleanAborted(f"segments of {lg.dir.name} went away")
            return [os.dup(s.fd) for s in segments]

    def _build_offset_map(self, ltc: LogToClean, omap: OffsetMap, stats: CleanStats) -> int:
        lg = ltc.log
        first, bound = ltc.first_dirty, ltc.first_uncleanable
        dirty = [s for s in ltc.segments[:-1] if s.next_offset > first and s.base_offset < bound]
        if not dirty:
            return first
        fds = self._dup_fds(lg, dirty)
        try:
            for seg, fd in zip(dirty, fds, strict=True):
                self._check_abort(lg)
                for h, data in _Batches(fd, seg.size):
                    _yield_gil()
                    self._check_abort(lg)
                    if h.last_offset < first:
                        continue
                    if h.base_offset >= bound:
                        return bound
                    if h.is_control or h.is_transactional:
                        continue
                    base = h.base_offset
                    for _s, _e, off_delta, _t, key, _tomb in scan_records(
                        batch_body(h, data), h.records_count
                    ):
                        offset = base + off_delta
                        if key is None or offset < first or offset >= bound:
                            continue
                        if not omap.put(key, offset):
                            if offset == first:
                                raise RuntimeError(
                                    "log.cleaner.dedupe.buffer.size is too small to hold one key"
                                )
                            return offset
        finally:
            for fd in fds:
                os.close(fd)
        return bound

    @staticmethod
    def _groups(segments: list[Segment], config: LogConfig, end: int) -> list[list[Segment]]:
        """Kafka's groupSegmentsBySize: runs of segments whose total size fits `segment.bytes`,
        whose index entries fit `segment.index.bytes`, and whose offsets fit an int32."""
        groups: list[list[Segment]] = []
        i = 0
        while i < len(segments):
            group = [segments[i]]
            size = segments[i].size
            index = len(segments[i].offset_index)
            times = len(segments[i].time_index)
            i += 1
            while i < len(segments):
                nxt = segments[i]
                last = min(nxt.next_offset, end) - 1
                if (
                    size + nxt.size > config.segment_bytes
                    or (index + len(nxt.offset_index)) * 8 > config.segment_index_bytes
                    or (times + len(nxt.time_index) + 1) * 12 > config.segment_index_bytes
                    or last - group[0].base_offset > INT32_MAX
                ):
                    break
                group.append(nxt)
                size += nxt.size
                index += len(nxt.offset_index)
                times += len(nxt.time_index)
                i += 1
            groups.append(group)
        return groups

    def _clean_group(
        self, lg: Log, group: list[Segment], omap: OffsetMap, end: int, now: int,
        stats: CleanStats,
    ) -> int | None:
        config = lg.config
        writer = _CleanedWriter(lg.dir, group[0].base_offset, config)
        horizon: int | None = None
        fds = self._dup_fds(lg, group)
        try:
            for seg, fd in zip(group, fds, strict=True):
                self._check_abort(lg)
                stats.bytes_read += seg.size
                for h, data in _Batches(fd, seg.size):
                    _yield_gil()
                    self._check_abort(lg)
                    out, pending = self._filter_batch(h, data, omap, end, now, config, stats)
                    if pending is not None and (horizon is None or pending < horizon):
                        horizon = pending
                    if out is not None:
                        header = BatchHeader.parse(out)
                        writer.write(out, header.last_offset, header.max_timestamp)
            writer.finish()
        except BaseException:
            writer.abandon()
            raise
        finally:
            for fd in fds:
                os.close(fd)
        self._check_abort(lg)
        stats.bytes_written += writer.size
        stats.segments_in += len(group)
        stats.segments_out += 1
        if not self._swap(lg, group, writer):
            writer.abandon()
            raise CleanAborted(f"segments of {lg.dir.name} changed during the pass")
        return horizon

    @staticmethod
    def _swap(lg: Log, group: list[Segment], writer: _CleanedWriter) -> bool:
        paths = writer.paths()  # indexes first: the log file's rename is the commit point

        def commit() -> None:
            for p in paths:
                os.replace(p, _swap_name(p))

        def open_new() -> Segment:
            for p in paths:
                swap = _swap_name(p)
                os.replace(swap, _plain_name(swap))
            seg = Segment(lg.dir, writer.base, lg.config, _now_ms())
            if not seg.load_clean(check_crc=False):
                seg.recover(None)
            seg.on_become_inactive()
            return seg

        swapped = lg.replace_segments(group, commit, open_new)
        if swapped:
            fsync_dir(lg.dir)
        return swapped

    def _filter_batch(
        self, h: BatchHeader, data: memoryview, omap: OffsetMap, end: int, now: int,
        config: LogConfig, stats: CleanStats,
    ) -> tuple[bytes | memoryview | None, int | None]:
        """The batch to write (None: drop it) and the delete horizon it leaves pending."""
        if h.is_control:
            return data, None
        body = batch_body(h, data)
        scanned = scan_records(body, h.records_count)
        stats.records_read += len(scanned)
        txn = h.is_transactional
        has_horizon = h.has_delete_horizon
        expired = has_horizon and now >= h.base_timestamp
        base = h.base_offset
        kept: list[_Scanned] = []
        tombstones = False
        for rec in scanned:
            offset = base + rec[2]
            key, tomb = rec[4], rec[5]
            if offset >= end:  # beyond what the map saw: newer records may exist
                kept.append(rec)
                tombstones = tombstones or tomb
                continue
            if key is None:
                if txn:
                    kept.append(rec)
                continue  # Kafka drops keyless records from a compacted log
            if omap.get(key) > offset:
                continue
            if tomb and not txn:
                if expired:
                    stats.tombstones_removed += 1
                    continue
                tombstones = True
            kept.append(rec)
        stats.records_kept += len(kept)
        set_horizon = tombstones and not has_horizon and not txn
        pending = None
        if tombstones and not txn:
            pending = h.base_timestamp if has_horizon else now + config.delete_retention_ms
        if len(kept) == len(scanned) and not set_horizon:
            return data, pending
        if not kept:
            if h.producer_id >= 0 and self._producer_last.get(h.producer_id) == h.last_offset:
                # Kafka keeps the last batch of a live producer, emptied: its sequence numbers
                # must survive a rebuild of the producer state from the log
                return empty_batch(h), None
            return None, None
        if set_horizon:
            # timestamp deltas change with the base timestamp: re-encode the records
            records = decode_records(h, data)
            by_delta = {r.offset - base: r for r in records}
            return encode_batch(
                h, [by_delta[rec[2]] for rec in kept], now + config.delete_retention_ms,
                h.attributes | ATTR_DELETE_HORIZON,
            ), pending
        # Same base offset and base timestamp: the kept records' bytes are copied as they are.
        return rebuild_batch(h, body, kept), pending


def _last_offsets_of_producers(lg: Log) -> dict[int, int]:
    """producer id -> offset of its last batch, from the log's producer state (Kafka's
    lastRecordsOfActiveProducers); empty when the log keeps none."""
    with lg.lock:
        producers = getattr(getattr(lg, "producer_state", None), "producers", None)
        if not producers:
            return {}
        out: dict[int, int] = {}
        for pid, entry in list(producers.items()):
            last = getattr(entry, "last_offset", -1)
            if isinstance(last, int) and last >= 0:
                out[pid] = last
        return out
