"""One partition this node hosts: its log, leader epoch, ISR and high watermark.

Today every partition has a single replica, so the ISR is this node alone and
the high watermark moves to the log end offset after each append; the shape
(ISR, HW separate from LEO, leader epoch) is the one followers will need.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError

# A watcher is told (partition, bytes appended) after every append; delayed
# fetches use it to wake without polling.
Watcher = Callable[["Partition", int], None]


class Partition:
    __slots__ = ("_watchers", "high_watermark", "index", "isr", "leader", "leader_epoch", "log",
                 "replicas", "topic", "topic_id")

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Any, *, leader: int,
                 leader_epoch: int, replicas: list[int], isr: list[int]) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr
        # an ISR of one: everything in the log is committed
        self.high_watermark: int = log.log_end_offset
        self._watchers: set[Watcher] = set()

    # --- offsets ---------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        # below the HW and below the first offset of the oldest open transaction
        ongoing = self.log.producer_state.ongoing
        if ongoing:
            try:
                return min(self.high_watermark, *ongoing.values())
            except RuntimeError:  # changed under a reader on another thread (the cleaner)
                return min(self.high_watermark, self.log.log_start_offset)
        return self.high_watermark

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)."""
        return self.log.producer_state.txn_index.collect(start, end)

    def leader_epoch_error(self, current_leader_epoch: int) -> ErrorCode | None:
        """A request's current_leader_epoch checked against ours (-1: not checked): older is
        FENCED_LEADER_EPOCH, newer (we have not heard of it yet) UNKNOWN_LEADER_EPOCH."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return None
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    # --- produce ---------------------------------------------------------

    def check_acks(self, acks: int) -> None:
        if acks == -1:
            min_isr = self.log.config.min_insync_replicas
            if len(self.isr) < min_isr:
                raise KafkaError(ErrorCode.not_enough_replicas,
                                 f"{len(self.isr)} in-sync replicas, min.insync.replicas is "
                                 f"{min_isr}")

    def append_records_to_leader(self, batch: memoryview, header: Any,
                                 log_append_time_ms: int | None) -> Any:
        """Append one validated client batch as leader, after the producer-state check; returns
        the storage AppendInfo (for a retried idempotent batch, the offsets it was first given,
        and nothing appended)."""
        if header.producer_id < 0:  # no producer state to check: one call less
            info = self.log.append(batch, header, self.leader_epoch, log_append_time_ms)
        else:
            info = self.log.append_as_leader(batch, header, self.leader_epoch,
                                             log_append_time_ms)
            if info.duplicate:
                return info
        # the produce hot path: _appended inline
        self.high_watermark = self.log.log_end_offset
        if self._watchers:
            size = len(batch)
            for watcher in tuple(self._watchers):
                watcher(self, size)
        return info

    def append(self, batch: memoryview, header: Any, log_append_time_ms: int | None) -> Any:
        """Append one batch of the node's own (a coordinator's record or transaction marker):
        no client checks. Returns the storage AppendInfo."""
        info = self.log.append(batch, header, self.leader_epoch, log_append_time_ms)
        self._appended(len(batch))
        return info

    def _appended(self, size: int) -> None:
        self.high_watermark = self.log.log_end_offset
        if self._watchers:
            for watcher in tuple(self._watchers):
                watcher(self, size)

    # --- delayed fetch ---------------------------------------------------

    def add_watcher(self, watcher: Watcher) -> None:
        self._watchers.add(watcher)

    def remove_watcher(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def refresh_high_watermark(self) -> None:
        """After the log moved under us (truncation, recovery): HW = LEO with an ISR of one."""
        self.high_watermark = self.log.log_end_offset
