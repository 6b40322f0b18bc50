"""A follower's fetch state for one partition, sans-I/O (Kafka's PartitionFetchState and the
truncation rules of AbstractFetcherThread): the asyncio replica fetcher and the replication
simulation both drive it.

On becoming follower a partition first truncates (KIP-101/279): it asks the leader, with
OffsetForLeaderEpoch, where its latest leader epoch ends in the leader's log, cuts its own log
there (the divergent tail goes), and repeats with an older epoch when the leader's answer names
an epoch it does not have. Then it fetches from its log end, appending what comes as it is and
taking the high watermark from the leader.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.partition import Partition
from odradek.storage.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

__all__ = ["DELAYED", "FENCED", "FETCHING", "TRUNCATING", "FollowerFetchState",
           "truncation_offset"]

TRUNCATING = "truncating"  # an OffsetForLeaderEpoch round is due
FETCHING = "fetching"
DELAYED = "delayed"        # an error: retry after replica.fetch.backoff.ms
FENCED = "fenced"          # our leader epoch is stale: wait for the next image

# errors that mean "try again later" (the leader may not have seen the image yet)
_RETRIABLE = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.unknown_leader_epoch,
                        ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id,
                        ErrorCode.kafka_storage_error, ErrorCode.request_timed_out})


def truncation_offset(partition: Partition, leader_epoch: int, leader_end_offset: int
                      ) -> tuple[int, bool]:
    """Where to cut our log after the leader said (epoch, end offset) for our latest epoch:
    (offset, done). Not done: our log has no such epoch; cut to where ours ends and ask again
    with our (now older) latest epoch."""
    log = partition.log
    leo = log.log_end_offset
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        # the leader knows no epoch at or below ours: keep only what is committed
        return min(partition.high_watermark, leo), True
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end_offset, leo), True
    epoch, end = log.epochs.end_offset_for(leader_epoch)
    if end == UNDEFINED_EPOCH_OFFSET:
        return min(leader_end_offset, leo), True
    if epoch != leader_epoch:
        return min(end, leo), False
    return min(leader_end_offset, end, leo), True


class FollowerFetchState:
    """One partition of a fetcher: what to ask the leader next, and what its answers do."""

    __slots__ = ("delayed_until", "generation", "partition", "state")

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.state = TRUNCATING
        self.delayed_until = 0
        # bumped by restart(): an answer to a request sent before is stale (another leader)
        self.generation = 0

    def restart(self) -> None:
        """A new leader or leader epoch (the image): truncate again before fetching."""
        self.state = TRUNCATING
        self.delayed_until = 0
        self.generation += 1

    def ready(self, now_ms: int) -> bool:
        if self.state == DELAYED and now_ms >= self.delayed_until:
            self.state = TRUNCATING
        return self.state in (TRUNCATING, FETCHING)

    # --- truncation --------------------------------------------------------

    def epoch_request(self) -> tuple[int, int] | None:
        """(current leader epoch, our latest epoch) for OffsetForLeaderEpoch, or None when
        there is no epoch to ask about (then we truncated to the HW and fetch now)."""
        p = self.partition
        latest = p.log.epochs.latest_epoch
        if latest is None:
            p.truncate_to(p.high_watermark)
            self.state = FETCHING
            return None
        return p.leader_epoch, latest

    def on_epoch_response(self, error: ErrorCode, epoch: int, end_offset: int, now_ms: int,
                          backoff_ms: int) -> None:
        if error != ErrorCode.none:
            self.on_error(error, now_ms, backoff_ms)
            return
        offset, done = truncation_offset(self.partition, epoch, end_offset)
        self.partition.truncate_to(offset)
        if done:
            self.state = FETCHING

    # --- fetching ----------------------------------------------------------

    def fetch_position(self) -> tuple[int, int, int, int]:
        """(fetch offset, current leader epoch, last fetched epoch, log start offset)."""
        p = self.partition
        latest = p.log.epochs.latest_epoch
        return (p.log.log_end_offset, p.leader_epoch, UNDEFINED_EPOCH if latest is None
                else latest, p.log.log_start_offset)

    def on_fetch_response(self, error: ErrorCode, high_watermark: int, log_start_offset: int,
                          records: Any, now_ms: int, backoff_ms: int) -> int:
        """Apply one partition of a fetch response; the bytes appended."""
        p = self.partition
        if error == ErrorCode.offset_out_of_range:
            if log_start_offset > p.log.log_end_offset:
                # the leader's log starts past ours (retention): start afresh there
                p.truncate_fully_and_start_at(log_start_offset)
            else:
                self.state = TRUNCATING
            return 0
        if error != ErrorCode.none:
            self.on_error(error, now_ms, backoff_ms)
            return 0
        appended = 0
        if records:
            try:
                appended = p.append_as_follower(records)
            except KafkaError as exc:
                self.on_error(exc.code, now_ms, backoff_ms)
                return 0
        p.update_follower_hw(high_watermark)
        if log_start_offset > p.log.log_start_offset:
            # the leader deleted records: follow it, never past our HW
            upto = min(log_start_offset, p.high_watermark)
            if upto > p.log.log_start_offset:
                p.log.delete_records_before(upto)
        return appended

    def on_error(self, error: ErrorCode, now_ms: int, backoff_ms: int) -> None:
        if error == ErrorCode.fenced_leader_epoch:
            self.state = FENCED  # a newer image will restart us
            return
        self.state = DELAYED
        self.delayed_until = now_ms + backoff_ms

    @staticmethod
    def retriable(error: ErrorCode) -> bool:
        return error in _RETRIABLE
