"""The read half of a fetch (Kafka's ReplicaManager.readFromLog), mixed into ReplicaManager:
each partition read up to the bound its fetcher may see (log end for a follower, whose fetch
also moves the leader's view of its log end, the ISR and the HW; LSO for read_committed; HW
else), a follower serving consumers of its rack (KIP-392), the preferred read replica."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch import FetchPartitionResponse
from odradek.replication.fetch_params import (
    INLINE_READ_BYTES,
    FetchIsolation,
    FetchParams,
    FetchTopic,
    FetchTopicResult,
)
from odradek.replication.partition import Partition

__all__ = ["FetchErrorCounts", "FetchReading"]


class FetchErrorCounts:
    """errors_total of Fetch (Kafka's ErrorsPerSec): the error codes the fetches' answers
    carried, counted by the read that set them (a clean read counts nothing; the broker's
    collector folds these into its families at scrape time). `responses`: the reads that
    carried at least one (the collector's NONE is the answered fetches less these)."""

    __slots__ = ("codes", "responses")

    def __init__(self) -> None:
        self.codes: dict[int, int] = {}
        self.responses = 0

    def add(self, codes: list[int]) -> None:
        counts = self.codes
        for code in codes:
            counts[code] = counts.get(code, 0) + 1
        self.responses += 1

    def take_back(self, codes: list[int]) -> None:
        """A read whose answer was not sent with its codes (a quota-throttled fetch goes out
        empty): its counts undone."""
        if not codes:
            return
        counts = self.codes
        for code in codes:
            counts[code] = counts.get(code, 0) - 1
        self.responses -= 1


def _noted(failed: list[int] | None, code: int) -> list[int]:
    """`failed` with `code` appended, made if it was None."""
    if failed is None:
        return [code]
    failed.append(code)
    return failed


class FetchReading:
    fetch_errors: FetchErrorCounts
    node_id: int
    partitions: dict[tuple[str, int], Partition]
    racks: dict[int, str | None]
    _rack_aware: bool
    clock: Callable[[], int]
    offline_partitions: set[tuple[str, int]]

    def missing_partition_error(self, topic: str | None, partition: int) -> ErrorCode:
        """The error for a partition not hosted here: KAFKA_STORAGE_ERROR when its log may
        be on an offline log directory (JBOD); NOT_LEADER_OR_FOLLOWER when the metadata
        knows it (Kafka's getPartitionOrError: the client refreshes its metadata and tries
        again; a new topic's image is served before this node has opened its logs); else
        UNKNOWN_TOPIC_OR_PARTITION."""
        if (topic, partition) in getattr(self, "offline_partitions", ()):
            return ErrorCode.kafka_storage_error
        image_of = getattr(self, "image_of", None)
        if image_of is not None and topic is not None:
            known = image_of().topics_by_name.get(topic)
            if known is not None and partition in known.partitions:
                return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

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
        errors = False  # answer now: a partition failed, or a follower's fetch moved the HW
        # the error codes set, for errors_total: made at the first (a clean read, the common
        # case, builds no list)
        failed: list[int] | None = None
        watched: dict[Partition, int] = {}
        partitions = self.partitions
        node_id = self.node_id
        replica_id = params.replica_id
        now = self.clock() if replica_id >= 0 else 0
        out: list[FetchTopicResult] = []
        for name, tid, parts in topics:
            results = []
            for index, offset, part_max, leader_epoch in parts:
                part = partitions.get((name, index)) if name is not None else None
                if part is None:
                    code = (ErrorCode.unknown_topic_id if params.topic_ids and name is None
                            else self.missing_partition_error(name, index))
                    results.append(FetchPartitionResponse(index, code, -1, -1, -1, None, -1,
                                                          None))
                    failed = _noted(failed, code)
                    errors = True
                    continue
                part.fetch_requests += 1
                preferred = -1
                if part.leader != node_id:
                    # a follower serves consumers that can be sent elsewhere (client metadata,
                    # Fetch v11+: KIP-392), up to its HW; never another follower
                    if to_log_end or params.client_rack is None:
                        results.append(FetchPartitionResponse(
                            index, ErrorCode.not_leader_or_follower, -1, -1, -1, None, -1, None))
                        part.failed_fetch += 1
                        failed = _noted(failed, ErrorCode.not_leader_or_follower)
                        errors = True
                        continue
                elif to_log_end and (leader_epoch < 0 or leader_epoch == part.leader_epoch):
                    # a follower's fetch: its log ends at `offset`; the ISR and HW may move
                    before = part.high_watermark
                    code = part.update_follower_fetch(replica_id, offset, now,
                                                      params.replica_epoch)
                    if code is not None:
                        results.append(FetchPartitionResponse(
                            index, code, -1, -1, -1, None, -1, None))
                        part.failed_fetch += 1
                        failed = _noted(failed, code)
                        errors = True
                        continue
                    if part.high_watermark != before:
                        # its own fetch moved the HW: answer now, so that it learns the new
                        # HW without waiting for the next append (as an error, it never waits)
                        errors = True
                elif self._rack_aware and params.client_rack:
                    preferred = self._preferred_read_replica(part, offset, params.client_rack)
                hw = part.high_watermark
                lso = part.last_stable_offset
                if leader_epoch >= 0 and leader_epoch != part.leader_epoch:
                    code = part.leader_epoch_error(leader_epoch)
                    results.append(FetchPartitionResponse(
                        index, code, hw, lso, part.log_start_offset, None, -1, None))
                    part.failed_fetch += 1
                    failed = _noted(failed, code)
                    errors = True
                    continue
                lg = part.log
                start = lg.log_start_offset
                leo = lg.log_end_offset
                upper = leo if to_log_end else lso if committed else hw
                if preferred >= 0:
                    # KIP-392: read from that replica instead; no records from here
                    results.append(FetchPartitionResponse(index, ErrorCode.none, hw, lso, start,
                                                          None, preferred, None))
                    continue
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
                        part.failed_fetch += 1
                        failed = _noted(failed, exc.code)
                        errors = True
                        continue
                    region = res.region
                    size = region.size if region is not None else 0
                    start = lg.log_start_offset
                if size:
                    if replica_id >= 0:
                        part.replication_bytes_out += size
                    else:
                        part.bytes_out += size
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
        if failed is not None:  # each read answers once: the first, or a delayed fetch's second
            self.fetch_errors.add(failed)
        return out, accumulated, errors, watched

    def _preferred_read_replica(self, part: Partition, offset: int, rack: str) -> int:
        """Kafka's RackAwareReplicaSelector: the leader when it is in the client's rack (-1:
        read here), else the in-sync follower of that rack that has `offset` and the most data,
        else the leader."""
        racks = self.racks
        if racks.get(self.node_id) == rack:
            return -1
        best, best_leo = -1, -1
        for r in part.isr:
            state = part.replica_states.get(r)
            if (state is not None and racks.get(r) == rack and state.leo >= offset
                    and state.leo > best_leo):
                best, best_leo = r, state.leo
        return best
