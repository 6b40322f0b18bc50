"""ReplicaManager.fetch_messages without sockets: how far each kind of fetch reads (HW, LSO,
log end for a follower), leader-epoch checks, unknown partitions, and the long poll through the
ReplicaManager's fetch purgatory."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from odradek.replication.fetch_params import FetchParams
from odradek.replication.manager import ReplicaManager
from odradek.replication.partition import Partition
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

TID = uuid.uuid4()
EPOCH = 3


@pytest.fixture
def rm(tmp_path: Path) -> Any:
    manager = ReplicaManager(None, 1, tmp_path, lambda topic: LogConfig())
    log = Log.open(tmp_path / "t-0", LogConfig())
    manager.partitions[("t", 0)] = Partition("t", 0, TID, log, leader=1, leader_epoch=EPOCH,
                                             replicas=[1], isr=[1])
    yield manager
    log.close()


def produce(rm: ReplicaManager, n: int = 1, **kw: Any) -> int:
    batch = build_batch([Record(-1, int(time.time() * 1000), b"k", b"v" * 20)] * n, **kw)
    result = rm.append("t", 0, memoryview(batch), 1)
    assert result.error == ErrorCode.none, result
    return result.base_offset


def fetch(rm: ReplicaManager, offset: int = 0, *, replica_id: int = -1, isolation: int = 0,
          leader_epoch: int = -1, name: str | None = "t", by_id: bool = False,
          max_wait_ms: int = 0) -> Any:
    params = FetchParams(replica_id, max_wait_ms, 1, 1 << 20, isolation, by_id)
    topics = [(name, TID, [(0, offset, 1 << 20, leader_epoch)])]
    return rm.fetch_messages(params, topics, lambda results: results)


def only(results: Any) -> Any:
    ((_, _, (part,)),) = results
    return part


def test_leader_epochs(rm: ReplicaManager) -> None:
    produce(rm)
    assert only(fetch(rm, leader_epoch=EPOCH - 1)).error_code == ErrorCode.fenced_leader_epoch
    assert only(fetch(rm, leader_epoch=EPOCH + 1)).error_code == ErrorCode.unknown_leader_epoch
    for epoch in (EPOCH, -1):
        part = only(fetch(rm, leader_epoch=epoch))
        assert part.error_code == ErrorCode.none and part.records


def test_unknown_partitions(rm: ReplicaManager) -> None:
    assert only(fetch(rm, name="nope")).error_code == ErrorCode.unknown_topic_or_partition
    assert only(fetch(rm, name=None, by_id=True)).error_code == ErrorCode.unknown_topic_id


def test_a_partition_the_metadata_knows_but_not_hosted_here_is_not_led_here(
        rm: ReplicaManager) -> None:
    # Kafka's getPartitionOrError: the image names it (a new topic whose logs this node has
    # not opened yet, or one it is no replica of): NOT_LEADER_OR_FOLLOWER, which clients
    # retry after a metadata refresh; a partition the image lacks stays unknown
    from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage

    topic = TopicImage("new", uuid.uuid4(), {0: PartitionImage(0, (1, 2), (1, 2), 1, 0, 0)})
    rm.image_of = lambda: MetadataImage(topics_by_name={"new": topic},
                                        topics_by_id={topic.topic_id: topic})
    assert only(fetch(rm, name="new")).error_code == ErrorCode.not_leader_or_follower
    assert rm.append("new", 0, memoryview(b"x"), 1).error == ErrorCode.not_leader_or_follower
    assert rm.append("new", 1, memoryview(b"x"), 1).error == ErrorCode.unknown_topic_or_partition
    assert only(fetch(rm, name="nope")).error_code == ErrorCode.unknown_topic_or_partition


def test_each_kind_of_fetch_reads_to_its_bound(rm: ReplicaManager) -> None:
    produce(rm, 2)  # offsets 0-1
    pid = 11
    part = rm.get("t", 0)
    assert part is not None
    part.log.producer_state.mark_verified(pid, 0)  # what AddPartitionsToTxn records
    produce(rm, 1, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
    assert (part.last_stable_offset, part.high_watermark, part.log_end_offset) == (2, 3, 3)
    uncommitted = only(fetch(rm))
    committed = only(fetch(rm, isolation=1))
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (3, 2)
    assert len(uncommitted.records) > len(committed.records) > 0
    # a follower reads to the log end, past a high watermark its ISR has not reached yet
    part.make_leader(EPOCH, 1, [1, 2], [1, 2], int(time.time() * 1000))
    part.high_watermark = 2
    assert len(only(fetch(rm)).records) == len(committed.records)
    follower = only(fetch(rm, replica_id=2))
    assert follower.error_code == ErrorCode.none
    assert len(follower.records) == len(uncommitted.records)


def test_long_poll_wakes_on_append_and_at_shutdown(rm: ReplicaManager) -> None:
    async def scenario() -> tuple[Any, Any, int, int]:
        waiting = fetch(rm, max_wait_ms=60_000)
        assert isinstance(waiting, asyncio.Future) and len(rm.fetch_purgatory) == 1
        produce(rm)
        woken = only(await asyncio.wait_for(waiting, 10))
        parked = fetch(rm, offset=1, max_wait_ms=60_000)
        assert isinstance(parked, asyncio.Future)
        forced = rm.complete_delayed_operations()
        empty = only(await asyncio.wait_for(parked, 10))
        return woken, empty, forced, len(rm.fetch_purgatory)

    woken, empty, forced, left = asyncio.run(scenario())
    assert woken.error_code == ErrorCode.none and woken.records
    assert empty.error_code == ErrorCode.none and empty.records is None
    assert (forced, left) == (1, 0)
